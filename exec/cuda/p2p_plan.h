// p2p_plan.h — the NCCL point-to-point channels of a schedule (plain C++, no CUDA).
//
// NCCL matches sends and receives by order, not by tag, and runs the operations of one
// communicator in the order they were issued. So the CUDA backend gives every (sender pipeline
// rank, receiver pipeline rank, F or B) its own two-rank communicator — a "channel" — on which
// one side only sends and the other only receives, and the receiver posts its receives in the
// order the sender sends them (known from the sender's program), whatever order its own
// engine asks for them. Every rank computes the same plan from the schedule, so the channels
// are created in the same order everywhere.
//
//   P2pPlan plan = P2pPlan::Build(schedule);
//   for (const Channel& c : plan.channels()) ... ncclCommSplit in this order ...
//   const P2pPlan::Slot& s = plan.RecvSlot(Action{2, ActionKind::kRecvF, 5});
//   // s.channel, s.position: post every receive of the channel up to this position
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "schedule/schedule.h"

namespace pipetwin::cuda {

struct Channel {
  int sender = 0;  // pipeline ranks
  int receiver = 0;
  bool forward = true;  // activations (SEND_F/RECV_F) or gradients (SEND_B/RECV_B)
  // The receiver's actions (RECV_F/RECV_B with the receiving stage) in the sender's order.
  std::vector<Action> order;
};

class P2pPlan {
 public:
  struct Slot {
    int channel = -1;
    int position = -1;
  };
  // Fails (std::invalid_argument) when a send has no receive or the reverse.
  static P2pPlan Build(const Schedule& s);
  const std::vector<Channel>& channels() const { return channels_; }
  // Where a receive (RECV_F/RECV_B) or a send (SEND_F/SEND_B, as the receive it feeds) sits.
  Slot RecvSlot(const Action& recv) const;
  Slot SendSlot(const Action& send) const;
  // The receive action a send feeds: SEND_F(s, mb) → RECV_F(s + 1, mb); SEND_B → RECV_B(s - 1).
  static Action MatchingRecv(const Action& send);

 private:
  using Key = std::tuple<int, int, int>;  // (kind, stage, microbatch) of the receive
  static Key KeyOf(const Action& recv);
  std::vector<Channel> channels_;
  std::map<Key, Slot> slots_;
};

}  // namespace pipetwin::cuda
