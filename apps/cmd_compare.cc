// `pipetwin compare PREDICTED.json MEASURED.json --out DIR` — the error table and the plots.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/commands.h"
#include "schedule/csv.h"
#include "schedule/report.h"

extern char** environ;

namespace pipetwin {

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::BadInput(path + ": cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Expected<Comparison> CompareFiles(const std::string& predicted, const std::string& measured,
                                  const std::string& dir, const std::string& title,
                                  double tolerance) {
  auto pt = ReadText(predicted);
  if (!pt) return pt.error();
  auto mt = ReadText(measured);
  if (!mt) return mt.error();
  auto p = ReportFromJson(*pt, predicted);
  if (!p) return p.error();
  auto m = ReportFromJson(*mt, measured);
  if (!m) return m.error();
  auto c = CompareReports(*p, *m);
  if (!c) return c.error();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::Failure(dir + ": cannot create the folder: " + ec.message());
  if (Status s = WriteFileAtomic(dir + "/errors.md", ComparisonMarkdown(*c, title, tolerance));
      !s) {
    return s.error();
  }
  if (Status s = WriteFileAtomic(dir + "/errors.csv", ComparisonCsv(*c, tolerance)); !s) {
    return s.error();
  }
  return c;
}

int Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void RunPlots(const std::string& dir, const std::vector<std::string>& extra) {
  std::string script = PIPETWIN_SOURCE_DIR "/scripts/plot.py";
  if (const char* e = std::getenv("PIPETWIN_PLOT"); e != nullptr && *e != '\0') script = e;
  // Debian's python3 has python3-matplotlib; another python3 earlier in PATH may not.
  std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  if (const char* e = std::getenv("PIPETWIN_PYTHON"); e != nullptr && *e != '\0') python = e;
  std::vector<std::string> args = {python, script, dir};
  args.insert(args.end(), extra.begin(), extra.end());
  const int rc = Spawn(args, "");
  if (rc != 0) {
    std::fprintf(stderr,
                 "pipetwin: plots not made (%s exited with %d; needs python3 and "
                 "python3-matplotlib: scripts/deps.sh); the tables are in %s\n",
                 script.c_str(), rc, dir.c_str());
  }
}

namespace {

Status CopyInto(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (std::filesystem::exists(to, ec) && std::filesystem::equivalent(from, to, ec)) {
    return OkStatus();
  }
  auto text = ReadText(from);
  if (!text) return text.error();
  return WriteFileAtomic(to, *text);
}

}  // namespace

int CmdCompare(int argc, char** argv) {
  auto fail = [](const Error& e) {
    std::cerr << "pipetwin: " << e.message << "\n";
    return e.exit_status();
  };
  auto a = ParseCmdArgs(
      argc, argv, 2, {"--out", "--predicted-trace", "--measured-trace", "--tolerance", "--title"},
      {"--no-plots"});
  if (!a) return fail(a.error());
  if (a->positional.size() != 2) {
    return fail(Error::BadInput("compare: expected PREDICTED.json MEASURED.json (see --help)"));
  }
  const std::string dir = a->Get("--out");
  if (dir.empty()) return fail(Error::BadInput("compare: --out DIR is required"));
  auto tolerance = ToleranceArg(*a, 0.05);
  if (!tolerance) return fail(tolerance.error());
  const double tol = *tolerance;
  const std::string& pred = a->positional[0];
  const std::string& meas = a->positional[1];
  auto c = CompareFiles(pred, meas, dir, a->Get("--title", pred + " against " + meas), tol);
  if (!c) return fail(c.error());
  // The plot script reads the folder: the reports (and traces) under fixed names.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {pred, "predicted.json"},
           {meas, "measured.json"},
           {a->Get("--predicted-trace"), "predicted.trace.json"},
           {a->Get("--measured-trace"), "measured.trace.json"}}) {
    if (from.empty()) continue;
    if (Status s = CopyInto(from, dir + "/" + to); !s) return fail(s.error());
  }
  std::printf("iteration time: predicted %.3f ms, measured %.3f ms, error %+.2f%% (%s)\n",
              c->rows[0].predicted, c->rows[0].measured, 100.0 * c->iteration_error,
              c->iteration_error_abs() <= tol ? "within tolerance" : "OUTSIDE tolerance");
  std::printf("memory: %s (%d rows); communication bytes: %s (%d rows)\n",
              c->memory_equal ? "equal" : "DIFFERS", c->memory_rows,
              c->bytes_equal ? "equal" : "DIFFER", c->bytes_rows);
  std::printf("table: %s/errors.md, %s/errors.csv\n", dir.c_str(), dir.c_str());
  if (!a->Has("--no-plots")) RunPlots(dir, {});
  return 0;
}

}  // namespace pipetwin
