// run.h — `pipetwin run`: execute the job's schedule for real under MPI and measure it.
//
// Every rank builds the same lowered programs as the simulator (schedule/build.h), splits the
// world into pipeline, data- and tensor-parallel groups by the simulator's rank placement
// (Megatron order: TP innermost, then CP, DP, PP), runs `warmup` + `steps` training steps and
// reports the measured step in the simulator's report schema. Rank 0 holds the result.
//
// The backend is made by name from the registry (exec/backend_registry.h): the program
// registers the backends it links before calling RunJob.
//
//   MpiSession mpi;   // exec/mpi_session.h
//   cpu::RegisterCpuBackend();   // exec/cpu/register.h
//   Expected<RunResult> r = RunJob(job, {.backend = "cpu"});
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "job/job.h"
#include "schedule/report.h"
#include "schedule/timeline.h"

namespace pipetwin::exec {

class Backend;
struct Groups;

// What RunJob shows a hook after its measured steps, on every rank (calibrate uses it).
struct RunHookContext {
  // This rank's events of every measured step (of every calibration step with
  // RunOptions::interleave_calibration).
  const std::vector<std::vector<TimelineEvent>>& steps;
  Backend& backend;
  const Groups& groups;
  int total_steps = 0;  // warm-up included (the backend's byte counters cover them all)
};

// A fault injected on purpose, for the tests only (`pipetwin run --test-fault KIND:RANK`):
// at the first measured step, world rank `rank` stalls (kHang) or dies (kKill); with
// check_reference, its gradients are perturbed by 1e-4 (kPerturb) so that the check fails;
// under cp > 1 its ring attention drops the causal mask of the diagonal chunk pairs (kCpMask).
struct TestFault {
  enum class Kind { kNone, kHang, kKill, kPerturb, kCpMask };
  Kind kind = Kind::kNone;
  int rank = -1;
  bool Is(Kind k, int world_rank) const { return kind == k && rank == world_rank; }
};

struct RunOptions {
  std::string backend = "cpu";
  TestFault fault;               // none, except in the tests
  bool check_reference = false;  // compare loss and gradients with a single-process run
  double tolerance = 1e-5;       // relative error allowed by check_reference
  // Called on every rank after the measured steps, before the report is gathered; may be
  // empty. A collective hook: every rank must make the same MPI calls.
  std::function<Status(const RunHookContext&)> after_steps;
  // Alternate the steps after warm-up: the 1st, 3rd, 5th, ... are calibration steps, shown
  // only to `after_steps`; the 2nd, 4th, ... are the measured steps that the report, the
  // trace and step_ms describe. Calibration then sees the same machine as the measurement
  // (a shared machine's speed drifts between two processes started minutes apart).
  bool interleave_calibration = false;
  // The sleep backend's time of each compute action, by (stage, kind): a calibration
  // profile's medians (`run --profile`); empty: the job's `costs:` (BackendConfig::compute_ms).
  std::map<std::pair<int, ActionKind>, double> compute_ms;
};

struct RunResult {
  bool root = false;  // this process is world rank 0 and holds the report
  Report report;
  Timeline timeline;              // the median measured step, all ranks (root only)
  std::vector<double> step_ms;    // every measured step's iteration time (report builder's)
  std::vector<double> losses;     // mean loss of every step, warm-up included
  double max_relative_error = 0;  // check_reference only: worst over ranks and tensors
};

Expected<RunResult> RunJob(const ResolvedJob& job, const RunOptions& opts);

}  // namespace pipetwin::exec
