#include "schedule/atomic_file.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "schedule/file_io.h"

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
  int fd = -1;  // the temporary file's descriptor (owned by plain or gz once they are open)
  std::FILE* plain = nullptr;
  gzFile gz = nullptr;
  bool failed = false;
  int err = 0;  // errno where a write, flush, sync or close first failed

  // "PATH: write failed (No space left on device)".
  Error Failed() const {
    return Error::Failure(path + ": write failed" +
                          (err != 0 ? " (" + std::string(std::strerror(err)) + ")" : ""));
  }
  void Note(bool ok) {
    if (!ok && err == 0) err = errno;
  }

  // Flushes, syncs and closes the temporary file; false when any of it failed.
  bool Close(bool sync) {
    bool ok = true;
    if (plain != nullptr) {
      ok = std::fflush(plain) == 0 && (!sync || ::fsync(fd) == 0);
      Note(ok);
      const bool closed = std::fclose(plain) == 0;
      Note(closed);
      ok = closed && ok;
    }
    if (gz != nullptr) {
      ok = gzflush(gz, Z_FINISH) == Z_OK && (!sync || ::fsync(fd) == 0);
      Note(ok);
      const bool closed = gzclose(gz) == Z_OK;
      Note(closed);
      ok = closed && ok;
    }
    plain = nullptr;
    gz = nullptr;
    return ok;
  }
  void Abandon() {
    Close(false);
    RemoveTemp(tmp);
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
  // A new temporary file with a random name (file_io.h): never an existing file or a symlink.
  auto t = CreateTempFor(path);
  if (!t) return t.error();
  impl->tmp = t->name;
  impl->fd = t->fd;
  if (compression == Compression::kGzip) {
    impl->gz = gzdopen(impl->fd, "wb6");
    // A larger buffer than zlib's 8 KiB default: fewer, larger writes for big traces.
    if (impl->gz != nullptr) gzbuffer(impl->gz, 256 * 1024);
  } else {
    impl->plain = ::fdopen(impl->fd, "wb");
  }
  if (impl->plain == nullptr && impl->gz == nullptr) {
    ::close(impl->fd);
    RemoveTemp(impl->tmp);
    return Error::Failure(path + ": cannot write (" + impl->tmp + " cannot be opened)");
  }
  return AtomicFileWriter(std::move(impl));
}

Status AtomicFileWriter::Write(std::string_view data) {
  Impl& w = *impl_;
  if (w.failed || (w.plain == nullptr && w.gz == nullptr)) return w.Failed();
  errno = 0;
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
  if (w.failed) {
    w.Note(false);
    return w.Failed();
  }
  return OkStatus();
}

Status AtomicFileWriter::Commit() {
  Impl& w = *impl_;
  if (w.failed || !w.Close(true)) {
    w.Abandon();
    return w.Failed();
  }
  return CommitTemp(w.tmp, w.path);
}

Status WriteFileAtomicGzip(const std::string& path, std::string_view contents) {
  auto w = AtomicFileWriter::Open(path, Compression::kGzip);
  if (!w) return w.error();
  if (Status s = w->Write(contents); !s) return s;
  return w->Commit();
}

}  // namespace pipetwin
