#include "models/dp_sync.h"

#include <algorithm>
#include <limits>
#include <string>

namespace pipetwin::models {

DpSyncTimes PlayDpSync(const std::vector<std::vector<double>>& step_ms, DpSync mode,
                       int staleness) {
  const std::size_t workers = step_ms.size();
  const std::size_t steps = workers == 0 ? 0 : step_ms.front().size();
  DpSyncTimes t;
  t.start_ms.assign(workers, std::vector<double>(steps, 0.0));
  t.end_ms = t.start_ms;
  t.staleness.assign(workers, std::vector<int>(steps, 0));
  // update[j]: when update j is applied (the last worker's step-j push).
  std::vector<double> update(steps, 0.0);
  // The lag of the update a worker waits for: 0 sync, s stale, none async.
  const bool waits = mode != DpSync::kAsync;
  const int lag = mode == DpSync::kStale ? staleness : 0;
  // Step by step over all workers: a worker's step k needs only updates before k, which
  // depend only on steps before k.
  for (std::size_t k = 0; k < steps; ++k) {
    for (std::size_t w = 0; w < workers; ++w) {
      double start = k == 0 ? 0.0 : t.end_ms[w][k - 1];
      const long long need = static_cast<long long>(k) - 1 - lag;  // update it waits for
      if (waits && need >= 0) start = std::max(start, update[static_cast<std::size_t>(need)]);
      // Updates applied by then (in order: update j is the max over workers of increasing
      // ends, so update times increase with j). Ties count as applied: a pull that finds the
      // update at the same instant sees it, as sync requires.
      std::size_t applied = 0;
      while (applied < k && update[applied] <= start) ++applied;
      t.start_ms[w][k] = start;
      t.end_ms[w][k] = start + step_ms[w][k];
      t.staleness[w][k] = static_cast<int>(k - applied);
    }
    double last = 0;
    for (std::size_t w = 0; w < workers; ++w) last = std::max(last, t.end_ms[w][k]);
    update[k] = last;
  }
  return t;
}

DpSyncReport SummarizeDpSync(const DpSyncTimes& t, DpSync mode, int staleness, int warmup,
                             double sequences_per_worker_step) {
  DpSyncReport r;
  r.mode = std::string(ToString(mode));
  r.staleness_bound = mode == DpSync::kStale ? staleness : mode == DpSync::kSync ? 0 : -1;
  const std::size_t workers = t.start_ms.size();
  const std::size_t steps = workers == 0 ? 0 : t.start_ms.front().size();
  const auto first = static_cast<std::size_t>(std::max(0, warmup));
  if (steps <= first) return r;
  r.steps = static_cast<int>(steps - first);
  long long n = 0;
  double sum = 0;
  for (std::size_t w = 0; w < workers; ++w) {
    // Start to start (a step's wait for the servers belongs to the step before it); one
    // measured step: start to end.
    const bool one = steps - first == 1;
    const double span_s =
        ((one ? t.end_ms[w][first] : t.start_ms[w][steps - 1]) - t.start_ms[w][first]) * 1e-3;
    const double rate = span_s > 0 ? (one ? 1 : r.steps - 1) / span_s : 0.0;
    r.worker_steps_per_s.push_back(rate);
    r.samples_per_s += rate * sequences_per_worker_step;
    for (std::size_t k = first; k < steps; ++k) {
      sum += t.staleness[w][k];
      r.staleness_max = std::max(r.staleness_max, t.staleness[w][k]);
      ++n;
    }
  }
  for (double x : r.worker_steps_per_s) r.steps_per_s += x;
  r.steps_per_s /= static_cast<double>(std::max<std::size_t>(1, workers));
  r.staleness_mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  return r;
}

}  // namespace pipetwin::models
