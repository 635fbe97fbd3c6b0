#include "sim/model_costs.h"

#include <algorithm>

namespace pipetwin {

CostTable CostTableFromModel(const models::JobCosts& jc) {
  CostTable t;
  t.stages.reserve(jc.stages.size());
  for (const models::StageCost& c : jc.stages) {
    StageTimes st;
    st.forward = SimTime::FromMillis(c.forward_ms);
    st.backward_input = SimTime::FromMillis(c.backward_input_ms);
    st.backward_weight = SimTime::FromMillis(c.backward_weight_ms);
    st.backward = st.backward_input + st.backward_weight;
    st.send_forward = st.send_backward = SimTime::FromMillis(c.p2p_ms);
    st.send_bytes = static_cast<std::int64_t>(c.p2p_bytes);
    // The reduction (and, for ZeRO 1/2, the parameter all-gather that follows the step, and
    // the tied-embedding sync) run on the collective stream.
    st.dp_reduce = SimTime::FromMillis(c.dp_reduce_ms + c.embedding_sync_ms);
    st.dp_reduce_bytes = static_cast<std::int64_t>(c.dp_reduce_bytes);
    st.optimizer = SimTime::FromMillis(c.optimizer_ms + c.param_allgather_ms);
    t.stages.push_back(st);
  }
  t.sync = SimTime::FromMillis(jc.sync_ms);
  return t;
}

RankMemory RankMemoryOverProgram(const std::vector<Action>& program, const models::JobCosts& jc) {
  std::vector<bool> mine(jc.stages.size(), false);
  for (const Action& a : program) mine[static_cast<std::size_t>(a.stage)] = true;
  MemoryBytes base;
  for (std::size_t s = 0; s < jc.stages.size(); ++s) {
    if (!mine[s]) continue;
    const models::StageCost& c = jc.stages[s];
    base.params += c.param_bytes;
    base.grads += c.grad_bytes;
    base.optimizer += c.optimizer_bytes;
    base.comm_buffers += c.comm_buffer_bytes;
  }
  const std::int64_t fixed = base.params + base.grads + base.optimizer + base.comm_buffers;
  std::int64_t act = 0;
  RankMemory out;
  out.at_peak = base;
  out.peak = fixed;
  auto consider = [&](std::int64_t activations) {
    if (fixed + activations > out.peak) {
      out.peak = fixed + activations;
      out.at_peak = base;
      out.at_peak.activations = activations;
    }
  };
  for (const Action& a : program) {
    const models::StageCost& c = jc.stages[static_cast<std::size_t>(a.stage)];
    switch (a.kind) {
      case ActionKind::kForward:
        act += c.activation_bytes_per_microbatch;
        consider(act);
        break;
      case ActionKind::kBackwardInput:
        // While I runs, the full activations, its working set and the W part it keeps coexist.
        consider(act + c.activation_transient_bytes + c.activation_bytes_pending_w);
        act += c.activation_bytes_pending_w - c.activation_bytes_per_microbatch;
        break;
      case ActionKind::kBackward:
        consider(act + c.activation_transient_bytes);
        act -= c.activation_bytes_per_microbatch;
        break;
      case ActionKind::kBackwardWeight:
        act -= c.activation_bytes_pending_w;
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
  return out;
}

RankMemory CpuExecutorRankMemory(const Schedule& s, int pp_rank, const models::JobCosts& jc,
                                 int recv_window) {
  const auto& prog = s.programs[static_cast<std::size_t>(pp_rank)];
  const int last = s.num_stages - 1;
  MemoryBytes fixed;
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.stage_to_rank[static_cast<std::size_t>(st)] != pp_rank) continue;
    const models::StageCost& c = jc.stages[static_cast<std::size_t>(st)];
    fixed.params += c.param_bytes;
    fixed.grads += c.grad_bytes;
    fixed.optimizer += c.optimizer_bytes;
  }
  const std::int64_t base = fixed.params + fixed.grads + fixed.optimizer;
  auto boundary = [&](int stage) {
    return static_cast<std::int64_t>(jc.stages[static_cast<std::size_t>(stage)].p2p_bytes);
  };
  std::int64_t act = 0, comm = 0;
  RankMemory out;
  out.at_peak = fixed;
  out.peak = base;
  auto consider = [&](std::int64_t a, std::int64_t c) {
    out.at_peak.activations = std::max(out.at_peak.activations, a);
    out.at_peak.comm_buffers = std::max(out.at_peak.comm_buffers, c);
    out.peak = std::max(out.peak, base + a + c);
  };
  // The engine's receive window.
  std::vector<int> recv_stage;
  for (const Action& a : prog) {
    if (a.kind == ActionKind::kRecvF || a.kind == ActionKind::kRecvB) recv_stage.push_back(a.stage);
  }
  std::size_t posted = 0, done = 0;
  auto post_until = [&](std::size_t n) {
    for (; posted < std::min(n, recv_stage.size()); ++posted) comm += boundary(recv_stage[posted]);
    consider(act, comm);
  };
  const std::size_t window = static_cast<std::size_t>(std::max(1, recv_window));
  post_until(window);
  for (const Action& a : prog) {
    const models::StageCost& c = jc.stages[static_cast<std::size_t>(a.stage)];
    switch (a.kind) {
      case ActionKind::kForward:
        if (a.stage != last) comm += boundary(a.stage);  // its output
        act += c.activation_bytes_per_microbatch;
        consider(act, comm);
        if (a.stage != 0) comm -= boundary(a.stage);  // its input, released after F
        break;
      case ActionKind::kBackwardInput:
      case ActionKind::kBackward:
        if (a.stage != 0) comm += boundary(a.stage);  // the input gradient it writes
        consider(act + c.activation_transient_bytes, comm);
        act += c.activation_bytes_pending_w - c.activation_bytes_per_microbatch;
        if (a.kind == ActionKind::kBackward) act -= c.activation_bytes_pending_w;
        if (a.stage != last) comm -= boundary(a.stage);  // the output gradient it read
        break;
      case ActionKind::kBackwardWeight:
        act -= c.activation_bytes_pending_w;
        break;
      case ActionKind::kSendF:
      case ActionKind::kSendB:
        comm -= boundary(a.stage);  // handed to the transport
        break;
      case ActionKind::kRecvF:
      case ActionKind::kRecvB:
        post_until(done + 1);
        ++done;
        post_until(done + window);
        break;
      case ActionKind::kReduceGrad:  // ZeRO-1: the padded buffer the reduce-scatter fills
        comm += c.zero1_padded_bytes;
        consider(act, comm);
        break;
      case ActionKind::kOptimizer:  // ZeRO-1: the padded parameters, gathered, then both freed
        consider(act, comm + c.zero1_padded_bytes);
        comm -= c.zero1_padded_bytes;
        break;
    }
  }
  return out;
}

void AddModelReport(Report& r, const ParallelConfig& par, const Schedule& s, const SimStats& st,
                    const models::JobCosts& jc, bool per_world_rank, int recv_window) {
  const models::RankLayout layout(par, jc.rank_order);
  const int world = layout.world_size();
  const int replicas = world / par.pp;  // dp × tp × cp copies of the pipeline
  const double iter_ms = r.iteration_time_ms;
  const double iter_s = iter_ms * 1e-3;
  const std::int64_t m = s.num_microbatches;

  // Per pipeline rank: memory, TP/CP bytes and exposed collective time.
  struct PipeRank {
    RankMemory mem;
    std::int64_t tp_bytes = 0, cp_bytes = 0;
    double tp_cp_ms = 0;
  };
  std::vector<PipeRank> pr(static_cast<std::size_t>(s.num_ranks));
  for (int q = 0; q < s.num_ranks; ++q) {
    PipeRank& x = pr[static_cast<std::size_t>(q)];
    const auto& prog = s.programs[static_cast<std::size_t>(q)];
    x.mem = jc.cpu_executor ? CpuExecutorRankMemory(s, q, jc, recv_window)
                            : RankMemoryOverProgram(prog, jc);
    for (const Action& a : prog) {
      const models::StageCost& c = jc.stages[static_cast<std::size_t>(a.stage)];
      switch (a.kind) {
        case ActionKind::kForward:
          x.tp_cp_ms += c.forward_tp_comm_ms + c.forward_cp_comm_ms;
          x.tp_bytes += c.tp_bytes_per_microbatch;  // the microbatch's F, I and W together
          x.cp_bytes += c.cp_bytes_per_microbatch;
          break;
        case ActionKind::kBackwardInput:
        case ActionKind::kBackward:
          x.tp_cp_ms += c.backward_tp_comm_ms + c.backward_cp_comm_ms;
          break;
        case ActionKind::kOptimizer:
          x.tp_bytes += c.tp_bytes_per_iteration;
          break;
        case ActionKind::kBackwardWeight:
        case ActionKind::kSendF:
        case ActionKind::kRecvF:
        case ActionKind::kSendB:
        case ActionKind::kRecvB:
        case ActionKind::kReduceGrad:
          break;
      }
    }
  }

  // One row per world rank.
  const std::vector<RankReport> pipe = r.ranks;
  r.ranks.clear();
  r.ranks.reserve(static_cast<std::size_t>(per_world_rank ? world : s.num_ranks));
  r.comm = CommBytes{};
  bool fits = true;
  int worst_rank = 0;
  std::int64_t worst_peak = -1;
  const int rows = per_world_rank ? world : s.num_ranks;
  const std::int64_t weight = per_world_rank ? 1 : replicas;  // bytes of the rows left out
  for (int g = 0; g < rows; ++g) {
    models::RankCoord c;
    if (per_world_rank) {
      c = layout.Coord(g);
    } else {
      c.pp = g;
    }
    const PipeRank& x = pr[static_cast<std::size_t>(c.pp)];
    const RankStats& rs = st.ranks[static_cast<std::size_t>(c.pp)];
    RankReport k = pipe[static_cast<std::size_t>(c.pp)];
    k.rank = g;
    k.pp_rank = c.pp;
    k.dp_rank = c.dp;
    k.tp_rank = c.tp;
    k.cp_rank = c.cp;
    k.memory = x.mem.at_peak;
    k.peak_memory_bytes = x.mem.peak;
    k.comm_bytes_sent = rs.bytes_sent_pp + rs.bytes_sent_dp + x.tp_bytes + x.cp_bytes;
    r.comm.pp += rs.bytes_sent_pp * weight;
    r.comm.dp += rs.bytes_sent_dp * weight;
    r.comm.tp += x.tp_bytes * weight;
    r.comm.cp += x.cp_bytes * weight;
    if (k.peak_memory_bytes > worst_peak) {
      worst_peak = k.peak_memory_bytes;
      worst_rank = g;
    }
    fits = fits && k.peak_memory_bytes <= jc.hbm_bytes;
    r.ranks.push_back(k);
  }

  // Throughput and MFU (model FLOPs as in Narayanan et al. 2021: no recompute).
  double model_flops = 0;
  for (const models::StageCost& c : jc.stages) model_flops += c.model_flops_per_microbatch;
  model_flops *= static_cast<double>(m) * par.dp;
  const double samples = static_cast<double>(m) * jc.micro_batch * par.dp;
  if (iter_s > 0) {
    r.throughput.samples_per_s = samples / iter_s;
    r.throughput.tokens_per_s = samples * jc.model.seq_len / iter_s;
    r.throughput.tflops_per_device = model_flops / iter_s / world * 1e-12;
    r.throughput.mfu = jc.peak_flops_per_device > 0
                           ? model_flops / iter_s / world / jc.peak_flops_per_device
                           : 0.0;
  }

  // Hardware FLOPs: what runs, recompute included. Narayanan et al. 2021 report their
  // "achieved teraFLOP/s per GPU" this way (their Eq. 3 counts the recomputed forward).
  double hardware_flops = 0;
  for (const models::StageCost& c : jc.stages) hardware_flops += c.hardware_flops_per_microbatch;
  hardware_flops *= static_cast<double>(m) * par.dp;
  if (iter_s > 0) {
    nlohmann::ordered_json hw;
    hw["tflops_per_device"] = hardware_flops / iter_s / world * 1e-12;
    hw["hfu"] = jc.peak_flops_per_device > 0
                    ? hardware_flops / iter_s / world / jc.peak_flops_per_device
                    : 0.0;
    r.extra["hardware_flops"] = hw;
  }

  // The step of the busiest pipeline rank, broken down.
  int busiest = 0;
  for (int q = 1; q < s.num_ranks; ++q) {
    if (st.ranks[static_cast<std::size_t>(q)].compute_busy >
        st.ranks[static_cast<std::size_t>(busiest)].compute_busy) {
      busiest = q;
    }
  }
  const RankStats& b = st.ranks[static_cast<std::size_t>(busiest)];
  const double busy = b.compute_busy.ToMillis();
  const double tp_cp = pr[static_cast<std::size_t>(busiest)].tp_cp_ms;
  const double dp_exposed = b.dp_exposed.ToMillis();
  nlohmann::ordered_json bd;
  bd["pipeline_rank"] = busiest;
  bd["compute_ms"] = busy - tp_cp;
  bd["tp_cp_comm_exposed_ms"] = tp_cp;
  bd["dp_comm_exposed_ms"] = dp_exposed;
  bd["pp_comm_and_bubble_ms"] = std::max(0.0, iter_ms - busy - dp_exposed);
  r.extra["breakdown"] = bd;

  nlohmann::ordered_json mem;
  mem["fits"] = fits;
  mem["device_memory_bytes"] = jc.hbm_bytes;
  mem["worst_rank"] = worst_rank;
  mem["worst_peak_bytes"] = worst_peak;
  mem["shortfall_bytes"] = std::max<std::int64_t>(0, worst_peak - jc.hbm_bytes);
  r.extra["memory"] = mem;

  nlohmann::ordered_json job;
  job["model"] = jc.model.name;
  job["world_size"] = world;
  job["pipeline_replicas"] = replicas;
  job["parameters"] = jc.total_parameters;
  job["model_flops_per_iteration"] = model_flops;
  job["hardware_flops_per_iteration"] = hardware_flops;
  job["device"] = jc.cluster.device.name;
  r.extra["job"] = job;
}

}  // namespace pipetwin
