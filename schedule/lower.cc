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
  Schedule out = s.HasComms() ? s : AddSendRecv(s);
  if (opts.reduce_grad && !Has(out, ActionKind::kReduceGrad)) out = AddReduceGrad(out);
  if (opts.optimizer && !Has(out, ActionKind::kOptimizer)) out = AddOptimizer(out);
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
