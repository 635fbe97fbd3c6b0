#include "schedule/lower.h"

#include <algorithm>

namespace pipetwin {
namespace {

bool IsBackwardInput(ActionKind k) {
  return k == ActionKind::kBackward || k == ActionKind::kBackwardInput;
}

bool Has(const Schedule& s, ActionKind kind) {
  for (const auto& prog : s.programs) {
    for (const Action& a : prog) {
      if (a.kind == kind) return true;
    }
  }
  return false;
}

}  // namespace

Schedule AddSendRecv(const Schedule& s) {
  Schedule out = s;
  const auto rank_of = [&](int stage) { return s.stage_to_rank[static_cast<std::size_t>(stage)]; };
  const int last = s.num_stages - 1;
  for (int r = 0; r < s.num_ranks; ++r) {
    const auto& prog = s.programs[static_cast<std::size_t>(r)];
    std::vector<Action> lowered;
    lowered.reserve(prog.size() * 2);
    for (const Action& a : prog) {
      const int st = a.stage;
      const int mb = a.microbatch;
      if (a.kind == ActionKind::kForward) {
        if (st > 0 && rank_of(st - 1) != r) lowered.push_back({st, ActionKind::kRecvF, mb});
        lowered.push_back(a);
        if (st < last && rank_of(st + 1) != r) lowered.push_back({st, ActionKind::kSendF, mb});
      } else if (IsBackwardInput(a.kind)) {
        if (st < last && rank_of(st + 1) != r) lowered.push_back({st, ActionKind::kRecvB, mb});
        lowered.push_back(a);
        if (st > 0 && rank_of(st - 1) != r) lowered.push_back({st, ActionKind::kSendB, mb});
      } else {
        lowered.push_back(a);
      }
    }
    out.programs[static_cast<std::size_t>(r)] = std::move(lowered);
  }
  return out;
}

Schedule AddReduceGrad(const Schedule& s) {
  Schedule out = s;
  for (auto& prog : out.programs) {
    // Position of the last gradient-producing action of each stage.
    std::vector<int> last_grad(static_cast<std::size_t>(s.num_stages), -1);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const ActionKind k = prog[i].kind;
      if (k == ActionKind::kBackward || k == ActionKind::kBackwardWeight) {
        last_grad[static_cast<std::size_t>(prog[i].stage)] = static_cast<int>(i);
      }
    }
    // The reduction goes after the last gradient of its stage and the sends that follow it.
    std::vector<Action> lowered;
    lowered.reserve(prog.size() + last_grad.size());
    int pending = -1;  // stage whose REDUCE_GRAD waits for the sends after its last gradient
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Action& a = prog[i];
      const bool trailing_send =
          (a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB) && a.stage == pending;
      if (pending >= 0 && !trailing_send) {
        lowered.push_back({pending, ActionKind::kReduceGrad, -1});
        pending = -1;
      }
      lowered.push_back(a);
      if (last_grad[static_cast<std::size_t>(a.stage)] == static_cast<int>(i)) pending = a.stage;
    }
    if (pending >= 0) lowered.push_back({pending, ActionKind::kReduceGrad, -1});
    prog = std::move(lowered);
  }
  return out;
}

Schedule AddOptimizer(const Schedule& s) {
  Schedule out = s;
  for (int r = 0; r < s.num_ranks; ++r) {
    for (int st : StagesOfRank(s, r)) {
      out.programs[static_cast<std::size_t>(r)].push_back({st, ActionKind::kOptimizer, -1});
    }
  }
  return out;
}

Schedule Lower(const Schedule& s, const LoweringOptions& opts) {
  // The passes above, fused into one walk over each program (the sweep benchmark lowers a
  // schedule per configuration); tests check that both give the same programs.
  const bool send_recv = !s.HasComms();
  const bool reduce = opts.reduce_grad && !Has(s, ActionKind::kReduceGrad);
  const bool optimizer = opts.optimizer && !Has(s, ActionKind::kOptimizer);
  if (!send_recv && !reduce && !optimizer) return s;
  Schedule out;
  out.num_ranks = s.num_ranks;
  out.num_stages = s.num_stages;
  out.num_microbatches = s.num_microbatches;
  out.stage_to_rank = s.stage_to_rank;
  out.programs.resize(s.programs.size());
  const auto rank_of = [&](int stage) { return s.stage_to_rank[static_cast<std::size_t>(stage)]; };
  const int last = s.num_stages - 1;
  std::vector<int> last_grad(static_cast<std::size_t>(s.num_stages));
  for (int r = 0; r < s.num_ranks; ++r) {
    const auto& prog = s.programs[static_cast<std::size_t>(r)];
    std::fill(last_grad.begin(), last_grad.end(), -1);
    if (reduce) {
      for (std::size_t i = 0; i < prog.size(); ++i) {
        const ActionKind k = prog[i].kind;
        if (k == ActionKind::kBackward || k == ActionKind::kBackwardWeight) {
          last_grad[static_cast<std::size_t>(prog[i].stage)] = static_cast<int>(i);
        }
      }
    }
    auto& lowered = out.programs[static_cast<std::size_t>(r)];
    lowered.reserve(prog.size() * (send_recv ? 2 : 1) +
                    2 * static_cast<std::size_t>(s.StagesPerRank()));
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Action& a = prog[i];
      const int st = a.stage;
      const int mb = a.microbatch;
      const bool fwd = a.kind == ActionKind::kForward;
      const bool input_grad = IsBackwardInput(a.kind);
      if (send_recv && fwd && st > 0 && rank_of(st - 1) != r) {
        lowered.push_back({st, ActionKind::kRecvF, mb});
      }
      if (send_recv && input_grad && st < last && rank_of(st + 1) != r) {
        lowered.push_back({st, ActionKind::kRecvB, mb});
      }
      lowered.push_back(a);
      if (send_recv && fwd && st < last && rank_of(st + 1) != r) {
        lowered.push_back({st, ActionKind::kSendF, mb});
      }
      if (send_recv && input_grad && st > 0 && rank_of(st - 1) != r) {
        lowered.push_back({st, ActionKind::kSendB, mb});
      }
      if (reduce && last_grad[static_cast<std::size_t>(st)] == static_cast<int>(i)) {
        // After the last gradient of the stage and the send that follows it.
        std::size_t j = i + 1;
        while (j < prog.size() && !send_recv &&
               (prog[j].kind == ActionKind::kSendF || prog[j].kind == ActionKind::kSendB) &&
               prog[j].stage == st) {
          lowered.push_back(prog[j]);
          ++j;
        }
        i = j - 1;
        lowered.push_back({st, ActionKind::kReduceGrad, -1});
      }
    }
    if (optimizer) {
      for (int st = 0; st < s.num_stages; ++st) {
        if (rank_of(st) == r) lowered.push_back({st, ActionKind::kOptimizer, -1});
      }
    }
  }
  return out;
}

Schedule ComputeOnly(const Schedule& s) {
  Schedule out = s;
  for (auto& prog : out.programs) {
    prog.erase(std::remove_if(prog.begin(), prog.end(),
                              [](const Action& a) {
                                return !IsCompute(a.kind) || a.kind == ActionKind::kOptimizer;
                              }),
               prog.end());
  }
  return out;
}

}  // namespace pipetwin
