#include "job/report_builder.h"

#include <algorithm>
#include <vector>

#include "models/placement.h"

namespace pipetwin {
namespace {

double Ms(std::int64_t ns) { return static_cast<double>(ns) * 1e-6; }

// TP and CP bytes, the exposed TP/CP collective time and the DP collectives inside compute
// actions of one pipeline rank's program, from the cost model (the simulator does not
// play these collectives as separate events).
struct ModelComm {
  std::int64_t tp_bytes = 0, cp_bytes = 0;
  double tp_cp_ms = 0;
  double tp_cp_hidden_ms = 0, dp_hidden_ms = 0;  // hidden under compute (training.overlap)
  // DP collectives inside compute actions' times: ZeRO-3's per-unit gathers and
  // reduce-scatters in F, I and W; ZeRO 1/2's parameter all-gather after the optimizer step;
  // fp8's amax all-reduces (over tp x cp x dp) in F and I.
  double dp_in_actions_ms = 0;
  // What the compute lost beside the hidden DP/ZeRO collectives (in the compute actions).
  double slowed_ms = 0;
};
ModelComm ModelCommOf(const std::vector<Action>& program, const models::JobCosts& jc) {
  ModelComm x;
  // Between UNSHARD and RESHARD a stage's F, I and W gather nothing (StageCost::Unshard).
  std::vector<bool> unsharded(jc.stages.size(), false);
  const models::StageCost::Zero3 none;
  for (const Action& a : program) {
    const models::StageCost& c = jc.stages[static_cast<std::size_t>(a.stage)];
    const models::StageCost::Zero3& z =
        unsharded[static_cast<std::size_t>(a.stage)] ? none : c.zero3;
    switch (a.kind) {
      case ActionKind::kForward:
        x.tp_cp_ms += c.forward_tp_comm_ms + c.forward_cp_comm_ms;
        x.tp_cp_hidden_ms += c.forward_tp_comm_overlapped_ms;
        x.dp_in_actions_ms += z.forward_exposed_ms + c.fp8_amax_forward_ms;
        x.dp_hidden_ms += z.forward_hidden_ms;
        x.slowed_ms += z.forward_slowdown_ms;
        x.tp_bytes += c.tp_bytes_per_microbatch;  // the microbatch's F, I and W together
        x.cp_bytes += c.cp_bytes_per_microbatch;
        break;
      case ActionKind::kBackwardInput:
      case ActionKind::kBackward:
        x.tp_cp_ms += c.backward_tp_comm_ms + c.backward_cp_comm_ms;
        x.tp_cp_hidden_ms += c.backward_tp_comm_overlapped_ms;
        x.dp_in_actions_ms += z.backward_input_exposed_ms + c.fp8_amax_backward_ms;
        x.dp_hidden_ms += z.backward_input_hidden_ms;
        x.slowed_ms += z.backward_input_slowdown_ms;
        if (a.kind == ActionKind::kBackward) {  // I and W fused
          x.tp_cp_ms -= c.fused_backward_tp_hidden_ms;
          x.tp_cp_hidden_ms += c.fused_backward_tp_hidden_ms;
          x.dp_in_actions_ms += z.backward_weight_exposed_ms;
          x.dp_hidden_ms += z.backward_weight_hidden_ms;
          x.slowed_ms += z.backward_weight_slowdown_ms;
        }
        break;
      case ActionKind::kBackwardWeight:
        x.dp_in_actions_ms += z.backward_weight_exposed_ms;
        x.dp_hidden_ms += z.backward_weight_hidden_ms;
        x.slowed_ms += z.backward_weight_slowdown_ms;
        break;
      case ActionKind::kOptimizer:
        x.tp_bytes += c.tp_bytes_per_iteration;
        x.dp_hidden_ms += c.param_allgather_hidden_ms;
        x.dp_in_actions_ms += c.param_allgather_ms - c.param_allgather_hidden_ms;
        x.slowed_ms += c.overlap_slowdown_ms;
        break;
      case ActionKind::kReduceGrad:
        x.dp_hidden_ms += c.dp_reduce_hidden_ms;
        break;
      case ActionKind::kSendF:
      case ActionKind::kRecvF:
      case ActionKind::kSendB:
      case ActionKind::kRecvB:
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
      case ActionKind::kWaitReduceGrad:
        break;
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
        unsharded[static_cast<std::size_t>(a.stage)] = a.kind == ActionKind::kUnshard;
        break;
    }
  }
  return x;
}

void AddThroughput(Report& r, const ResolvedJob& job, double iter_s) {
  const JobConfig& c = job.config;
  const double samples = job.SamplesPerStep();
  if (iter_s <= 0) return;
  r.throughput.samples_per_s = samples / iter_s;
  // Tokens where the job names a model (an abstract job's actions have no sequence).
  if (c.has_model) r.throughput.tokens_per_s = samples * c.model.seq_len / iter_s;
  if (!job.model_costs) return;
  const models::JobCosts& jc = *job.model_costs;
  const int world = c.parallel.WorldSize();
  // Model FLOPs as in Narayanan et al. 2021 (no recompute); hardware FLOPs count what runs.
  double model_flops = 0, hardware_flops = 0;
  for (const models::StageCost& s : jc.stages) {
    model_flops += s.model_flops_per_microbatch;
    hardware_flops += s.hardware_flops_per_microbatch;
  }
  const double steps = static_cast<double>(job.microbatches) * c.parallel.dp;
  model_flops *= steps;
  hardware_flops *= steps;
  r.throughput.tflops_per_device = model_flops / iter_s / world * 1e-12;
  r.throughput.mfu =
      jc.peak_flops_per_device > 0 ? model_flops / iter_s / world / jc.peak_flops_per_device : 0;
  r.hardware_flops = HardwareFlops{hardware_flops / iter_s / world * 1e-12,
                                   jc.peak_flops_per_device > 0
                                       ? hardware_flops / iter_s / world / jc.peak_flops_per_device
                                       : 0.0};
  r.job = JobSummary{jc.model.name, world,          world / c.parallel.pp,  jc.total_parameters,
                     model_flops,   hardware_flops, jc.cluster.device.name, {}};
  for (const models::StageCost& sc : jc.stages) r.job->layers_per_stage.push_back(sc.layers);
}

}  // namespace

std::int64_t IterationNs(bool optimizer_sync, const StepRecord& step) {
  if (optimizer_sync) return step.makespan_ns;
  std::int64_t longest = 0;
  for (const StepRecord::Row& row : step.rows) longest = std::max(longest, row.step.span_ns());
  return longest;
}

namespace {

// The servers' rows: measured where the record has them, else the cost model's stage sizes
// (float32 on the CPU executor, the gradient reduction's element size otherwise).
void AddParameterServers(Report& r, const ResolvedJob& job, const StepRecord& step) {
  const JobConfig& c = job.config;
  const int servers = models::ParameterServerRanks(c.cluster, c.parallel);
  if (servers == 0) return;
  std::vector<models::PsServerBytes> bytes = step.servers;
  if (bytes.empty() && job.model_costs) {
    const models::JobCosts& jc = *job.model_costs;
    std::vector<std::int64_t> elements;
    for (const models::StageCost& sc : jc.stages) elements.push_back(sc.params);
    bytes = models::PredictServerBytes(
        elements, {.dp = c.parallel.dp, .tp = c.parallel.tp, .servers = servers},
        jc.cpu_executor ? 4 : c.training.grad_reduce_bytes());
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int k = static_cast<int>(i);
    r.parameter_servers.push_back(
        {k, c.parallel.WorldSize() + k, bytes[i].sent, bytes[i].received});
  }
}

}  // namespace

Report BuildReport(const ResolvedJob& job, const StepRecord& step, const ReportOptions& opts) {
  const JobConfig& c = job.config;
  const Schedule& s = job.schedule;
  const ParallelConfig& par = c.parallel;
  const models::RankLayout layout(par, c.cluster.rank_order);
  const std::optional<models::JobCosts>& jc = job.model_costs;

  Report r;
  r.source = step.source;
  r.schedule = c.schedule;
  r.pp = s.num_ranks;
  r.microbatches = s.num_microbatches;
  r.optimizer_sync = c.optimizer_sync;
  r.makespan_ms = Ms(step.makespan_ns);
  const std::int64_t iteration = IterationNs(c.optimizer_sync, step);
  r.iteration_time_ms = Ms(iteration);
  const double iter = static_cast<double>(iteration);
  auto bubble = [&](double busy_ns) { return iteration > 0 ? 1.0 - busy_ns / iter : 0.0; };

  // Whole-step bubble over the rows the side recorded.
  double busy_total = 0;
  for (const StepRecord::Row& row : step.rows) busy_total += static_cast<double>(row.step.busy_ns);
  r.bubble_fraction =
      iteration > 0 ? 1.0 - busy_total / (static_cast<double>(step.rows.size()) * iter) : 0.0;

  // Per pipeline rank: what the program and the cost model say.
  std::vector<InflightPeaks> peaks(static_cast<std::size_t>(s.num_ranks));
  std::vector<ModelComm> model_comm(static_cast<std::size_t>(s.num_ranks));
  std::vector<models::RankMemory> model_memory(static_cast<std::size_t>(s.num_ranks));
  for (int q = 0; q < s.num_ranks; ++q) {
    const auto& prog = s.programs[static_cast<std::size_t>(q)];
    peaks[static_cast<std::size_t>(q)] = ComputeInflightPeaks(prog);
    if (jc) {
      model_comm[static_cast<std::size_t>(q)] = ModelCommOf(prog, *jc);
      model_memory[static_cast<std::size_t>(q)] =
          models::PipelineRankMemory(s, q, *jc, c.execution.recv_window);
    }
  }

  // The rows: the side's own (world ranks, or pipeline ranks), or — predicted model jobs with
  // per_world_rank — each pipeline rank's row repeated for every GPU that holds it.
  const bool expand = !step.world_rows && jc && opts.per_world_rank;
  const int rows = step.world_rows || expand ? layout.world_size() : s.num_ranks;
  // A predicted row per pipeline rank stands for its dp × tp × cp replicas in the totals.
  const std::int64_t weight = step.world_rows || expand ? 1 : layout.world_size() / s.num_ranks;
  const bool replicated_totals = !step.world_rows && jc;
  r.ranks.reserve(static_cast<std::size_t>(rows));
  int worst_rank = 0;
  std::int64_t worst_peak = -1;
  for (int g = 0; g < rows; ++g) {
    models::RankCoord coord;
    if (step.world_rows || expand) {
      coord = layout.Coord(g);
    } else {
      coord.pp = g;
    }
    const std::size_t q = static_cast<std::size_t>(coord.pp);
    const StepRecord::Row& row = step.rows[step.world_rows ? static_cast<std::size_t>(g) : q];
    RankReport k;
    k.rank = g;
    k.pp_rank = coord.pp;
    k.dp_rank = coord.dp;
    k.tp_rank = coord.tp;
    k.cp_rank = coord.cp;
    k.compute_busy_ms = Ms(row.step.busy_ns);
    k.span_ms = Ms(row.step.span_ns());
    k.bubble_fraction = bubble(static_cast<double>(row.step.busy_ns));
    k.peak_inflight_microbatches = peaks[q].inflight;
    k.peak_pending_weight_grads = peaks[q].pending_weight;
    CommBytes bytes = row.bytes;
    if (!step.world_rows && jc) {  // predicted: TP and CP bytes from the cost model
      bytes.tp = model_comm[q].tp_bytes;
      bytes.cp = model_comm[q].cp_bytes;
    }
    k.comm_bytes_sent = bytes.total();
    const std::int64_t w = replicated_totals ? weight : 1;
    r.comm.pp += bytes.pp * w;
    r.comm.dp += bytes.dp * w;
    r.comm.tp += bytes.tp * w;
    r.comm.cp += bytes.cp * w;
    if (row.memory) {
      k.memory = row.memory->at_peak;
      k.peak_memory_bytes = row.memory->peak;
    } else if (jc) {
      k.memory = model_memory[q].at_peak;
      k.peak_memory_bytes = model_memory[q].peak;
    }
    if (k.peak_memory_bytes > worst_peak) {
      worst_peak = k.peak_memory_bytes;
      worst_rank = g;
    }
    r.ranks.push_back(k);
  }

  AddThroughput(r, job, r.iteration_time_ms * 1e-3);
  AddParameterServers(r, job, step);
  r.dp_sync = step.dp_sync;
  if (!jc) return r;

  if (!step.world_rows) {
    // The step of the busiest pipeline rank, broken down.
    std::size_t busiest = 0;
    for (std::size_t q = 1; q < step.rows.size(); ++q) {
      if (step.rows[q].step.busy_ns > step.rows[busiest].step.busy_ns) busiest = q;
    }
    const StepRecord::Row& b = step.rows[busiest];
    const double busy = Ms(b.step.busy_ns);
    const double tp_cp = model_comm[busiest].tp_cp_ms;
    const double dp_exposed = Ms(b.dp_exposed_ns);
    // DP collectives that compute actions wait for are inside the busy time (ModelComm).
    const double in_actions = model_comm[busiest].dp_in_actions_ms;
    r.breakdown = Breakdown{static_cast<int>(busiest),
                            busy - tp_cp - in_actions,
                            tp_cp,
                            dp_exposed + in_actions,
                            std::max(0.0, r.iteration_time_ms - busy - dp_exposed),
                            model_comm[busiest].tp_cp_hidden_ms,
                            model_comm[busiest].dp_hidden_ms,
                            model_comm[busiest].slowed_ms};
  }
  r.memory = MemorySummary{worst_peak <= jc->hbm_bytes, jc->hbm_bytes, worst_rank, worst_peak,
                           std::max<std::int64_t>(0, worst_peak - jc->hbm_bytes)};
  return r;
}

}  // namespace pipetwin
