// atomic_file.h — files written whole or not at all, plain or gzip-compressed, in pieces.
//
// The text goes to a new temporary file beside the path as it is produced (file_io.h's
// CreateTempFor: a random name created with O_EXCL, never an existing file or a symlink;
// nothing holds the whole file in memory), and Commit() syncs it and renames it into place; a
// writer destroyed without Commit() removes its temporary file, so a failed run never leaves a
// half-written file behind. With Compression::kGzip the file is a gzip stream (zlib; deterministic:
// no time stamp).
//
//   const std::string path = "t.json.gz";
//   Expected<AtomicFileWriter> w = AtomicFileWriter::Open(path, CompressionFor(path));
//   if (!w) return w.error();
//   if (Status s = w->Write("{...}"); !s) return s;
//   return w->Commit();
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "schedule/expected.h"

namespace pipetwin {

enum class Compression { kNone, kGzip };

// kGzip for a path ending in ".gz", else kNone.
Compression CompressionFor(std::string_view path);

class AtomicFileWriter {
 public:
  static Expected<AtomicFileWriter> Open(const std::string& path, Compression compression);
  AtomicFileWriter(AtomicFileWriter&&) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) noexcept;
  ~AtomicFileWriter();  // without Commit(): removes the temporary file

  // After a failed Write, later writes fail too and Commit() removes the temporary file.
  Status Write(std::string_view data);
  // Flushes, closes and renames the temporary file to the path.
  Status Commit();

 private:
  struct Impl;
  explicit AtomicFileWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The whole `contents`, gzip-compressed, written atomically (WriteFileAtomic's gzip twin).
Status WriteFileAtomicGzip(const std::string& path, std::string_view contents);

}  // namespace pipetwin
