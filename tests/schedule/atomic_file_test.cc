#include "schedule/atomic_file.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pipetwin
