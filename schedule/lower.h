// lower.h — passes that turn a compute-only schedule into the full per-rank programs.
//
// Generators emit F, B, I, W only; communication is derived here, so a send can never lack
// its receive:
//   - AddSendRecv: SEND_F after each F whose next stage lives on another rank, RECV_F just
//     before each F whose previous stage does; SEND_B after each I (or B) whose previous
//     stage lives on another rank, RECV_B before each I (or B) whose next stage does. Two
//     chunks on the same rank exchange nothing. Then OrderReceivesAsSent.
//   - OrderReceivesAsSent: on every (sender, receiver) rank pair the receives come in the
//     order of the sends. Runtimes that match point-to-point messages without tags (torch's
//     gloo and NCCL batch_isend_irecv) pair the k-th receive with the k-th send, so a V
//     schedule (rank r sends both stage r's activations and stage 2p − 1 − r's gradients to
//     rank r + 1) would otherwise swap same-shaped tensors silently. A receive that would come
//     too late moves up to just before the receive of a message sent after it, so it still
//     precedes its compute and waits no longer (links deliver in send order).
//   - AddReduceGrad: a data-parallel REDUCE_GRAD after the last W (or B) of each stage.
//   - AddOptimizer: one OPT per stage at the end of each rank's program.
//
//   Schedule full = Lower(compute_only, {.reduce_grad = dp > 1, .optimizer = true});
#pragma once

#include <optional>
#include <vector>

#include "schedule/schedule.h"

namespace pipetwin {

Schedule AddSendRecv(const Schedule& s);
// In place; a program whose receives have no matching send is left as it is (validation
// reports it).
void OrderReceivesAsSent(Schedule& s);
Schedule AddReduceGrad(const Schedule& s);
Schedule AddOptimizer(const Schedule& s);

struct LoweringOptions {
  bool reduce_grad = false;  // dp > 1
  bool optimizer = true;
};
// Applies the passes that the schedule does not already reflect (a compute_comms CSV keeps
// its own sends and receives).
Schedule Lower(const Schedule& s, const LoweringOptions& opts);

// Only the F, B, I, W actions: the inverse of Lower.
Schedule ComputeOnly(const Schedule& s);

// A lowered schedule as torch 2.15's _PipelineScheduleRuntime runs it (its compute_comms
// format): OPT dropped (torch steps the optimizer outside the schedule); a REDUCE_GRAD after
// the last gradient of every stage, also at dp 1 (torch scales gradients by 1/m there), each
// followed by its WAIT_REDUCE_GRAD (torch allows one pending reduction per rank); one
// WAIT_SEND per send, where torch's own lowering puts it: a SEND_F's wait right after the
// local backward of the same stage and microbatch (the peer has then consumed the
// activation), every other send's wait at the end of the program, in send order.
Schedule ForTorchRuntime(const Schedule& lowered);

// Compute-only programs laid out in unit steps, as torch's PipelineScheduleMulti matches
// sends and receives (at the step the producer runs): each action at the first step after
// the cross-rank action it needs and after the rank's previous action; nullopt is an idle
// step. One row per rank.
std::vector<std::vector<std::optional<Action>>> StepAligned(const Schedule& compute_only);

}  // namespace pipetwin
