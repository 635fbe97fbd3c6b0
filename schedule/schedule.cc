#include "schedule/schedule.h"

#include <algorithm>

namespace pipetwin {

bool Schedule::HasComms() const {
  for (const auto& prog : programs) {
    for (const Action& a : prog) {
      if (IsP2P(a.kind)) return true;
    }
  }
  return false;
}

std::size_t Schedule::NumActions() const {
  std::size_t n = 0;
  for (const auto& prog : programs) n += prog.size();
  return n;
}

std::vector<int> LoopPlacement(int pp, int vpp) {
  std::vector<int> p(static_cast<std::size_t>(pp * vpp));
  for (int s = 0; s < pp * vpp; ++s) p[static_cast<std::size_t>(s)] = s % pp;
  return p;
}

std::vector<int> VPlacement(int pp) {
  std::vector<int> p(static_cast<std::size_t>(2 * pp));
  for (int s = 0; s < 2 * pp; ++s) p[static_cast<std::size_t>(s)] = s < pp ? s : 2 * pp - 1 - s;
  return p;
}

std::vector<int> StagesOfRank(const Schedule& s, int rank) {
  std::vector<int> out;
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.stage_to_rank[static_cast<std::size_t>(st)] == rank) out.push_back(st);
  }
  return out;
}

int PeerRank(const Schedule& s, const Action& a) {
  const int stage = PeerStage(a);
  if (stage < 0 || stage >= s.num_stages) return -1;
  return s.stage_to_rank[static_cast<std::size_t>(stage)];
}

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
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB:
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
      case ActionKind::kWaitReduceGrad:
        break;
    }
  }
  return p;
}

}  // namespace pipetwin
