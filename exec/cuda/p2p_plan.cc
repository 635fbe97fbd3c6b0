#include "exec/cuda/p2p_plan.h"

#include <stdexcept>
#include <string>

namespace pipetwin::cuda {

Action P2pPlan::MatchingRecv(const Action& send) {
  if (send.kind == ActionKind::kSendF) return {send.stage + 1, ActionKind::kRecvF, send.microbatch};
  return {send.stage - 1, ActionKind::kRecvB, send.microbatch};
}

P2pPlan::Key P2pPlan::KeyOf(const Action& recv) {
  return {static_cast<int>(recv.kind), recv.stage, recv.microbatch};
}

P2pPlan P2pPlan::Build(const Schedule& s) {
  P2pPlan plan;
  std::map<std::tuple<int, int, bool>, int> index;  // (sender, receiver, forward) → channel
  // Channels in a fixed order: by sender rank, then program order.
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : s.programs[static_cast<std::size_t>(r)]) {
      if (a.kind != ActionKind::kSendF && a.kind != ActionKind::kSendB) continue;
      const Action recv = MatchingRecv(a);
      if (recv.stage < 0 || recv.stage >= s.num_stages) {
        throw std::invalid_argument("p2p plan: " + a.ToString() + " sends outside the pipeline");
      }
      const int peer = s.stage_to_rank[static_cast<std::size_t>(recv.stage)];
      const bool fwd = a.kind == ActionKind::kSendF;
      auto [it, inserted] =
          index.try_emplace({r, peer, fwd}, static_cast<int>(plan.channels_.size()));
      if (inserted) plan.channels_.push_back(Channel{r, peer, fwd, {}});
      Channel& c = plan.channels_[static_cast<std::size_t>(it->second)];
      if (!plan.slots_.try_emplace(KeyOf(recv), Slot{it->second, static_cast<int>(c.order.size())})
               .second) {
        throw std::invalid_argument("p2p plan: " + a.ToString() + " sent twice");
      }
      c.order.push_back(recv);
    }
  }
  // Every receive must be fed by a send on the channel of its sender.
  std::size_t receives = 0;
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : s.programs[static_cast<std::size_t>(r)]) {
      if (a.kind != ActionKind::kRecvF && a.kind != ActionKind::kRecvB) continue;
      ++receives;
      auto it = plan.slots_.find(KeyOf(a));
      if (it == plan.slots_.end() ||
          plan.channels_[static_cast<std::size_t>(it->second.channel)].receiver != r) {
        throw std::invalid_argument("p2p plan: " + a.ToString() + " on pipeline rank " +
                                    std::to_string(r) + " has no matching send");
      }
    }
  }
  if (receives != plan.slots_.size()) {
    throw std::invalid_argument("p2p plan: " + std::to_string(plan.slots_.size()) + " sends but " +
                                std::to_string(receives) + " receives");
  }
  return plan;
}

P2pPlan::Slot P2pPlan::RecvSlot(const Action& recv) const {
  auto it = slots_.find(KeyOf(recv));
  if (it == slots_.end()) throw std::logic_error("p2p plan: no channel for " + recv.ToString());
  return it->second;
}

P2pPlan::Slot P2pPlan::SendSlot(const Action& send) const { return RecvSlot(MatchingRecv(send)); }

}  // namespace pipetwin::cuda
