#include "schedule/atomic_file.h"

#include <zlib.h>

#include <cstdio>
#include <limits>
#include <utility>

namespace pipetwin {

Compression CompressionFor(std::string_view path) {
  constexpr std::string_view kGz = ".gz";
  return path.size() > kGz.size() && path.substr(path.size() - kGz.size()) == kGz
             ? Compression::kGzip
             : Compression::kNone;
}

struct AtomicFileWriter::Impl {
  std::string path;
  std::string tmp;
  std::FILE* plain = nullptr;
  gzFile gz = nullptr;
  bool failed = false;

  // Closes the temporary file; false when the close (the last flush) failed.
  bool Close() {
    bool ok = true;
    if (plain != nullptr) ok = std::fclose(plain) == 0;
    if (gz != nullptr) ok = gzclose(gz) == Z_OK;
    plain = nullptr;
    gz = nullptr;
    return ok;
  }
  void Abandon() {
    Close();
    std::remove(tmp.c_str());
  }
};

AtomicFileWriter::AtomicFileWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&&) noexcept = default;
AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&&) noexcept = default;

AtomicFileWriter::~AtomicFileWriter() {
  if (impl_ && (impl_->plain != nullptr || impl_->gz != nullptr)) impl_->Abandon();
}

Expected<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path,
                                                  Compression compression) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->tmp = path + ".tmp";
  if (compression == Compression::kGzip) {
    impl->gz = gzopen(impl->tmp.c_str(), "wb6");
    // A larger buffer than zlib's 8 KiB default: fewer, larger writes for big traces.
    if (impl->gz != nullptr) gzbuffer(impl->gz, 256 * 1024);
  } else {
    impl->plain = std::fopen(impl->tmp.c_str(), "wb");
  }
  if (impl->plain == nullptr && impl->gz == nullptr) {
    return Error::Failure(path + ": cannot write (" + impl->tmp + " cannot be created)");
  }
  return AtomicFileWriter(std::move(impl));
}

Status AtomicFileWriter::Write(std::string_view data) {
  Impl& w = *impl_;
  if (w.failed || (w.plain == nullptr && w.gz == nullptr)) {
    return Error::Failure(w.path + ": write failed");
  }
  if (w.plain != nullptr) {
    w.failed = std::fwrite(data.data(), 1, data.size(), w.plain) != data.size();
  } else {
    // gzwrite takes an unsigned length: large pieces go in slices.
    constexpr std::size_t kSlice = std::numeric_limits<unsigned>::max() / 2;
    while (!w.failed && !data.empty()) {
      const std::size_t n = data.size() < kSlice ? data.size() : kSlice;
      w.failed = gzwrite(w.gz, data.data(), static_cast<unsigned>(n)) != static_cast<int>(n);
      data.remove_prefix(n);
    }
  }
  if (w.failed) return Error::Failure(w.path + ": write failed");
  return OkStatus();
}

Status AtomicFileWriter::Commit() {
  Impl& w = *impl_;
  if (w.failed || !w.Close()) {
    w.Abandon();
    return Error::Failure(w.path + ": write failed");
  }
  if (std::rename(w.tmp.c_str(), w.path.c_str()) != 0) {
    std::remove(w.tmp.c_str());
    return Error::Failure(w.path + ": cannot rename " + w.tmp + " into place");
  }
  return OkStatus();
}

Status WriteFileAtomicGzip(const std::string& path, std::string_view contents) {
  auto w = AtomicFileWriter::Open(path, Compression::kGzip);
  if (!w) return w.error();
  if (Status s = w->Write(contents); !s) return s;
  return w->Commit();
}

}  // namespace pipetwin
