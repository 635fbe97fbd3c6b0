// inventory.h — the exact bytes a CPU chunk allocates, predicted from the configuration alone,
// so the simulator's CPU memory inventory (in models/) can be checked byte for byte against
// what the Accountant measures.
//
//   ChunkInventory inv = PredictChunkMemory(model, spec, tp);
//   // after F of k microbatches and I of j of them (none W'd yet):
//   //   activations == (k - j) * inv.activations_full + j * inv.activations_pending_w
//
// Per block, in float32 elements, with N = micro_batch * seq_len tokens, R = rows this rank
// holds outside the TP region (N, or N / tp under SP), h = hidden, hl = h / tp,
// al = heads / tp, fl = ffn_hidden / tp, B = micro_batch, S = seq_len:
//   saved by F:   LN1 (xhat R*h, rstd R) + QKV input N*h + attention (qkv 3*N*hl,
//                 probabilities B*al*S*S) + out-proj input N*hl + LN2 (R*h + R) + fc1 input N*h
//                 + GeLU input N*fl + fc2 input N*fl
//   kept for W:   the four linears' inputs and output gradients:
//                 (N*h + 3*N*hl) + (N*hl + N*h) + (N*h + N*fl) + (N*fl + N*h)
// First chunk: F saves the tokens (R int32); I adds the embedding's output gradient (R*h).
// Last chunk: F saves final LN (R*h + R), the output layer's input (R*h) and dlogits (R*vocab);
// W needs the input and dlogits.
// During I the activations rise above their level at the start of I by at most
// activations_i_transient (the output gradient of fc2 is kept before anything is freed).
// Under SP the column-parallel inputs and row-parallel output gradients kept for W are the
// gathered N-row tensors (so W needs no collective); per block W then keeps 4*N*h + 4*N*hl +
// 2*N*fl while F saved only R-row LayerNorm state, so pending-W can exceed full when the
// attention probabilities (B*al*S*S) are small.
// Under TP the embedding and head are replicated (R rows each; R = N without SP).
// Workspace (transient tensors inside one action) and the engine's comm buffers are not
// predicted here.
#pragma once

#include <cstddef>

#include "exec/cpu/config.h"

namespace pipetwin::cpu {

struct ChunkInventory {
  std::size_t params = 0;                   // elements
  std::size_t param_bytes = 0;              // params * 4
  std::size_t grad_bytes = 0;               // same as param_bytes
  std::size_t activations_full = 0;         // bytes saved by F of one microbatch
  std::size_t activations_pending_w = 0;    // bytes one microbatch keeps between its I and W
  std::size_t activations_i_transient = 0;  // peak rise during I above its starting level
};

ChunkInventory PredictChunkMemory(const ModelConfig& model, const ChunkSpec& spec,
                                  const TpConfig& tp);

}  // namespace pipetwin::cpu
