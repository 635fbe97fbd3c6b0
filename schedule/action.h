// action.h — the instruction vocabulary of a pipeline program.
//
// An Action is one step of one rank's program: `<stage><KIND><microbatch>` in PyTorch's
// torch.distributed.pipelining syntax, e.g. "2F0" (forward of stage 2 on microbatch 0),
// "1B3" (full backward), "0I1" (input-gradient backward), "0W1" (weight-gradient backward),
// "3SEND_F1", "1RECV_B0", "3WAIT_SEND_F1". Actions without a microbatch name a whole stage
// (model chunk): "2REDUCE_GRAD" (data-parallel gradient reduction of stage 2), "2OPT" (its
// optimizer step), "2UNSHARD", "2RESHARD", "2WAIT_REDUCE_GRAD".
//
//   Expected<Action> a = Action::Parse("3SEND_F1");
//   assert(a->ToString() == "3SEND_F1");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schedule/expected.h"

namespace pipetwin {

enum class ActionKind : std::uint8_t {
  kForward,         // F
  kBackward,        // B  (input and weight gradient together: B = I + W)
  kBackwardInput,   // I
  kBackwardWeight,  // W
  kSendF,           // SEND_F: activation to the next stage
  kRecvF,           // RECV_F: activation from the previous stage
  kSendB,           // SEND_B: input gradient to the previous stage
  kRecvB,           // RECV_B: gradient from the next stage
  kReduceGrad,      // REDUCE_GRAD: data-parallel gradient reduction of one stage
  kOptimizer,       // OPT: optimizer step of one stage
  // Kinds torch 2.15's _PipelineScheduleRuntime writes (and pipetwin reads with its meaning):
  kWaitSendF,       // WAIT_SEND_F: wait until SEND_F's buffer may be reused (its transfer done)
  kWaitSendB,       // WAIT_SEND_B: the same for SEND_B
  kUnshard,         // UNSHARD: FSDP all-gather of a stage's parameters (whole stage)
  kReshard,         // RESHARD: FSDP free of the gathered parameters (whole stage)
  kWaitReduceGrad,  // WAIT_REDUCE_GRAD: wait until the stage's REDUCE_GRAD is done
};
inline constexpr int kNumActionKinds = 15;

// The text of a kind as it appears in an action: "F", "SEND_F", "REDUCE_GRAD", ...
std::string_view KindName(ActionKind kind);

// True for F, B, I, W and OPT: work on a rank's compute stream.
constexpr bool IsCompute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward ||
         k == ActionKind::kBackwardInput || k == ActionKind::kBackwardWeight ||
         k == ActionKind::kOptimizer;
}
// True for the pipeline point-to-point kinds.
constexpr bool IsP2P(ActionKind k) {
  return k == ActionKind::kSendF || k == ActionKind::kRecvF || k == ActionKind::kSendB ||
         k == ActionKind::kRecvB;
}
// True for WAIT_SEND_F and WAIT_SEND_B.
constexpr bool IsWaitSend(ActionKind k) {
  return k == ActionKind::kWaitSendF || k == ActionKind::kWaitSendB;
}
// True where the action names a microbatch (all but the whole-stage kinds REDUCE_GRAD, OPT,
// UNSHARD, RESHARD and WAIT_REDUCE_GRAD).
constexpr bool HasMicrobatch(ActionKind k) {
  return k != ActionKind::kReduceGrad && k != ActionKind::kOptimizer && k != ActionKind::kUnshard &&
         k != ActionKind::kReshard && k != ActionKind::kWaitReduceGrad;
}

struct Action {
  std::int32_t stage = 0;
  ActionKind kind = ActionKind::kForward;
  std::int32_t microbatch = -1;  // -1 where the kind has none

  std::string ToString() const;
  // Parses "<stage><KIND>[<microbatch>]"; the error says what was wrong and what is allowed.
  static Expected<Action> Parse(std::string_view text);

  friend bool operator==(const Action&, const Action&) = default;
};

// The one peer-stage rule of the pipeline: a SEND_F of stage s goes to stage s + 1 (its
// RECV_F), a SEND_B of stage s to stage s − 1 (its RECV_B); a RECV_F of s comes from s − 1,
// a RECV_B of s from s + 1. -1 for every other kind.
constexpr std::int32_t PeerStage(const Action& a) {
  switch (a.kind) {
    case ActionKind::kSendF:
    case ActionKind::kRecvB:
      return a.stage + 1;
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
      return a.stage - 1;
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kReduceGrad:
    case ActionKind::kOptimizer:
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kWaitReduceGrad:
      break;
  }
  return -1;
}
// The other end of a point-to-point action: the RECV that a SEND pairs with, or the SEND that
// a RECV waits for (same microbatch, stage PeerStage(a)). Only for IsP2P kinds.
constexpr Action MatchingP2P(const Action& a) {
  ActionKind k = a.kind;
  switch (a.kind) {
    case ActionKind::kSendF:
      k = ActionKind::kRecvF;
      break;
    case ActionKind::kRecvF:
      k = ActionKind::kSendF;
      break;
    case ActionKind::kSendB:
      k = ActionKind::kRecvB;
      break;
    case ActionKind::kRecvB:
      k = ActionKind::kSendB;
      break;
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kReduceGrad:
    case ActionKind::kOptimizer:
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kWaitReduceGrad:
      break;
  }
  return Action{PeerStage(a), k, a.microbatch};
}

}  // namespace pipetwin
