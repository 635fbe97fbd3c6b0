// commands.h — the subcommands of `pipetwin`; main.cc dispatches to them. Each parses its
// arguments (apps/cli.h) and calls a library function; argv[1] is the subcommand's name.
//
//   if (cmd == "compare") return CmdCompare(argc, argv);
#pragma once

#include <optional>
#include <string>

#include "job/job.h"
#include "schedule/report.h"

namespace pipetwin {

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

// The job `run` and `calibrate` execute: loaded and resolved, simulated once (a row per world
// rank), its execution.timeout_s sized from the predicted step when the job leaves it out
// (sim/simulate.h). `predicted` is absent only where simulate failed on a job that gives its
// own timeout (the run then says what is wrong). cmd_run.cc.
struct JobToExecute {
  ResolvedJob job;
  std::optional<Report> predicted;
};
Expected<JobToExecute> LoadJobToExecute(const std::string& path);

// `run` and `calibrate` on the CPU backend with a cpu-device job: bad input where the ranks on
// this machine need more memory than it has available (the predicted peaks, which the CPU
// backend allocates byte for byte), or where this rank's peak and the BLAS library's buffers
// exceed what its `ulimit -v` leaves, before anything is allocated. A collective over
// MPI_COMM_WORLD. cmd_run.cc.
Status CheckHostMemory(const JobToExecute& j, const std::string& backend);

// What a rank says when an allocation failed part way (std::bad_alloc): its predicted peak, and
// why the checks before the start may not have caught it. cmd_run.cc.
Error OutOfHostMemory(const JobToExecute& j, int world_rank);

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
