#include "schedule/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

namespace pipetwin {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// The directory holding `path` ("." for a bare file name).
std::string DirOf(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The longest file name the directory of `path` takes (NAME_MAX: 255 on Linux file systems).
std::size_t NameMax(const std::string& path) {
  const long n = ::pathconf(DirOf(path).c_str(), _PC_NAME_MAX);
  return n > 0 ? static_cast<std::size_t>(n) : 255;
}

// An output path the file system cannot hold, as bad input: a file name longer than the
// directory takes, or a path longer than PATH_MAX. `what` names the path in the message.
Status CheckNameLengths(const std::string& path, const std::string& what) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t base = slash == std::string::npos ? path.size() : path.size() - slash - 1;
  if (base > NameMax(path)) {
    return Error::BadInput(what + ": the file name is " + std::to_string(base) +
                           " bytes long; its directory takes at most " +
                           std::to_string(NameMax(path)));
  }
  if (path.size() >= PATH_MAX) {
    return Error::BadInput(what + ": the path is " + std::to_string(path.size()) +
                           " bytes long; at most " + std::to_string(PATH_MAX - 1) + " are allowed");
  }
  return OkStatus();
}

// A name suffix no other writer is likely to pick; O_EXCL makes a clash harmless anyway.
std::string RandomSuffix() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 gen{std::random_device{}() ^
                                   (static_cast<std::uint64_t>(::getpid()) << 32)};
  std::string s(6, 'x');
  for (char& c : s) c = kChars[gen() % (sizeof(kChars) - 1)];
  return s;
}

bool WriteAll(int fd, const std::string& contents) {
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

// The temporary files being written. A SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`, mpirun
// stopping the ranks) removes them before the signal takes its default course, so a stopped
// run leaves no partial file. SIGKILL cannot be caught: its temporary (a random name, never
// PATH.tmp) stays. The handler is installed only where the signal has its default action (a
// program's own handler, e.g. Python's for SIGINT, is left alone).
struct LiveTemp {
  std::atomic<bool> used{false};
  char name[4096] = {};
};
LiveTemp g_live[16];
std::mutex g_live_mutex;

extern "C" void RemoveLiveTemps(int sig) {
  for (LiveTemp& t : g_live) {
    if (t.used.load(std::memory_order_acquire)) ::unlink(t.name);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallTempHandlers() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = RemoveLiveTemps;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

void Track(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, InstallTempHandlers);
  if (name.size() >= sizeof(LiveTemp::name)) return;  // not removed on a signal
  const std::lock_guard<std::mutex> lock(g_live_mutex);
  for (LiveTemp& t : g_live) {
    if (t.used.load(std::memory_order_relaxed)) continue;
    std::memcpy(t.name, name.c_str(), name.size() + 1);
    t.used.store(true, std::memory_order_release);
    return;
  }
}

void Untrack(const std::string& name) {
  const std::lock_guard<std::mutex> lock(g_live_mutex);
  for (LiveTemp& t : g_live) {
    if (t.used.load(std::memory_order_relaxed) && name == t.name) {
      t.used.store(false, std::memory_order_release);
    }
  }
}

}  // namespace

void RemoveTemp(const std::string& tmp) {
  ::unlink(tmp.c_str());
  Untrack(tmp);
}

Expected<std::string> ReadInputFile(const std::string& path, const std::string& what,
                                    std::int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Error::BadInput(path + ": cannot open " + what + " (" + ErrnoText(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error::BadInput(path + ": cannot read " + what + " (" + ErrnoText(err) + ")");
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error::BadInput(path + ": is a directory, not " + what);
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    ::close(fd);
    return Error::BadInput(path + ": " + what + " must be a regular file or a pipe");
  }
  const std::string limit = std::to_string(max_bytes) + " bytes";
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    ::close(fd);
    return Error::BadInput(path + ": " + what + " is larger than the limit of " + limit);
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Error::BadInput(path + ": cannot read " + what + " (" + ErrnoText(err) + ")");
    }
    if (n == 0) break;
    if (static_cast<std::int64_t>(text.size()) + n > max_bytes) {
      ::close(fd);
      return Error::BadInput(path + ": " + what + " is larger than the limit of " + limit);
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

Expected<TempFile> CreateTempFor(const std::string& path) {
  // Both are the user's choice of output path, so bad input (exit 2), not a failure.
  if (path.empty()) return Error::BadInput("an output file name is empty: give a file path");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    return Error::BadInput(path + ": cannot write: it exists and is not a regular file" +
                           (S_ISDIR(st.st_mode) ? " (a directory: give a file path)" : ""));
  }
  if (Status s = CheckNameLengths(path, path); !s) return s.error();
  // The temporary is the target's name and a suffix, its name cut so that the whole still fits
  // the directory (a target name of up to NAME_MAX bytes stays writable).
  const std::size_t slash = path.find_last_of('/');
  const std::size_t base_at = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t keep = std::min(path.size() - base_at, NameMax(path) - 7);
  const std::string stem = path.substr(0, base_at + keep);
  TempFile t;
  for (int attempt = 0; attempt < 100 && t.fd < 0; ++attempt) {
    t.name = stem + "." + RandomSuffix();
    t.fd = ::open(t.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (t.fd < 0 && errno != EEXIST) {
      return Error::Failure(
          path + ": cannot write (no temporary file in its directory: " + ErrnoText(errno) + ")");
    }
  }
  if (t.fd < 0) return Error::Failure(path + ": cannot write (no free temporary file name)");
  Track(t.name);
  return t;
}

Status CommitTemp(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    RemoveTemp(tmp);
    return Error::Failure(path + ": cannot rename into place (" + ErrnoText(err) + ")");
  }
  Untrack(tmp);
  const int dfd = ::open(DirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    // Some file systems cannot sync a directory (EINVAL); the file itself is synced.
    const int synced = ::fsync(dfd);
    const int err = errno;
    ::close(dfd);
    if (synced != 0 && err != EINVAL && err != EROFS) {
      return Error::Failure(path + ": written, but its directory cannot be synced (" +
                            ErrnoText(err) + ")");
    }
  }
  return OkStatus();
}

Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  auto t = CreateTempFor(path);
  if (!t) return t.error();
  int fd = t->fd;
  const std::string tmp = t->name;
  const auto fail = [&](const std::string& what, int err) -> Status {
    if (fd >= 0) ::close(fd);
    RemoveTemp(tmp);
    return Error::Failure(path + ": " + what + " (" + ErrnoText(err) + ")");
  };
  if (!WriteAll(fd, contents)) return fail("write failed", errno);
  if (::fsync(fd) != 0) return fail("write failed (fsync)", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("write failed (close)", errno);
  return CommitTemp(tmp, path);
}

Status CheckOutputPath(const std::string& path, const std::string& option) {
  if (path.empty()) return Error::BadInput(option + ": the output path is empty");
  if (Status s = CheckNameLengths(path, option + ": " + path); !s) return s;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Error::BadInput(option + ": " + path + " is a directory (a file name is expected)");
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      return Error::BadInput(option + ": " + path +
                             " exists and is not a regular file (it would be replaced)");
    }
  }
  const std::string dir = DirOf(path);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode)) {
    return Error::BadInput(option + ": " + path + ": the directory " + dir + " does not exist");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Error::BadInput(option + ": " + path + ": the directory " + dir + " is not writable");
  }
  return OkStatus();
}

Status CheckOutputDir(const std::string& dir, const std::string& option) {
  if (dir.empty()) return Error::BadInput(option + ": the output folder is empty");
  namespace fs = std::filesystem;
  for (const fs::path& part : fs::path(dir)) {
    if (part.native().size() > NAME_MAX) {
      return Error::BadInput(option + ": " + dir + ": a folder name is " +
                             std::to_string(part.native().size()) + " bytes long; at most " +
                             std::to_string(NAME_MAX) + " are allowed");
    }
  }
  if (dir.size() >= PATH_MAX - NAME_MAX) {
    return Error::BadInput(option + ": " + dir + ": the path is " + std::to_string(dir.size()) +
                           " bytes long; a folder's path may have at most " +
                           std::to_string(PATH_MAX - NAME_MAX - 1) + " (its files' names follow)");
  }
  // The folder itself, else its nearest ancestor that exists: what the writes will go into.
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "out/"
  for (;;) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      const std::string where = p == fs::path(dir) ? dir : dir + ": " + p.string();
      if (!S_ISDIR(st.st_mode)) {
        return Error::BadInput(option + ": " + where + " exists and is not a directory");
      }
      if (::access(p.c_str(), W_OK | X_OK) != 0) {
        return Error::BadInput(option + ": " + where + " is not a writable directory");
      }
      return OkStatus();
    }
    const int err = errno;
    if (err != ENOENT) {
      return Error::BadInput(option + ": " + dir + ": cannot use " + p.string() + " (" +
                             ErrnoText(err) + ")");
    }
    fs::path up = p.parent_path();
    if (up.empty()) up = ".";
    if (up == p) return Error::BadInput(option + ": " + dir + ": no existing folder holds it");
    p = up;
  }
}

bool SamePath(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  std::error_code ea;
  std::error_code eb;
  const auto na = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  const auto nb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  if (ea || eb) return a == b;
  return na == nb;
}

}  // namespace pipetwin
