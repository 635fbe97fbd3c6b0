#include "sim/simulate.h"

#include <algorithm>

#include <optional>

#include "models/costs.h"
#include "schedule/build.h"
#include "sim/model_costs.h"

namespace pipetwin {

InflightPeaks ComputeInflightPeaks(const std::vector<Action>& program) {
  InflightPeaks p;
  int inflight = 0;
  int pending = 0;
  for (const Action& a : program) {
    switch (a.kind) {
      case ActionKind::kForward:
        p.inflight = std::max(p.inflight, ++inflight);
        break;
      case ActionKind::kBackward:
        --inflight;
        break;
      case ActionKind::kBackwardInput:
        --inflight;
        p.pending_weight = std::max(p.pending_weight, ++pending);
        break;
      case ActionKind::kBackwardWeight:
        --pending;
        break;
      case ActionKind::kSendF:
      case ActionKind::kRecvF:
      case ActionKind::kSendB:
      case ActionKind::kRecvB:
      case ActionKind::kReduceGrad:
      case ActionKind::kOptimizer:
        break;
    }
  }
  return p;
}

Report BuildReport(const JobSpec& job, const Schedule& s, const SimStats& stats) {
  Report rep;
  rep.source = "simulate";
  rep.schedule = job.schedule;
  rep.pp = s.num_ranks;
  rep.microbatches = s.num_microbatches;
  rep.optimizer_sync = job.optimizer_sync;
  rep.makespan_ms = stats.makespan.ToMillis();
  SimTime iteration = stats.makespan;
  if (!job.optimizer_sync) {
    iteration = SimTime();
    for (const RankStats& r : stats.ranks) iteration = Max(iteration, r.last_end - r.first_start);
  }
  rep.iteration_time_ms = iteration.ToMillis();
  SimTime busy_total;
  for (int r = 0; r < s.num_ranks; ++r) {
    const RankStats& rs = stats.ranks[static_cast<std::size_t>(r)];
    RankReport k;
    k.rank = r;
    k.compute_busy_ms = rs.compute_busy.ToMillis();
    k.span_ms = (rs.last_end - rs.first_start).ToMillis();
    k.bubble_fraction = iteration.nanos() > 0 ? 1.0 - static_cast<double>(rs.compute_busy.nanos()) /
                                                          static_cast<double>(iteration.nanos())
                                              : 0.0;
    k.comm_bytes_sent = rs.bytes_sent_pp + rs.bytes_sent_dp;
    const InflightPeaks peaks = ComputeInflightPeaks(s.programs[static_cast<std::size_t>(r)]);
    k.peak_inflight_microbatches = peaks.inflight;
    k.peak_pending_weight_grads = peaks.pending_weight;
    rep.comm.pp += rs.bytes_sent_pp;
    rep.comm.dp += rs.bytes_sent_dp;
    busy_total += rs.compute_busy;
    rep.ranks.push_back(k);
  }
  rep.bubble_fraction =
      iteration.nanos() > 0
          ? 1.0 - static_cast<double>(busy_total.nanos()) /
                      (static_cast<double>(s.num_ranks) * static_cast<double>(iteration.nanos()))
          : 0.0;
  return rep;
}

Expected<SimResult> Simulate(const JobSpec& job, const SimulateOptions& opts) {
  const bool record_timeline = opts.record_timeline;
  SimResult res;
  std::optional<models::JobCosts> jc;
  int microbatches = job.microbatches.value_or(0);
  std::optional<models::CostInputs> inputs;
  if (!job.costs) {
    auto in = models::ParseCostInputs(job);
    if (!in) return in.error();
    inputs = std::move(*in);
    microbatches = inputs->microbatches;
  }
  auto sched = BuildSchedule(job, microbatches);
  if (!sched) return sched.error();
  res.schedule = std::move(*sched);
  if (job.costs) {
    res.costs = UniformCosts(*job.costs, res.schedule.num_stages);
  } else {
    auto c = models::BuildJobCosts(*inputs, res.schedule.num_stages);
    if (!c) return c.error();
    jc = std::move(*c);
    res.costs = CostTableFromModel(*jc);
  }
  TimelineRecorder recorder(res.schedule.num_ranks);
  res.stats = RunEngine(res.schedule, res.costs, {.optimizer_sync = job.optimizer_sync},
                        record_timeline ? &recorder : nullptr);
  res.timeline = recorder.Take();
  res.report = BuildReport(job, res.schedule, res.stats);
  if (jc) {
    AddModelReport(res.report, job.parallel, res.schedule, res.stats, *jc, opts.per_world_rank,
                   job.execution_config.recv_window);
  }
  return res;
}

}  // namespace pipetwin
