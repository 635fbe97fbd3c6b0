// commands.h — the subcommands of the validation loop (calibrate, compare, validate) and the
// small argument parser they share. main.cc dispatches to them.
//
//   if (cmd == "compare") return CmdCompare(argc, argv);
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "schedule/expected.h"

namespace pipetwin {

// The command line: dispatches argv[1] to a subcommand; exceptions become "internal error"
// (exit 1). Registers no backend: the caller's main() does (entry_cpu.cc, entry_cuda.cc).
int RunMain(int argc, char** argv);

// `run` and `calibrate` with `--backend cuda` in a program without the CUDA backend (the
// CPU-only `pipetwin`, which must not load cuBLAS or NCCL): replaces this process with
// `pipetwin-cuda` from the same folder as /proc/self/exe, same argv. Call before MPI_Init.
// Returns nothing when this program runs the backend itself; otherwise the exit status
// (1, "built without CUDA" where pipetwin-cuda is absent; execv failed otherwise).
std::optional<int> HandOverBackend(int argc, char** argv);

int CmdCalibrate(int argc, char** argv);  // under mpirun, like `run`
int CmdCompare(int argc, char** argv);
int CmdValidate(int argc, char** argv);

struct CmdArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --key value
  std::vector<std::string> flags;              // --key
  bool Has(const std::string& flag) const;
  std::string Get(const std::string& option, const std::string& fallback = "") const;
};
// argv[first..]: `valued` options take a value, `flags` none; anything else is bad input.
Expected<CmdArgs> ParseCmdArgs(int argc, char** argv, int first,
                               const std::vector<std::string>& valued,
                               const std::vector<std::string>& flags);

// --tolerance, a fraction in [0, 1] (0.05 is 5%); `fallback` when not given.
Expected<double> ToleranceArg(const CmdArgs& a, double fallback);

// Shared by compare and validate (cmd_compare.cc).
Expected<std::string> ReadText(const std::string& path);
// Compares two report files and writes DIR/errors.md and DIR/errors.csv.
Expected<Comparison> CompareFiles(const std::string& predicted, const std::string& measured,
                                  const std::string& dir, const std::string& title,
                                  double tolerance);
// Runs a program (argv[0] looked up in PATH) and waits; its output goes to `log` (appended)
// or, when empty, to ours. Returns its exit status (128 + signal when killed, 127 when it
// could not start).
int Spawn(const std::vector<std::string>& argv, const std::string& log);
// scripts/plot.py on DIR with /usr/bin/python3 (PIPETWIN_PLOT overrides the script,
// PIPETWIN_PYTHON the interpreter). Failure to plot is reported,
// not fatal: the tables are the result, the plots their picture.
void RunPlots(const std::string& dir, const std::vector<std::string>& extra);

}  // namespace pipetwin
