#include "schedule/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "schedule/csv.h"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("pipetwin_atomic_file_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(AtomicFile, CompressionFollowsTheSuffix) {
  EXPECT_EQ(CompressionFor("t.json.gz"), Compression::kGzip);
  EXPECT_EQ(CompressionFor("t.json"), Compression::kNone);
  EXPECT_EQ(CompressionFor(".gz"), Compression::kNone);  // a name, not a suffix
  EXPECT_EQ(CompressionFor("t.gzip"), Compression::kNone);
}

TEST(AtomicFile, PiecesLandOnlyAtCommit) {
  const fs::path d = FreshDir("pieces");
  const std::string path = (d / "out.txt").string();
  auto w = AtomicFileWriter::Open(path, Compression::kNone);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write("hello, ").ok());
  ASSERT_TRUE(w->Write("world\n").ok());
  EXPECT_FALSE(fs::exists(path));
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_EQ(Read(path), "hello, world\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(AtomicFile, WithoutCommitNothingIsLeftAndTheOldFileStays) {
  const fs::path d = FreshDir("abandon");
  const std::string path = (d / "out.txt").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old\n").ok());
  {
    auto w = AtomicFileWriter::Open(path, Compression::kGzip);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("new").ok());
  }
  EXPECT_EQ(Read(path), "old\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(AtomicFile, GzipIsAGzipStreamAndDeterministic) {
  const fs::path d = FreshDir("gzip");
  std::string text;
  for (int i = 0; i < 10000; ++i)
    text += "{\"ph\":\"X\",\"name\":\"0F" + std::to_string(i) + "\"},\n";
  ASSERT_TRUE(WriteFileAtomicGzip((d / "a.gz").string(), text).ok());
  ASSERT_TRUE(WriteFileAtomicGzip((d / "b.gz").string(), text).ok());
  const std::string a = Read(d / "a.gz");
  ASSERT_GE(a.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(a[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(a[1]), 0x8b);
  EXPECT_LT(a.size(), text.size() / 4);
  EXPECT_EQ(a, Read(d / "b.gz"));  // no time stamp in the header
}

TEST(AtomicFile, AnUncreatableFileIsAFailureNamingThePath) {
  const fs::path d = FreshDir("missing");
  const std::string path = (d / "no" / "such" / "t.json.gz").string();
  auto w = AtomicFileWriter::Open(path, Compression::kGzip);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kFailure);
  EXPECT_NE(w.error().message.find(path + ": cannot write"), std::string::npos);
}

// An empty output path (`--report ''`) and a directory are the user's bad input: exit 2, not 1
// (the CLI fuzzer found `plan plan.yaml --report ''` exiting 1).
TEST(AtomicFile, AnEmptyPathOrADirectoryIsBadInput) {
  auto empty = AtomicFileWriter::Open("", Compression::kNone);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kBadInput);
  const fs::path d = FreshDir("isdir");
  auto dir = AtomicFileWriter::Open(d.string(), Compression::kNone);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code, ErrorCode::kBadInput);
  EXPECT_NE(dir.error().message.find("a directory"), std::string::npos);
}

// A full disk or a file size limit: the message says why (it said "write failed" alone), and
// neither the target nor the temporary is left behind. RLIMIT_FSIZE makes a write past 64 KiB
// fail with EFBIG (SIGXFSZ ignored), plain and gzip-compressed alike.
TEST(AtomicFile, AFailedWriteSaysWhy) {
  const fs::path d = FreshDir("efbig");
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  // Text that compresses poorly (a pseudo-random letter a byte), so gzip passes 64 KiB too.
  std::string big(1 << 20, 'x');
  std::uint32_t x = 1;
  for (char& c : big) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>('a' + (x >> 24) % 26);
  }
  Status plain = WriteFileAtomic((d / "p.json").string(), big);
  Status gz = [&] {
    auto w = AtomicFileWriter::Open((d / "g.json.gz").string(), Compression::kGzip);
    if (!w) return Status(w.error());
    for (int i = 0; i < 64; ++i) {
      if (Status s = w->Write(big); !s) return s;
    }
    return w->Commit();
  }();
  Status streamed = [&] {
    auto w = AtomicFileWriter::Open((d / "s.json").string(), Compression::kNone);
    if (!w) return Status(w.error());
    if (Status s = w->Write(big); !s) return s;
    return w->Commit();
  }();
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  const std::string why = std::string(" (") + std::strerror(EFBIG) + ")";
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().message, (d / "p.json").string() + ": write failed" + why);
  ASSERT_FALSE(gz.ok());
  EXPECT_EQ(gz.error().message, (d / "g.json.gz").string() + ": write failed" + why);
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(streamed.error().message, (d / "s.json").string() + ": write failed" + why);
  EXPECT_TRUE(fs::is_empty(d));  // no target, no temporary
  fs::remove_all(d);
}

}  // namespace
}  // namespace pipetwin
