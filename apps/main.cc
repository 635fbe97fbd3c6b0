// pipetwin — predict a distributed training step, then run it for real and compare.
// Subcommands only parse arguments and call the libraries (DESIGN.md); this file dispatches.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "schedule/quote.h"
#include "schedule/suggest.h"

namespace pipetwin {
namespace {

constexpr const char* kUsage = R"(pipetwin — pipeline schedules: predict, run, compare

usage:
  pipetwin simulate JOB.yaml [--report R.json] [--trace T.json] [--ascii]
                    [--profile PROFILE.yaml] [--per-pipeline-rank]
      Predict one training step: iteration time, bubbles, in-flight microbatches, memory per
      rank, throughput and MFU. The report has a row per GPU (--per-pipeline-rank: one per
      pipeline rank, for very large jobs).
  pipetwin schedule JOB.yaml [--csv OUT.csv] [--format compute_only|compute_comms|pipetwin]
                    [--idle-cells]
      Write the per-rank programs (PyTorch action syntax, one row per rank).
  mpirun -np N pipetwin run JOB.yaml --backend cpu|cuda|sleep [--report R.json] [--trace T.json]
                                 [--check-reference] [--calibrate PROFILE.yaml]
                                 [--profile PROFILE.yaml]
      Execute the same step for real, N = pp × dp × tp × cp ranks (--backend sleep: every
      compute action sleeps its time from --profile or the job's costs:, communication is
      real, so many ranks share few cores); --check-reference compares
      the loss and every gradient with a single-process run of the same model and data;
      --calibrate alternates each measured step with a calibration step and writes the
      profile (as calibrate does), so that profile and measurement see the same machine.
  mpirun -np N pipetwin calibrate --backend cpu JOB.yaml --out PROFILE.yaml
                                 [--steps S] [--warmup W]
      Measure F, I, W, B and the optimizer step per stage, the executor's per-action
      overhead, point-to-point latency and bandwidth, the DP all-reduce; for simulate --profile.
  pipetwin compare PREDICTED.json MEASURED.json --out DIR [--predicted-trace T.json]
                   [--measured-trace T.json] [--tolerance 0.05] [--title TEXT] [--no-plots]
                   [--profile PROFILE.yaml]
      Error table (DIR/errors.md, DIR/errors.csv) and plots (scripts/plot.py, matplotlib).
  pipetwin validate JOB.yaml [JOB2.yaml ...] [--schedules job|all|NAME,NAME] [--out DIR]
                    [--mpirun "mpirun --oversubscribe"] [--tolerance 0.05] [--tutorial]
                    [--separate-calibration] [--calibrate-steps S] [--backend cpu|sleep]
                    [--no-plots]
      For each job and schedule: run --calibrate (calibration and measured steps
      interleaved in one run; --separate-calibration: calibrate, then run), simulate
      --profile, compare. mpirun, or $PIPETWIN_MPIRUN, starts the ranks; DIR/summary.md and
      plots.
  pipetwin plan PLAN.yaml [--top K] [--report P.json] [--csv ALL.csv] [--plot P.png]
                [--threads N] [--emit-jobs DIR]
      Search the layouts and schedules of the plan file's search: (tp, pp, dp, cp, cp_comm,
      vpp, sp, micro_batch, recompute, zero, overlap, rank_order, schedule) and list the K
      fastest that fit in memory: tokens/s, MFU, bubble, peak memory, exposed communication;
      --emit-jobs writes them as job files that `simulate` reproduces.
  pipetwin schedules
      List the schedule generators.
  pipetwin presets
      List the model presets (any field can be overridden in `model:`) and the devices.
  pipetwin SUBCOMMAND --help
      The subcommand's options.
  pipetwin --version
      Print the version.

Exit status: 0 success, 2 bad input (the message names the file and the field), 1 other failure.
)";

}  // namespace

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("pipetwin %s\n", PIPETWIN_VERSION);
    return 0;
  }
  // The subcommands, dispatched by name; an unknown name is answered with the nearest ones.
  struct Command {
    const char* name;
    int (*run)(int, char**);
  };
  static constexpr Command kCommands[] = {
      {"simulate", CmdSimulate}, {"schedule", CmdSchedule}, {"schedules", CmdSchedules},
      {"presets", CmdPresets},   {"run", CmdRun},           {"calibrate", CmdCalibrate},
      {"compare", CmdCompare},   {"validate", CmdValidate}, {"plan", CmdPlan}};
  std::vector<std::string> names;
  for (const Command& c : kCommands) {
    if (cmd == c.name) return c.run(argc, argv);
    names.emplace_back(c.name);
  }
  const std::string guess = DidYouMean(cmd, names);
  std::fprintf(stderr, "pipetwin: unknown command %s%s\n\n%s", Quoted(cmd).c_str(),
               guess.empty() ? "" : (", " + guess).c_str(), kUsage);
  return 2;
}

}  // namespace pipetwin

int pipetwin::RunMain(int argc, char** argv) {
  try {
    const int rc = Main(argc, argv);
    // A report printed into a full disk or a closed pipe is a failure, not a success.
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const int err = errno;
    if (!flushed || std::ferror(stdout) != 0 || !std::cout) {
      const std::string why = err != 0 ? std::string(" (") + std::strerror(err) + ")" : "";
      std::fprintf(stderr, "pipetwin: cannot write the standard output%s\n", why.c_str());
      return rc == 0 ? 1 : rc;
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipetwin: internal error: %s\n", e.what());
    return 1;
  }
}
