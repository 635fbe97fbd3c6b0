#include "workflow/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

extern char** environ;

namespace pipetwin::workflow {

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::string Launcher(const std::string& option, const char* env) {
  if (!option.empty()) return option;
  if (env != nullptr && *env != '\0') return env;
  return "mpirun";
}

Status CheckLauncher(const std::string& launcher, const std::string& where) {
  const std::vector<std::string> words = Words(launcher);
  if (words.empty()) {
    return Error::BadInput(where + ": the launcher is empty (e.g. \"mpirun --oversubscribe\")");
  }
  const std::string& program = words.front();
  const auto runnable = [](const std::string& path) {
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return OkStatus();
  } else if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string dirs = path;
    for (std::size_t at = 0; at <= dirs.size();) {
      const std::size_t end = std::min(dirs.find(':', at), dirs.size());
      const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
      if (runnable(dir + "/" + program)) return OkStatus();
      at = end + 1;
    }
  }
  return Error::BadInput(where + ": '" + program +
                         "' is not a program that can be started (no executable file of that " +
                         (program.find('/') != std::string::npos ? "path" : "name in PATH") +
                         "; OpenMPI's mpirun: scripts/deps.sh installs it)");
}

std::vector<std::string> MpirunCommand(const std::string& launcher, int np,
                                       const std::string& program) {
  std::vector<std::string> cmd = Words(launcher);
  cmd.insert(cmd.end(), {"-np", std::to_string(np), program});
  return cmd;
}

std::string SelfExe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("pipetwin") : p.string();
}

int Spawn(const std::vector<std::string>& args, const std::string& log) {
  if (args.empty()) return 127;
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

namespace {
// The plot scripts exit 3 without matplotlib; 127 is a python3 that could not be started.
const char* WhyNoPlot(int rc) {
  return rc == 3 || rc == 127 ? "needs python3 and python3-matplotlib: scripts/deps.sh"
                              : "its message is above";
}
}  // namespace

std::vector<std::string> PlotCommand(const std::string& dir,
                                     const std::vector<std::string>& extra) {
  std::string script = PIPETWIN_SOURCE_DIR "/scripts/plot.py";
  if (const char* e = std::getenv("PIPETWIN_PLOT"); e != nullptr && *e != '\0') script = e;
  // Debian's python3 has python3-matplotlib; another python3 earlier in PATH may not.
  std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  if (const char* e = std::getenv("PIPETWIN_PYTHON"); e != nullptr && *e != '\0') python = e;
  std::vector<std::string> args = {python, script, dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void RunPlots(const std::string& dir, const std::vector<std::string>& extra) {
  const std::vector<std::string> cmd = PlotCommand(dir, extra);
  const int rc = Spawn(cmd, "");
  if (rc != 0) {
    std::fprintf(stderr, "pipetwin: plots not made (%s exited with %d; %s); the tables are in %s\n",
                 cmd[1].c_str(), rc, WhyNoPlot(rc), dir.c_str());
  }
}

bool RunPlanPlot(const std::string& csv, const std::string& png, double memory_limit_bytes) {
  std::vector<std::string> cmd =
      PlotCommand(csv, {png, "--memory-limit", std::to_string(memory_limit_bytes)});
  cmd[1] = PIPETWIN_SOURCE_DIR "/scripts/plot_plan.py";
  if (const char* e = std::getenv("PIPETWIN_PLOT_PLAN"); e != nullptr && *e != '\0') cmd[1] = e;
  const int rc = Spawn(cmd, "");
  if (rc != 0) {
    std::fprintf(stderr, "pipetwin: plot not made (%s exited with %d; %s); the layouts are in %s\n",
                 cmd[1].c_str(), rc, WhyNoPlot(rc), csv.c_str());
  }
  return rc == 0;
}

}  // namespace pipetwin::workflow
