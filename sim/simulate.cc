#include "sim/simulate.h"

#include <algorithm>

#include "sim/model_costs.h"

namespace pipetwin {

CostTable JobCostTable(const ResolvedJob& job) {
  if (job.config.costs || !job.model_costs) {
    return UniformCosts(job.config.costs.value_or(AbstractCosts{}), job.schedule.num_stages);
  }
  return CostTableFromModel(*job.model_costs);
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

SimResult SimulateWithCosts(const ResolvedJob& job, CostTable costs, const SimulateOptions& opts) {
  SimResult res;
  res.costs = std::move(costs);
  TimelineRecorder recorder(job.schedule.num_ranks);
  res.stats = RunEngine(job.schedule, res.costs, {.optimizer_sync = job.config.optimizer_sync},
                        opts.record_timeline ? &recorder : nullptr);
  res.timeline = recorder.Take();
  res.report = BuildReport(job, StepRecordOf(res.stats), {.per_world_rank = opts.per_world_rank});
  return res;
}

Expected<SimResult> Simulate(const ResolvedJob& job, const SimulateOptions& opts) {
  return SimulateWithCosts(job, JobCostTable(job), opts);
}

Expected<double> SizeRunTimeout(ResolvedJob& job) {
  double& t = job.config.execution.timeout_s;
  if (t > 0) return t;
  auto sim = Simulate(job, {.record_timeline = false, .per_world_rank = false});
  if (!sim) return sim.error();
  t = std::min(86400.0,
               kTimeoutStepFactor * sim->report.iteration_time_ms * 1e-3 + kTimeoutMarginS);
  return t;
}

}  // namespace pipetwin
