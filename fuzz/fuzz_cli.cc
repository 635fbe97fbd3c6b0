// fuzz_cli.cc — libFuzzer target: the command line. The input is argv, one word per line
// ("simulate\njob.yaml\n--report\nr.json"), run through pipetwin's RunMain in a sandbox folder
// that holds inputs copied from examples/ (job.yaml, zbv.yaml, model.yaml, custom.yaml with
// custom.csv, profile.yaml, a.json, b.json, plan.yaml). Any argv must end in exit 0 or 2:
// a crash, a sanitizer report, an escaped exception or exit 1 ("internal error", or a failure
// where the arguments are at fault) is a finding.
//
// Only the commands that start no process and no MPI are run (simulate, schedule, schedules,
// presets, compare, plan, help, --version, unknown words); run, calibrate and validate are
// skipped. Words that could leave the sandbox (an absolute path, "..") are skipped too: the
// target writes files wherever argv says.
//
// The target changes its working directory to the sandbox: give libFuzzer absolute paths.
//
//   scripts/fuzz.sh 60 fuzz_cli     # or: build/fuzz/fuzz/fuzz_cli $PWD/CORPUS_DIR
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/commands.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kPlan =
    "schedule: 1f1b\nmodel: {preset: tiny}\ntraining: {global_batch: 8}\ncluster: {nodes: 1}\n"
    "search: {tp: [1, 2], pp: [1, 2]}\n";

// Once: a fresh folder under $TMPDIR with the inputs, made the working directory; stdout
// goes to /dev/null; plots run /bin/true instead of python.
void MakeSandbox() {
  const fs::path src = PIPETWIN_SOURCE_DIR;
  std::string tmpl = (fs::temp_directory_path() / "pipetwin-fuzz-cli-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  const fs::path box = tmpl;
  const std::pair<const char*, const char*> files[] = {
      {"examples/schedules/1f1b.yaml", "job.yaml"},
      {"examples/schedules/zbv.yaml", "zbv.yaml"},
      {"examples/schedules/custom.yaml", "custom.yaml"},
      {"examples/schedules/custom.csv", "custom.csv"},
      {"examples/validate/pp2.yaml", "model.yaml"},
      {"fuzz/seeds/fuzz_profile/pp2.yaml", "profile.yaml"},
      {"fuzz/seeds/fuzz_report/minimal.json", "a.json"},
      {"fuzz/seeds/fuzz_report/minimal.json", "b.json"}};
  for (const auto& [from, to] : files) fs::copy_file(src / from, box / to);
  if (FILE* f = std::fopen((box / "plan.yaml").c_str(), "w")) {
    std::fputs(kPlan, f);
    std::fclose(f);
  }
  fs::current_path(box);
  const int null = ::open("/dev/null", O_WRONLY);
  if (null < 0 || ::dup2(null, 1) < 0) std::abort();
  ::close(null);
  ::setenv("PIPETWIN_PYTHON", "/bin/true", 1);
}

// False where a word could reach outside the sandbox or the command would start processes.
bool Safe(const std::vector<std::string>& words) {
  if (words.empty()) return true;
  for (const char* skipped : {"run", "calibrate", "validate"}) {
    if (words[0] == skipped) return false;
  }
  for (const std::string& w : words) {
    if (w.find("..") != std::string::npos || w.find('~') != std::string::npos) return false;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i] != '/') continue;
      const char before = i == 0 ? '\0' : w[i - 1];
      const bool word_char = (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                             (before >= '0' && before <= '9') || before == '_';
      if (!word_char) return false;  // "/x", "--report=/x", "a//b"
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool made = (MakeSandbox(), true);
  (void)made;
  if (size > 4096) return 0;
  std::vector<std::string> words;
  std::string w;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0') return 0;  // argv words cannot hold NUL
    if (c == '\n') {
      words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) words.push_back(w);
  if (words.size() > 32 || !Safe(words)) return 0;
  std::vector<std::string> argv_words = {"pipetwin"};
  argv_words.insert(argv_words.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (std::string& s : argv_words) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int rc = pipetwin::RunMain(static_cast<int>(argv_words.size()), argv.data());
  if (rc != 0 && rc != 2) {
    std::fprintf(stderr, "fuzz_cli: exit %d (only 0 and 2 are expected) for:", rc);
    for (const std::string& s : words) std::fprintf(stderr, " '%s'", s.c_str());
    std::fprintf(stderr, "\n");
    std::abort();
  }
  return 0;
}
