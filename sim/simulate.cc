#include "sim/simulate.h"

#include <algorithm>
#include <unordered_map>

#include "models/placement.h"
#include "schedule/stats.h"
#include "sim/dp_sync.h"
#include "sim/model_costs.h"
#include "sim/profile.h"

namespace pipetwin {

CostTable JobCostTable(const ResolvedJob& job) {
  const int n = job.schedule.num_stages;
  if (!job.model_costs) return UniformCosts(job.config.costs.value_or(AbstractCosts{}), n);
  CostTable model = CostTableFromModel(*job.model_costs, job.schedule.stage_to_rank);
  if (!job.config.costs) return model;
  // `costs:` and `model:`: the times are the costs', the sizes (bytes sent) the model's.
  CostTable t = UniformCosts(*job.config.costs, n);
  for (std::size_t k = 0; k < t.stages.size(); ++k) {
    t.stages[k].send_bytes = model.stages[k].send_bytes;
    t.stages[k].dp_reduce_bytes = model.stages[k].dp_reduce_bytes;
  }
  return t;
}

StepRecord StepRecordOf(const SimStats& stats) {
  StepRecord rec;
  rec.source = "simulate";
  rec.world_rows = false;
  rec.makespan_ns = stats.makespan.nanos();
  rec.rows.reserve(stats.ranks.size());
  for (const RankStats& rs : stats.ranks) {
    StepRecord::Row row;
    row.step = rs.step;
    row.bytes.pp = rs.bytes_sent_pp;
    row.bytes.dp = rs.bytes_sent_dp;
    row.dp_exposed_ns = rs.dp_exposed.nanos();
    rec.rows.push_back(row);
  }
  return rec;
}

namespace {

// The factors of every (group, pipeline rank): one group of all replicas (StragglerFactors),
// or one per data-parallel replica (by_replica: ReplicaStragglerFactors). Fixed slowdowns are
// looked up once per rank: O(listed), and O(world) only with variability.
std::vector<std::vector<double>> GroupedStragglerFactors(const ResolvedJob& job, std::int64_t step,
                                                         bool by_replica) {
  const models::Stragglers& st = job.config.stragglers;
  const models::RankLayout layout(job.parallel(), job.config.cluster.rank_order);
  const auto pp = static_cast<std::size_t>(job.schedule.num_ranks);
  std::vector<std::vector<double>> f(by_replica ? static_cast<std::size_t>(job.parallel().dp) : 1,
                                     std::vector<double>(pp, st.random() ? 0.0 : 1.0));
  const auto at = [&](int w) -> double& {
    const models::RankCoord c = layout.Coord(w);
    return f[by_replica ? static_cast<std::size_t>(c.dp) : 0][static_cast<std::size_t>(c.pp)];
  };
  if (!st.random()) {
    // Every rank not listed runs at 1: only the listed ones can raise their stage's factor.
    for (const models::Stragglers::Fixed& fx : st.fixed) {
      double& x = at(fx.rank);
      x = std::max(x, fx.slowdown);
    }
    return f;
  }
  std::unordered_map<int, double> slowdown;  // world rank -> its fixed slowdown (listed once)
  for (const models::Stragglers::Fixed& fx : st.fixed) slowdown.emplace(fx.rank, fx.slowdown);
  for (int w = 0; w < layout.world_size(); ++w) {
    const auto it = slowdown.find(w);
    const double x =
        (it == slowdown.end() ? 1.0 : it->second) * models::VariabilityFactor(st, w, step);
    double& y = at(w);
    y = std::max(y, x);
  }
  return f;
}

}  // namespace

std::vector<double> StragglerFactors(const ResolvedJob& job, std::int64_t step) {
  return GroupedStragglerFactors(job, step, /*by_replica=*/false).front();
}

std::vector<std::vector<double>> ReplicaStragglerFactors(const ResolvedJob& job,
                                                         std::int64_t step) {
  return GroupedStragglerFactors(job, step, /*by_replica=*/true);
}

SimResult SimulateWithCosts(const ResolvedJob& job, CostTable costs, const SimulateOptions& opts) {
  // Whatever the costs' source (the model, `costs:`, a measured profile), the reductions
  // follow the job: after the rank's last gradient unless overlap.grad_reduce, as the
  // executor runs them (exec/engine.h).
  costs.reduce_after_backward = job.config.training.reduce_after_backward();
  // With parameter servers: every worker's pace under training.dp_sync (sim/dp_sync.h).
  std::optional<DpSyncReport> dp_sync = PredictDpSync(job, costs);
  if (const models::Stragglers& st = job.config.stragglers; st.any()) {
    // The measured steps' factors (run reports the upper median of its measured steps): one
    // play per step, the median one kept. Fixed slowdowns only: every step is the same.
    const ExecutionConfig& x = job.config.execution;
    const int plays = st.random() ? x.steps : 1;
    const EngineOptions eo{.optimizer_sync = job.config.optimizer_sync};
    std::vector<std::int64_t> iters;
    std::vector<CostTable> tables;
    for (int k = 0; k < plays; ++k) {
      tables.push_back(
          ScaleComputeByRank(costs, job.schedule, StragglerFactors(job, x.warmup + k)));
      iters.push_back(IterationNs(
          eo.optimizer_sync, StepRecordOf(RunEngine(job.schedule, tables.back(), eo, nullptr))));
    }
    costs = std::move(tables[UpperMedianIndex(iters)]);
  }
  SimResult res;
  res.costs = std::move(costs);
  TimelineRecorder recorder(job.schedule.num_ranks);
  res.stats = RunEngine(job.schedule, res.costs, {.optimizer_sync = job.config.optimizer_sync},
                        opts.record_timeline ? &recorder : nullptr);
  res.timeline = recorder.Take();
  StepRecord rec = StepRecordOf(res.stats);
  rec.dp_sync = std::move(dp_sync);
  res.report = BuildReport(job, rec, {.per_world_rank = opts.per_world_rank});
  return res;
}

Expected<SimResult> Simulate(const ResolvedJob& job, const SimulateOptions& opts) {
  return SimulateWithCosts(job, JobCostTable(job), opts);
}

Expected<double> SizeRunTimeout(ResolvedJob& job, std::optional<double> predicted_step_ms) {
  double& t = job.config.execution.timeout_s;
  if (t > 0) return t;
  if (!predicted_step_ms) {
    auto sim = Simulate(job, {.record_timeline = false, .per_world_rank = false});
    if (!sim) return sim.error();
    predicted_step_ms = sim->report.iteration_time_ms;
  }
  t = std::min(86400.0, kTimeoutStepFactor * *predicted_step_ms * 1e-3 + kTimeoutMarginS);
  return t;
}

}  // namespace pipetwin
