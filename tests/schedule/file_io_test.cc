#include "schedule/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pipetwin {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pipetwin_file_io_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileIo, SymlinkAtTheOldTemporaryNameIsNotWrittenThrough) {
  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "precious";
  const fs::path out = dir_ / "report.json";
  fs::create_symlink(victim, dir_ / "report.json.tmp");
  ASSERT_TRUE(WriteFileAtomic(out.string(), "new").ok());
  EXPECT_EQ(Slurp(victim), "precious");
  EXPECT_EQ(Slurp(out), "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "report.json.tmp"));
}

TEST_F(FileIo, ExistingFileAtTheOldTemporaryNameIsKept) {
  std::ofstream(dir_ / "r.json.tmp") << "other writer";
  ASSERT_TRUE(WriteFileAtomic((dir_ / "r.json").string(), "x").ok());
  EXPECT_EQ(Slurp(dir_ / "r.json.tmp"), "other writer");
}

TEST_F(FileIo, LeavesNoTemporaryFileBehind) {
  ASSERT_TRUE(WriteFileAtomic((dir_ / "a").string(), "1").ok());
  ASSERT_TRUE(WriteFileAtomic((dir_ / "a").string(), "2").ok());
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename() != "a";
  EXPECT_EQ(n, 0);
  EXPECT_EQ(Slurp(dir_ / "a"), "2");
}

TEST_F(FileIo, ConcurrentWritersEachWriteWholeContents) {
  const std::string path = (dir_ / "shared").string();
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&path, t] {
      const std::string text(100000, static_cast<char>('a' + t));
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(WriteFileAtomic(path, text).ok());
    });
  }
  for (auto& t : ts) t.join();
  const std::string got = Slurp(path);
  ASSERT_EQ(got.size(), 100000u);
  EXPECT_EQ(got.find_first_not_of(got[0]), std::string::npos);
  const auto n = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  EXPECT_EQ(n, 1);
}

TEST_F(FileIo, FailedWriteRemovesTheTemporaryAndKeepsTheTarget) {
  // The target is a non-empty directory: the rename fails.
  fs::create_directories(dir_ / "d" / "x");
  EXPECT_FALSE(WriteFileAtomic((dir_ / "d").string(), "x").ok());
  const auto n = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  EXPECT_EQ(n, 1);
}

TEST_F(FileIo, RefusesToReplaceSomethingThatIsNotAFile) {
  EXPECT_FALSE(WriteFileAtomic("/dev/null", "x").ok());
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(FileIo, ReadsWithinTheLimitOnly) {
  std::ofstream(dir_ / "small") << "hello";
  auto ok = ReadInputFile((dir_ / "small").string(), "the job file", 5);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "hello");
  auto big = ReadInputFile((dir_ / "small").string(), "the job file", 4);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("limit of 4 bytes"), std::string::npos);
}

TEST_F(FileIo, RefusesDevicesAndDirectories) {
  auto zero = ReadInputFile("/dev/zero", "the job file");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("regular file or a pipe"), std::string::npos);
  auto d = ReadInputFile(dir_.string(), "the job file");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("is a directory"), std::string::npos);
  auto missing = ReadInputFile((dir_ / "nope").string(), "the job file");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot open the job file"), std::string::npos);
}

TEST_F(FileIo, ChecksOutputPaths) {
  EXPECT_TRUE(CheckOutputPath((dir_ / "new.json").string(), "--report").ok());
  EXPECT_FALSE(CheckOutputPath((dir_ / "no" / "x.json").string(), "--report").ok());
  EXPECT_FALSE(CheckOutputPath(dir_.string(), "--report").ok());
  EXPECT_FALSE(CheckOutputPath("/dev/null", "--report").ok());
  EXPECT_TRUE(SamePath((dir_ / "a").string(), (dir_ / "." / "a").string()));
  EXPECT_FALSE(SamePath((dir_ / "a").string(), (dir_ / "b").string()));
}

// fuzz_cli found `schedule job.yaml --csv <a 300-byte name>` exiting 1 (the temporary could
// not be created: ENAMETOOLONG). A name or path the file system cannot hold is bad input,
// named before any work; a name of exactly NAME_MAX bytes still writes (its temporary's name
// is cut to fit), and leaves nothing else behind.
TEST_F(FileIo, NamesTooLongAreBadInputAndTheLongestStillWrites) {
  const long name_max = ::pathconf(dir_.c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 8);
  const auto longest = static_cast<std::size_t>(name_max);
  const std::string too_long = (dir_ / std::string(longest + 1, 'x')).string();
  const auto checked = CheckOutputPath(too_long, "--csv");
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.error().code, ErrorCode::kBadInput);
  EXPECT_NE(checked.error().message.find("--csv"), std::string::npos);
  const Status written = WriteFileAtomic(too_long, "x");
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().code, ErrorCode::kBadInput);
  std::string very_deep = dir_.string();
  while (very_deep.size() < 5000) very_deep += "/d";
  EXPECT_EQ(CheckOutputPath(very_deep + "/r.json", "--report").error().code, ErrorCode::kBadInput);
  EXPECT_EQ(CheckOutputDir(very_deep, "--out").error().code, ErrorCode::kBadInput);
  EXPECT_EQ(CheckOutputDir((dir_ / std::string(longest + 1, 'd')).string(), "--out").error().code,
            ErrorCode::kBadInput);

  const fs::path exact = dir_ / std::string(longest, 'y');
  ASSERT_TRUE(CheckOutputPath(exact.string(), "--csv").ok());
  ASSERT_TRUE(WriteFileAtomic(exact.string(), "whole").ok());
  EXPECT_EQ(Slurp(exact), "whole");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace pipetwin
