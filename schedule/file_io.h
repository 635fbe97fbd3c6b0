// file_io.h — reading input files within a size limit and writing output files safely.
//
// ReadInputFile reads a regular file or a pipe, at most `max_bytes` (a directory, a device
// such as /dev/zero, or a file over the limit is bad input naming the path). WriteFileAtomic
// writes through a fresh temporary file next to the target (created with O_EXCL, so nothing
// already there — a file, a symlink — is written through or destroyed), fsyncs it, renames
// it over the target and fsyncs the directory; on failure the temporary file is removed.
//
//   Expected<std::string> text = ReadInputFile("job.yaml", "the job file");
//   if (!text) return text.error();
//   if (Status s = WriteFileAtomic("report.json", json); !s) return s.error();
#pragma once

#include <cstdint>
#include <string>

#include "schedule/expected.h"

namespace pipetwin {

// The largest input file (job, CSV, profile, report) pipetwin reads: 16 MiB.
inline constexpr std::int64_t kMaxInputFileBytes = 16LL << 20;

// `what` names the file in messages ("the job file", "the profile (--profile)").
Expected<std::string> ReadInputFile(const std::string& path, const std::string& what,
                                    std::int64_t max_bytes = kMaxInputFileBytes);

// Writes `contents` to `path` through a unique temporary file and a rename, so a failed run
// never leaves a half-written file behind and concurrent writers never share a temporary.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

// The pieces of WriteFileAtomic, for writers that stream (atomic_file.h): a new temporary file
// beside `path` (a random name created with O_EXCL | O_NOFOLLOW: never an existing file or a
// symlink), and its rename into place followed by a sync of the directory. The caller writes,
// fsyncs and closes the descriptor, or calls RemoveTemp on failure.
struct TempFile {
  int fd = -1;
  std::string name;
};
// Until it is committed or removed, the temporary is also removed when the process gets
// SIGINT, SIGTERM or SIGHUP (not SIGKILL).
Expected<TempFile> CreateTempFor(const std::string& path);
Status CommitTemp(const std::string& tmp, const std::string& path);
// Removes a temporary from CreateTempFor that will not be committed.
void RemoveTemp(const std::string& tmp);

// Checks, before any work, that `path` can be written as an output: its directory exists and
// is writable, and it is not a directory itself. `option` names the flag in the message.
Status CheckOutputPath(const std::string& path, const std::string& option);

// Checks, before any work, that `dir` can hold a command's output files: an existing writable
// directory, or a path to be created whose nearest existing ancestor is a writable directory
// (no part of it an existing file). `option` names the flag in the message.
Status CheckOutputDir(const std::string& dir, const std::string& option);

// True when both paths name the same file (same device and inode), or, where either does not
// exist yet, the same lexically normalised absolute path.
bool SamePath(const std::string& a, const std::string& b);

}  // namespace pipetwin
