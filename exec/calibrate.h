// calibrate.h — `pipetwin calibrate`: measure what each action costs on a backend and write
// a profile that `pipetwin simulate --profile` plays instead of the cost model's times.
//
// Calibration runs under mpirun with the job's own ranks, like `run`:
//  1. the job's schedule for real (exec::RunJob) with at least `min_steps` measured steps
//     after `min_warmup` warm-up steps; from every measured step's timeline, the median
//     duration of F, I, W, B and the optimizer step per stage (model chunk), and the engine's
//     time on the compute thread between two compute actions outside receives (posting
//     sends and receives, polling) — the per-action overhead;
//  2. a ping-pong between pipeline neighbours at a few message sizes (the real transfer size
//     among them), fitted to latency + bytes / bandwidth;
//  3. the data-parallel all-reduce of each stage's gradients, in the job's DP group;
//  4. the all-rank reduction before the optimizer step (optimizer_sync) and the fixed cost of
//     starting a step (zeroing gradients, drawing the data);
//  5. last, on world rank 0 alone, the backend's roofline (Backend::MeasureRoofline: on the
//     CPU backend one core's GEMM rate and memory bandwidth, exec/cpu/roofline.h).
// Per stage, the slowest replica (over DP and TP ranks) is kept. Where the job names a model
// and the backend computes, each measured kind's rate is written beside its median: the cost
// model's FLOPs of one rank in that action (models::StageCost::forward_flops, ...; B = I + W)
// over the median, in GFLOP/s. The profile format is read
// by sim/profile.h (which documents every key); exec/ and sim/ never include each other, so
// the format is the contract, pinned by tests/compare.
//
//   MPI_Init(...);
//   Expected<CalibrateResult> r = Calibrate(job, {.backend = "cpu"});
//   if (r && r->root) WriteFileAtomic("profile.yaml", r->profile_yaml);
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "exec/run.h"

#include "job/job.h"
#include "schedule/expected.h"

namespace pipetwin::exec {

struct CalibrateOptions {
  std::string backend = "cpu";
  int min_steps = 10;    // measured steps (the job's execution.steps when larger)
  int min_warmup = 2;    // warm-up steps (the job's execution.warmup when larger)
                         // (both ignored with `interleaved`: the job's own counts)
  int repetitions = 20;  // per link or collective measurement, after 3 warm-up repetitions
  // Alternate calibration steps with as many measured steps in the same run (RunOptions::
  // interleave_calibration); the measured half comes back in CalibrateResult::run. This is
  // what `pipetwin run --calibrate` and `pipetwin validate` use: the profile and the
  // measurement see the same machine.
  bool interleaved = false;
  // The sleep backend's times (RunOptions::compute_ms); empty: the job's costs.
  std::map<std::pair<int, ActionKind>, double> compute_ms;
};

struct CalibrateResult {
  bool root = false;             // world rank 0 holds the profile
  std::string profile_yaml;      // root only
  std::optional<RunResult> run;  // interleaved only: the measured steps, as RunJob reports them
};

Expected<CalibrateResult> Calibrate(const ResolvedJob& job, const CalibrateOptions& opts);

}  // namespace pipetwin::exec
