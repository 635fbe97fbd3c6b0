#include "models/program_memory.h"

#include <algorithm>

namespace pipetwin::models {

MemoryBytes RankFixedMemory(const JobCosts& jc, const std::vector<int>& stages) {
  MemoryBytes base;
  for (int s : stages) {
    const StageCost& c = jc.stages[static_cast<std::size_t>(s)];
    base.params += c.param_bytes;
    base.grads += c.grad_bytes;
    base.optimizer += c.optimizer_bytes;
    // A rank computes one stage (chunk) at a time, and the buffers are that computation's
    // working set (receives, the sp-gathered input, cp's K/V blocks, a reduce-scatter bucket,
    // ZeRO-3's gathered units): the largest of its stages', not their sum.
    base.comm_buffers = std::max(base.comm_buffers, c.comm_buffer_bytes);
  }
  return base;
}

RankMemory RankMemoryOverProgram(const std::vector<Action>& program, const JobCosts& jc) {
  std::vector<bool> mine(jc.stages.size(), false);
  for (const Action& a : program) mine[static_cast<std::size_t>(a.stage)] = true;
  std::vector<int> stages;
  for (std::size_t s = 0; s < mine.size(); ++s) {
    if (mine[s]) stages.push_back(static_cast<int>(s));
  }
  const MemoryBytes base = RankFixedMemory(jc, stages);
  const std::int64_t fixed = base.params + base.grads + base.optimizer + base.comm_buffers;
  std::int64_t act = 0;
  // FSDP: the parameters of the stages unsharded now, and their unsharded gradients, which
  // accumulate from the stage's first backward until its REDUCE_GRAD (or RESHARD).
  std::int64_t gathered = 0, gathered_grads = 0;
  std::vector<char> unsharded(jc.stages.size(), 0), grads_live(jc.stages.size(), 0);
  RankMemory out;
  out.at_peak = base;
  out.peak = fixed;
  auto consider = [&](std::int64_t activations) {
    if (fixed + gathered + gathered_grads + activations > out.peak) {
      out.peak = fixed + gathered + gathered_grads + activations;
      out.at_peak = base;
      out.at_peak.params += gathered;
      out.at_peak.grads += gathered_grads;
      out.at_peak.activations = activations;
    }
  };
  auto free_grads = [&](std::size_t st) {
    if (grads_live[st]) gathered_grads -= jc.stages[st].unshard.held_grad_bytes;
    grads_live[st] = 0;
  };
  for (const Action& a : program) {
    const std::size_t st = static_cast<std::size_t>(a.stage);
    const StageCost& c = jc.stages[st];
    const bool backward = a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput;
    if (backward && unsharded[st] && !grads_live[st]) {
      grads_live[st] = 1;
      gathered_grads += c.unshard.held_grad_bytes;
    }
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
      case ActionKind::kOptimizer:
        break;
      case ActionKind::kReduceGrad:
        free_grads(st);
        break;
      case ActionKind::kUnshard:
        if (c.unshard.applies && !unsharded[st]) {
          unsharded[st] = 1;
          gathered += c.unshard.held_bytes;
          consider(act);
        }
        break;
      case ActionKind::kReshard:
        if (unsharded[st]) gathered -= c.unshard.held_bytes;
        unsharded[st] = 0;
        free_grads(st);
        break;
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
      case ActionKind::kWaitReduceGrad:
        break;
    }
  }
  return out;
}

RankMemory CpuExecutorRankMemory(const Schedule& s, int pp_rank, const JobCosts& jc,
                                 int recv_window) {
  const auto& prog = s.programs[static_cast<std::size_t>(pp_rank)];
  const int last = s.num_stages - 1;
  MemoryBytes fixed;
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.stage_to_rank[static_cast<std::size_t>(st)] != pp_rank) continue;
    const StageCost& c = jc.stages[static_cast<std::size_t>(st)];
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
  // As exec/engine.cc: a RECV posts itself if the window had not reached it; the window moves
  // on when a compute consumes a received input (a stage on another rank), not at the RECV.
  std::size_t seen = 0;
  auto remote = [&](int stage) {
    return stage >= 0 && stage < s.num_stages &&
           s.stage_to_rank[static_cast<std::size_t>(stage)] != pp_rank;
  };
  for (const Action& a : prog) {
    const StageCost& c = jc.stages[static_cast<std::size_t>(a.stage)];
    const bool forward = a.kind == ActionKind::kForward;
    if ((forward || a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) &&
        remote(forward ? a.stage - 1 : a.stage + 1)) {
      ++done;
      post_until(done + window);
    }
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
        post_until(++seen);
        break;
      case ActionKind::kReduceGrad:  // ZeRO-1: the padded buffer the reduce-scatter fills
        comm += c.zero1_padded_bytes;
        consider(act, comm);
        break;
      case ActionKind::kOptimizer:  // ZeRO-1: the padded parameters, gathered, then both freed
        consider(act, comm + c.zero1_padded_bytes);
        comm -= c.zero1_padded_bytes;
        break;
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
      case ActionKind::kWaitReduceGrad:
        break;
    }
  }
  return out;
}

RankMemory PipelineRankMemory(const Schedule& s, int pp_rank, const JobCosts& jc, int recv_window) {
  return jc.cpu_executor ? CpuExecutorRankMemory(s, pp_rank, jc, recv_window)
                         : RankMemoryOverProgram(s.programs[static_cast<std::size_t>(pp_rank)], jc);
}

}  // namespace pipetwin::models
