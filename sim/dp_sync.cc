#include "sim/dp_sync.h"

#include <algorithm>
#include <map>
#include <vector>

#include "models/dp_sync.h"
#include "models/param_server.h"
#include "models/placement.h"
#include "models/stragglers.h"
#include "sim/engine.h"
#include "sim/profile.h"

namespace pipetwin {

std::optional<DpSyncReport> PredictDpSync(const ResolvedJob& job, const CostTable& costs) {
  const JobConfig& c = job.config;
  if (!models::UsesParameterServers(c.cluster, c.parallel)) return std::nullopt;
  const models::RankLayout layout(job.parallel(), c.cluster.rank_order);
  const int dp = c.parallel.dp;
  const int steps = c.execution.warmup + c.execution.steps;
  const int pp = job.schedule.num_ranks;
  // Plays are cached by the factors of the pipeline ranks (fixed slowdowns repeat them).
  std::map<std::vector<double>, double> played;
  std::vector<std::vector<double>> step_ms(static_cast<std::size_t>(dp),
                                           std::vector<double>(static_cast<std::size_t>(steps)));
  for (int k = 0; k < steps; ++k) {
    std::vector<std::vector<double>> f(static_cast<std::size_t>(dp),
                                       std::vector<double>(static_cast<std::size_t>(pp), 0.0));
    for (int r = 0; r < layout.world_size(); ++r) {
      const models::RankCoord rc = layout.Coord(r);
      double& x = f[static_cast<std::size_t>(rc.dp)][static_cast<std::size_t>(rc.pp)];
      x = std::max(x, models::StragglerFactor(c.stragglers, r, k));
    }
    for (int w = 0; w < dp; ++w) {
      const std::vector<double>& fw = f[static_cast<std::size_t>(w)];
      auto it = played.find(fw);
      if (it == played.end()) {
        const SimStats st = RunEngine(job.schedule, ScaleComputeByRank(costs, job.schedule, fw),
                                      {.optimizer_sync = c.optimizer_sync}, nullptr);
        it = played.emplace(fw, static_cast<double>(st.makespan.nanos()) * 1e-6).first;
      }
      step_ms[static_cast<std::size_t>(w)][static_cast<std::size_t>(k)] = it->second;
    }
  }
  const models::TrainingConfig& t = c.training;
  const models::DpSyncTimes times = models::PlayDpSync(step_ms, t.dp_sync, t.staleness);
  return models::SummarizeDpSync(times, t.dp_sync, t.staleness, c.execution.warmup,
                                 static_cast<double>(job.microbatches) * t.micro_batch);
}

}  // namespace pipetwin
