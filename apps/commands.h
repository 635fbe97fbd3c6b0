// commands.h — the subcommands of `pipetwin`; main.cc dispatches to them. Each parses its
// arguments (apps/cli.h) and calls a library function; argv[1] is the subcommand's name.
//
//   if (cmd == "compare") return CmdCompare(argc, argv);
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "job/job.h"
#include "schedule/report.h"

namespace pipetwin {

namespace exec {
class MpiSession;
}  // namespace exec

// The command line: dispatches argv[1] to a subcommand; exceptions become "internal error"
// (exit 1). Registers no backend: the caller's main() does (entry_cpu.cc, entry_cuda.cc).
int RunMain(int argc, char** argv);

// `run` and `calibrate` with `--backend cuda` in a program without the CUDA backend (the
// CPU-only `pipetwin`, which must not load cuBLAS or NCCL): replaces this process with
// `pipetwin-cuda` from the same folder as /proc/self/exe, same argv. Call before MPI starts.
// Returns nothing when this program runs the backend itself; otherwise the exit status
// (1, "built without CUDA" where pipetwin-cuda is absent; execv failed otherwise).
std::optional<int> HandOverBackend(int argc, char** argv);  // handover.cc
// A bad command line of `run` or `calibrate`, before MPI starts (argv is the same on every rank,
// so there is nothing to agree on, and a broken MPI set-up cannot turn it into exit 1): the
// launcher's rank 0, or a process without mpirun, says it and returns its exit status (2); the
// other ranks return 0. handover.cc.
int FailBeforeMpi(const Error& e);
// Where `run` or `calibrate` ends before MPI starts, its exit status: 0 for --help, a bad
// command line (`parsed` failed) through FailBeforeMpi, or the hand-over to pipetwin-cuda
// (HandOverBackend). Nothing where the command goes on to start MPI. handover.cc.
std::optional<int> EndBeforeMpi(const Status& parsed, bool help, int argc, char** argv);

// The job `run` and `calibrate` execute: loaded and resolved, simulated once (a row per world
// rank), its execution.timeout_s sized from the predicted step when the job leaves it out
// (sim/simulate.h). `predicted` is absent only where simulate failed on a job that gives its
// own timeout (the run then says what is wrong).
struct JobToExecute {
  ResolvedJob job;
  std::optional<Report> predicted;
};

// The start `run` and `calibrate` share, on every rank, after MPI started: the job loaded as
// above, then `also` where given (the command's own checks, such as run's --profile), the
// ranks agreed on both (exec::AgreeAcrossWorld), and then on the host memory: on the CPU
// backend with a cpu-device job, bad input where the ranks on this machine need more than it
// has available (the predicted peaks, which the CPU backend allocates byte for byte) or where
// this rank's peak and the BLAS library's buffers exceed what its `ulimit -v` leaves, before
// anything is allocated. Where any of it fails one rank has said why (exit 2 for bad input),
// the job is absent and *exit_status holds what the command returns. execute.cc.
std::optional<JobToExecute> StartExecution(exec::MpiSession& mpi, const std::string& path,
                                           const std::string& backend,
                                           const std::function<Status(const ResolvedJob&)>& also,
                                           int* exit_status);

// Runs `body` on this rank; what it throws becomes the rank's error: a timeout or a failed MPI
// call as it reads (each names the rank), a failed allocation (std::bad_alloc) as "rank N: out
// of memory" with the rank's predicted peak and why the checks at the start may not have caught
// it, anything else as "rank N: what". execute.cc.
Status CatchOnRank(const JobToExecute& j, int world_rank, const std::function<void()>& body);

int CmdSimulate(int argc, char** argv);   // cmd_simulate.cc
int CmdSchedule(int argc, char** argv);   // cmd_simulate.cc
int CmdSchedules(int argc, char** argv);  // cmd_simulate.cc
int CmdPresets(int argc, char** argv);    // cmd_simulate.cc
int CmdRun(int argc, char** argv);        // cmd_run.cc, under mpirun
int CmdCalibrate(int argc, char** argv);  // cmd_calibrate.cc, under mpirun
int CmdCompare(int argc, char** argv);    // cmd_compare.cc
int CmdValidate(int argc, char** argv);   // cmd_validate.cc
int CmdPlan(int argc, char** argv);       // cmd_plan.cc

}  // namespace pipetwin
