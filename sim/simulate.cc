#include "sim/simulate.h"

#include "sim/model_costs.h"

namespace pipetwin {

CostTable JobCostTable(const ResolvedJob& job) {
  const int n = job.schedule.num_stages;
  if (!job.model_costs) return UniformCosts(job.config.costs.value_or(AbstractCosts{}), n);
  CostTable model = CostTableFromModel(*job.model_costs);
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

}  // namespace pipetwin
