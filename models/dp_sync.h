// dp_sync.h — `training.dp_sync: sync | async | stale` (with `staleness: s`): when a
// data-parallel worker (a replica of the pipeline) may start its next step, played over the
// workers' own step times, and the one summary of a played or measured run (DpSyncReport).
//
// The parameter servers (models/param_server.h) apply one update per step k (a clock): the
// sum of all workers' step-k gradients, once the last of them has arrived. A worker pushes its
// step-k gradients at the end of its step and pulls the parameters:
//   sync        it waits for update k (all workers' step k): a barrier every step;
//   stale s     it waits for update k - s: at most s steps ahead of the slowest (s = 0: sync);
//   async       it never waits: it pulls whatever the latest update is.
// The staleness of a gradient of step k is the number of updates its parameters lack:
// k - (updates applied when its worker started step k); 0 under sync, at most s under stale.
//
//   DpSyncTimes t = PlayDpSync(step_ms, models::DpSync::kStale, 1);   // step_ms[w][k]
//   DpSyncReport r = SummarizeDpSync(t, mode, 1, warmup, sequences_per_worker_step);
#pragma once

#include <cstdint>
#include <vector>

#include "models/training.h"
#include "schedule/report.h"

namespace pipetwin::models {

struct DpSyncTimes {
  // Per worker and step (warm-up included): start and end (ms from the start), and the
  // staleness of the step's gradient.
  std::vector<std::vector<double>> start_ms, end_ms;
  std::vector<std::vector<int>> staleness;
};

// PlayDpSync keeps about 28 bytes per worker and step: a job's workers x (warm-up + measured
// steps) may be at most this (about 120 MB), checked when the job is resolved.
inline constexpr long long kMaxDpSyncWorkerSteps = 1LL << 22;
// simulate plays each worker's step on its own where the draws of execution.stragglers'
// variability differ (a few microseconds each besides the schedule's actions): at most this
// many plays (about 5 s).
inline constexpr long long kMaxDpSyncPlays = 1LL << 20;

// Plays the protocol over step_ms[w][k], worker w's step k on its own (its compute, its push
// and pull; every worker has the same number of steps).
DpSyncTimes PlayDpSync(const std::vector<std::vector<double>>& step_ms, DpSync mode, int staleness);

// The report section from the times of the steps from `warmup` on: worker w's rate is one
// over its mean start-to-start interval over the measured steps (with one measured step, one
// over its duration); staleness mean and max over every worker's measured steps.
DpSyncReport SummarizeDpSync(const DpSyncTimes& t, DpSync mode, int staleness, int warmup,
                             double sequences_per_worker_step);

}  // namespace pipetwin::models
