// process.h — child processes of the validation loop: `pipetwin run` and `calibrate` under
// mpirun, and scripts/plot.py. No shell is involved: arguments are passed as they are.
//
//   std::vector<std::string> cmd = MpirunCommand(Launcher("", std::getenv("PIPETWIN_MPIRUN")),
//                                                2, SelfExe());   // mpirun -np 2 /path/pipetwin
//   cmd.insert(cmd.end(), {"run", "job.yaml", "--backend", "cpu"});
//   int rc = Spawn(cmd, "run.log");
#pragma once

#include <string>
#include <vector>

#include "schedule/expected.h"

namespace pipetwin::workflow {

// The words of `s`, split at white space ("mpirun --oversubscribe" → {"mpirun",
// "--oversubscribe"}).
std::vector<std::string> Words(const std::string& s);

// The launcher that starts the ranks: `option` (validate --mpirun) when not empty, else `env`
// ($PIPETWIN_MPIRUN, may be null) when not empty, else "mpirun".
std::string Launcher(const std::string& option, const char* env);

// Bad input unless the launcher's first word is a program Spawn can start: a path to an
// executable file, or a name found in PATH (checked before any work, so that a typo is not a
// table of failed runs). `where` names its source in the message ("--mpirun").
Status CheckLauncher(const std::string& launcher, const std::string& where);

// The launcher's words, then `-np NP PROGRAM`.
std::vector<std::string> MpirunCommand(const std::string& launcher, int np,
                                       const std::string& program);

// This program's path (/proc/self/exe), or "pipetwin" (looked up in PATH) when unknown.
std::string SelfExe();

// Runs a program (argv[0] looked up in PATH) and waits; its output goes to `log` (appended)
// or, when empty, to ours. Returns its exit status (128 + signal when killed, 127 when it
// could not start).
int Spawn(const std::vector<std::string>& argv, const std::string& log);

// The command that plots DIR: scripts/plot.py (PIPETWIN_PLOT overrides the script) with
// /usr/bin/python3 (PIPETWIN_PYTHON overrides the interpreter), then `extra`.
std::vector<std::string> PlotCommand(const std::string& dir, const std::vector<std::string>& extra);

// Runs PlotCommand. Failure to plot is reported on stderr, not fatal: the tables are the
// result, the plots their picture.
void RunPlots(const std::string& dir, const std::vector<std::string>& extra);

// `plan --plot`: scripts/plot_plan.py CSV PNG --memory-limit BYTES (same interpreter and
// overrides as PlotCommand; PIPETWIN_PLOT_PLAN overrides the script). Failure to plot is
// reported on stderr, not fatal; returns whether the plot was made.
bool RunPlanPlot(const std::string& csv, const std::string& png, double memory_limit_bytes);

}  // namespace pipetwin::workflow
