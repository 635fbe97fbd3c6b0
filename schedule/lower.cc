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

void OrderReceivesAsSent(Schedule& s) {
  const int num_stages = s.num_stages;
  const int m = s.num_microbatches;
  if (num_stages < 1 || m < 1) return;
  // A message is named by the receiving action: (its stage, its microbatch, direction).
  const auto slot = [&](const Action& recv) -> std::size_t {
    return (static_cast<std::size_t>(recv.stage) * static_cast<std::size_t>(m) +
            static_cast<std::size_t>(recv.microbatch)) *
               2 +
           (recv.kind == ActionKind::kRecvB ? 1u : 0u);
  };
  const auto in_range = [&](const Action& a) {
    return a.stage >= 0 && a.stage < num_stages && a.microbatch >= 0 && a.microbatch < m;
  };
  // Position of each message in its (sender, receiver) pair's send order.
  std::vector<int> send_seq(static_cast<std::size_t>(num_stages) * static_cast<std::size_t>(m) * 2,
                            -1);
  const std::size_t ranks = static_cast<std::size_t>(s.num_ranks);
  std::vector<int> sent_on_pair(ranks * ranks, 0);
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : s.programs[static_cast<std::size_t>(r)]) {
      if (a.kind != ActionKind::kSendF && a.kind != ActionKind::kSendB) continue;
      const Action recv = MatchingP2P(a);
      const int to = PeerRank(s, a);
      if (to < 0 || to >= s.num_ranks || !in_range(recv)) return;
      send_seq[slot(recv)] =
          sent_on_pair[static_cast<std::size_t>(r) * ranks + static_cast<std::size_t>(to)]++;
    }
  }
  struct Recv {
    int seq;
    std::size_t pos;
  };
  std::vector<std::vector<Recv>> by_sender(ranks);
  for (int r = 0; r < s.num_ranks; ++r) {
    auto& prog = s.programs[static_cast<std::size_t>(r)];
    for (auto& v : by_sender) v.clear();
    bool any = false;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Action& a = prog[i];
      if (a.kind != ActionKind::kRecvF && a.kind != ActionKind::kRecvB) continue;
      const int from = PeerRank(s, a);
      if (from < 0 || from >= s.num_ranks || !in_range(a) || send_seq[slot(a)] < 0) return;
      by_sender[static_cast<std::size_t>(from)].push_back({send_seq[slot(a)], i});
      any = true;
    }
    if (!any) continue;
    // at[i]: the receives to issue where the receive at position i stood, in send order.
    std::vector<std::vector<Action>> at(prog.size());
    bool moved = false;
    for (auto& recvs : by_sender) {
      std::sort(recvs.begin(), recvs.end(),
                [](const Recv& x, const Recv& y) { return x.seq < y.seq; });
      // Each receive goes to the earliest position among itself and the receives of
      // messages sent after it (a suffix minimum over send order).
      std::vector<std::size_t> place(recvs.size());
      std::size_t earliest = prog.size();
      for (std::size_t k = recvs.size(); k-- > 0;) {
        earliest = std::min(earliest, recvs[k].pos);
        place[k] = earliest;
        moved = moved || earliest != recvs[k].pos;
      }
      for (std::size_t k = 0; k < recvs.size(); ++k) at[place[k]].push_back(prog[recvs[k].pos]);
    }
    if (!moved) continue;
    std::vector<Action> out;
    out.reserve(prog.size());
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const ActionKind k = prog[i].kind;
      if (k == ActionKind::kRecvF || k == ActionKind::kRecvB) {
        out.insert(out.end(), at[i].begin(), at[i].end());
      } else {
        out.push_back(prog[i]);
      }
    }
    prog = std::move(out);
  }
}

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
  OrderReceivesAsSent(out);
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
  if (send_recv) OrderReceivesAsSent(out);
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

namespace pipetwin {

Schedule ForTorchRuntime(const Schedule& lowered) {
  Schedule s = Has(lowered, ActionKind::kReduceGrad) ? lowered : AddReduceGrad(lowered);
  for (auto& prog : s.programs) {
    std::vector<Action> out;
    out.reserve(prog.size() * 5 / 4 + 4);
    std::vector<Action> pending;  // sends whose wait is still to place, in send order
    for (const Action& a : prog) {
      if (a.kind == ActionKind::kOptimizer || a.kind == ActionKind::kWaitReduceGrad ||
          IsWaitSend(a.kind)) {
        continue;  // OPT is not torch's; the waits are placed anew
      }
      out.push_back(a);
      if (a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB) pending.push_back(a);
      if (a.kind == ActionKind::kReduceGrad) {
        out.push_back({a.stage, ActionKind::kWaitReduceGrad, -1});
      }
      if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) {
        const Action send{a.stage, ActionKind::kSendF, a.microbatch};
        const auto it = std::find(pending.begin(), pending.end(), send);
        if (it != pending.end()) {
          out.push_back({a.stage, ActionKind::kWaitSendF, a.microbatch});
          pending.erase(it);
        }
      }
    }
    for (const Action& send : pending) {
      out.push_back(
          {send.stage,
           send.kind == ActionKind::kSendF ? ActionKind::kWaitSendF : ActionKind::kWaitSendB,
           send.microbatch});
    }
    prog = std::move(out);
  }
  return s;
}

std::vector<std::vector<std::optional<Action>>> StepAligned(const Schedule& compute_only) {
  const Schedule& s = compute_only;
  const std::size_t ranks = static_cast<std::size_t>(s.num_ranks);
  const std::size_t m = static_cast<std::size_t>(std::max(s.num_microbatches, 1));
  // Step at which (stage, microbatch)'s forward and its input-gradient backward ran.
  std::vector<int> f_step(static_cast<std::size_t>(s.num_stages) * m, -1);
  std::vector<int> b_step(f_step.size(), -1);
  const auto idx = [&](int stage, int mb) {
    return static_cast<std::size_t>(stage) * m + static_cast<std::size_t>(mb);
  };
  const auto rank_of = [&](int stage) { return s.stage_to_rank[static_cast<std::size_t>(stage)]; };
  std::vector<std::vector<std::optional<Action>>> rows(ranks);
  std::vector<std::size_t> pc(ranks, 0);
  std::size_t left = s.NumActions();
  for (int step = 0; left > 0; ++step) {
    bool progress = false;
    for (std::size_t r = 0; r < ranks; ++r) {
      const auto& prog = s.programs[r];
      if (pc[r] >= prog.size()) continue;
      const Action& a = prog[pc[r]];
      int needs = -1;  // step of the cross-rank action this one waits for
      bool known = true;
      if (a.kind == ActionKind::kForward && a.stage > 0 &&
          rank_of(a.stage - 1) != static_cast<int>(r)) {
        needs = f_step[idx(a.stage - 1, a.microbatch)];
        known = needs >= 0;
      } else if ((a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) &&
                 a.stage + 1 < s.num_stages && rank_of(a.stage + 1) != static_cast<int>(r)) {
        needs = b_step[idx(a.stage + 1, a.microbatch)];
        known = needs >= 0;
      }
      if (!known || needs >= step) {
        rows[r].push_back(std::nullopt);
        continue;
      }
      rows[r].push_back(a);
      if (a.kind == ActionKind::kForward) f_step[idx(a.stage, a.microbatch)] = step;
      if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) {
        b_step[idx(a.stage, a.microbatch)] = step;
      }
      ++pc[r];
      --left;
      progress = true;
    }
    if (!progress) {
      // Nothing could run (an invalid schedule): stop rather than loop.
      break;
    }
  }
  // No trailing idle steps.
  for (auto& row : rows) {
    while (!row.empty() && !row.back()) row.pop_back();
  }
  return rows;
}

}  // namespace pipetwin
