#include "sim/dp_sync.h"

#include <map>
#include <vector>

#include "models/dp_sync.h"
#include "models/param_server.h"
#include "sim/engine.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace pipetwin {

std::optional<DpSyncReport> PredictDpSync(const ResolvedJob& job, const CostTable& costs) {
  const JobConfig& c = job.config;
  if (!models::UsesParameterServers(c.cluster, c.parallel)) return std::nullopt;
  const int dp = c.parallel.dp;
  const int steps = c.execution.warmup + c.execution.steps;
  // Without variability plays are cached by the factors of the pipeline ranks (fixed
  // slowdowns repeat them); with it no two repeat, and the cache would only grow.
  const bool cache = !c.stragglers.random();
  std::map<std::vector<double>, double> played;
  std::vector<std::vector<double>> step_ms(static_cast<std::size_t>(dp),
                                           std::vector<double>(static_cast<std::size_t>(steps)));
  for (int k = 0; k < steps; ++k) {
    const std::vector<std::vector<double>> f = ReplicaStragglerFactors(job, k);
    for (int w = 0; w < dp; ++w) {
      const std::vector<double>& fw = f[static_cast<std::size_t>(w)];
      const auto play = [&] {
        const SimStats st = RunEngine(job.schedule, ScaleComputeByRank(costs, job.schedule, fw),
                                      {.optimizer_sync = c.optimizer_sync}, nullptr);
        return static_cast<double>(st.makespan.nanos()) * 1e-6;
      };
      double ms = 0;
      if (!cache) {
        ms = play();
      } else if (auto it = played.find(fw); it != played.end()) {
        ms = it->second;
      } else {
        ms = played.emplace(fw, play()).first->second;
      }
      step_ms[static_cast<std::size_t>(w)][static_cast<std::size_t>(k)] = ms;
    }
  }
  const models::TrainingConfig& t = c.training;
  const models::DpSyncTimes times = models::PlayDpSync(step_ms, t.dp_sync, t.staleness);
  return models::SummarizeDpSync(times, t.dp_sync, t.staleness, c.execution.warmup,
                                 static_cast<double>(job.microbatches) * t.micro_batch);
}

}  // namespace pipetwin
