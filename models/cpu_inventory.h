// cpu_inventory.h — the exact bytes one chunk of the CPU executor (exec/cpu/) allocates, from
// the configuration alone. The CPU backend keeps different tensors from the GPU inventory of
// layer_costs.h (float32 everywhere, LayerNorm keeps x̂ and 1/σ, the attention probabilities
// instead of Korthikanti's 5as²b, no dropout masks, W keeps the gathered inputs and output
// gradients of its GEMMs, embedding and output layer replicated over TP), so the simulator
// uses this inventory when `cluster.device` is `cpu`, and exec/cpu's tests check it against
// the executor's allocation accounting, byte for byte.
//
// Per block, in float32 elements, with N = micro_batch × seq_len / cp tokens (a CP rank's),
// R = rows a rank holds outside the TP region (N, or N / tp under SP), h = hidden, hl = h / tp,
// al = heads / tp, fl = ffn_hidden / tp, B = micro_batch, S = seq_len:
//   saved by F:   LN1 (x̂ R·h, 1/σ R) + QKV input N·h + attention (qkv 3·N·hl, and with cp = 1
//                 the probabilities B·al·S·S; with cp > 1, ring attention, the output N·hl and
//                 the log-sum-exp N·al) + out-proj input N·hl + LN2 (R·h + R) + fc1 input N·h
//                 + GeLU input N·fl + fc2 input N·fl
//   kept for W:   the four linears' inputs and output gradients:
//                 (N·h + 3·N·hl) + (N·hl + N·h) + (N·h + N·fl) + (N·fl + N·h)
// With SwiGLU (model.mlp swiglu) fc1's output is [gate | up], 2·fl wide: the activation's saved
// input is N·2·fl, fc1's output gradient kept for W N·2·fl, and fc1 holds h·2·fl weights (2·fl
// biases). With grouped-query attention (model.kv_heads = kv below heads) the QKV layer's output
// is qw = hl + 2·(kv / tp)·(h / heads) wide (its weights h·qw, biases qw) and so is its output
// gradient kept for W (N·qw for 3·N·hl); every attention core keeps qkv as it is (N·qw; under
// Ulysses the head-sharded rows, A·N × qw / A), each query head reading its group's K/V head.
// First chunk: F saves the tokens (R int32); I adds the embedding's output gradient (R·h).
// Last chunk: F saves the final LN (R·h + R), the output layer's input (R·h) and d(logits)
// (R·vocab); W needs the input and d(logits). During I the activations rise above their level
// at the start of I by `activations_i_transient` at most (the order in which I keeps and
// frees tensors, replayed).
//
// Recompute (exec/cpu/block.h says what each mode runs) changes only what a block saves in F
// and the working set of I; what a microbatch keeps from I to W is the same in every mode:
//   selective: F saves the block as above without the probabilities (B·al·S·S); I re-creates
//              them just before the attention core's backward, which frees them.
//   full:      F saves the block's input only (R·h); I re-runs the block's forward (all of
//              `saved by F` above exists at once, the input still held), then frees the input.
//              The forward's TP collectives run a second time in I.
//
//   CpuChunkMemory m = PredictCpuChunkMemory({.micro_batch = 2, .seq_len = 64, .hidden = 64,
//                                             .ffn_hidden = 256, .heads = 4, .vocab = 128,
//                                             .layers = 2, .first = true, .last = false,
//                                             .recompute = Recompute::kFull});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/cluster.h"
#include "models/model.h"
#include "models/training.h"
#include "schedule/config.h"

namespace pipetwin::models {

struct CpuChunkShape {
  std::int64_t micro_batch = 1, seq_len = 1, hidden = 1, ffn_hidden = 1, heads = 1, vocab = 1;
  std::int64_t layers = 0;  // transformer blocks in the chunk
  bool first = false, last = false;
  std::int64_t tp = 1;
  bool sp = false;
  std::int64_t cp = 1;  // context parallel: ring attention over cp ranks
  // CP ranks of one all-to-all: cp under cp_comm a2a (Ulysses), cp_a2a under a2a+p2p (then a
  // ring over cp / cp_a2a groups), 1 for the ring or all_gather (K/V blocks only).
  std::int64_t cp_a2a = 1;
  Recompute recompute = Recompute::kNone;
  bool tied = false;  // tied embeddings: a first-and-last chunk holds no output layer of its own
  bool bias = true;   // model.bias: the linear layers' biases
  bool rms_norm = false;  // model.norm rmsnorm: each norm holds gamma only (the same saved tensors)
  bool rope = false;      // model.position rope: no position table (nothing saved: turned in place)
  bool swiglu = false;    // model.mlp swiglu: fc1 [h, 2·fl], [gate | up] (fl = ffn / tp)
  std::int64_t kv_heads = 0;  // model.kv_heads (0: heads): QKV [h, hl + 2·(kv/tp)·(h/heads)]
};

struct CpuChunkMemory {
  std::int64_t params = 0;                   // elements on this rank
  std::int64_t param_bytes = 0;              // params × 4
  std::int64_t grad_bytes = 0;               // the same
  std::int64_t activations_full = 0;         // bytes F of one microbatch saves
  std::int64_t activations_pending_w = 0;    // bytes one microbatch keeps between its I and W
  std::int64_t activations_i_transient = 0;  // peak rise during I above its starting level
  std::int64_t boundary_bytes = 0;           // one activation (or its gradient) between chunks
  // Bytes this rank sends in tensor-parallel collectives (ring algorithm: an all-reduce of
  // S bytes sends 2(t−1)/t·S, an all-gather or reduce-scatter (t−1)/t·S of the full tensor):
  std::int64_t tp_bytes_per_microbatch = 0;  // F and I of one microbatch (W needs none)
  std::int64_t tp_bytes_per_iteration = 0;   // under SP: the replicated gradients, once a step
  // Bytes this rank sends in ring attention, F and I of one microbatch: per block (cp − 1)
  // K/V blocks in F, (cp − 1) K/V and (cp − 1) dK/dV blocks in I, each N·2·kw floats (kw =
  // (kv / tp)·d, K and V of the rank's kv heads; hl without grouped-query attention; full or
  // selective recompute: (cp − 1) K/V blocks more in I, the ring's forward again). With
  // cp_a2a = A > 1: (A − 1)/A of N·(2·hl + 2·kw) floats in F (Q K V out, the output back) and
  // again in I (dOut in, dQ dK dV back), recompute adding F's again; the ring, over cp / A
  // ranks, passes (cp / A − 1) blocks of N·2·kw where it passed cp − 1. The saved bytes are the
  // same.
  std::int64_t cp_bytes_per_microbatch = 0;
};

CpuChunkMemory PredictCpuChunkMemory(const CpuChunkShape& c);

// The executor's dropout probability when model.dropout is on (hidden and attention alike):
// Megatron-LM's default (--hidden-dropout, --attention-dropout 0.1).
inline constexpr float kExecutorDropout = 0.1f;

// The decoder the executor runs on every backend (exec/model/): a GeLU or SwiGLU MLP (model.mlp;
// the CUDA backend refuses SwiGLU), multi-head or grouped-query attention (model.kv_heads; the
// CUDA backend refuses the latter), learned or rotary positions
// (model.position), LayerNorm or RMSNorm (model.norm) and biases in the linear layers or not
// (model.bias; the CUDA backend refuses rotary positions, RMSNorm and no biases), its output layer
// tied to the embedding or not (model.tied_embeddings; the CUDA backend refuses tied), and hidden
// and attention dropout when model.dropout says so (on the CPU backend, at kExecutorDropout; its
// masks are drawn again in the backward, never saved; the CUDA backend refuses dropout). Where `m`
// is another model, the first `model:` key that says so and what to write instead: `run` and
// `calibrate` refuse such a job (the step run would not be the one described), and so does
// `cluster.device: cpu`, the executor's own machine, whose inventory above holds this decoder only.
// Nothing when `m` is that decoder.
struct ModelMismatch {
  std::string key;      // "model.tied_embeddings"
  std::string message;  // what the executor runs and what to write
};
std::optional<ModelMismatch> ExecutorModelMismatch(const ModelConfig& m);

// ZeRO-1 on the CPU executor: how one stage's `elements` float32 parameters (and gradients) are
// spread over its `ranks` (dp × cp) ranks. Rank r owns block r, `shard()` elements, of a padded
// buffer of `padded()`; the reduce-scatter leaves the block's summed gradients on r, the
// all-gather after the step brings every block back. A stage holding a copy of the tied
// embedding (`tied` elements from `tied_offset`: the first and the last stage when pp > 1)
// shards the embedding and the rest apart, each padded to a multiple of the ranks, as Megatron-
// LM's distributed optimizer gives the shared embedding a bucket of its own: block r is
// [embedding slice r (tied_shard), rest slice r (rest_shard)], so rank r of the first stage and
// rank r of the last own the same slice, and OPT sums just that. Without a copy (tied 0), block r
// is elements [r·shard, (r+1)·shard).
//
//   Zero1Layout z = MakeZero1Layout(10, 3, 6, 3);  // elements 6, 7, 8 are the embedding
//   z.tied_shard == 1, z.rest_shard == 3, z.padded() == 12
//   z.Runs(): block 0 = {6}, {0, 1, 2}; block 1 = {7}, {3, 4, 5}; block 2 = {8}, {9} + 2 pad
struct Zero1Layout {
  std::int64_t elements = 0, ranks = 1, tied_offset = 0, tied = 0;
  std::int64_t tied_shard = 0, rest_shard = 0;  // ceil(tied / ranks), ceil(rest / ranks)
  std::int64_t shard() const { return tied_shard + rest_shard; }
  std::int64_t padded() const { return shard() * ranks; }
  // Contiguous runs: `length` elements from flat index `flat` sit at `pos` of the padded
  // buffer. Positions no run covers are padding (zero).
  struct Run {
    std::int64_t pos = 0, flat = 0, length = 0;
  };
  std::vector<Run> Runs() const;
};
Zero1Layout MakeZero1Layout(std::int64_t elements, std::int64_t ranks, std::int64_t tied_offset = 0,
                            std::int64_t tied = 0);

// Tied embeddings over a pipeline (pp > 1): the last stage keeps a copy of the embedding as its
// output layer, and the executor sums the two copies' gradients once the data-parallel
// reduction is done (at OPT, Megatron-LM's embedding group; under ZeRO-1 each rank's slice of
// them, Zero1Layout). Parameter servers (they step before the sum) are refused, by `run` and by
// cluster.device cpu alike: the key and why. Nothing for pp 1 or untied.
std::optional<ModelMismatch> ExecutorTiedMismatch(const ModelConfig& m, const ParallelConfig& par,
                                                  const ClusterConfig& cluster);

// What the CPU executor runs of `training:`: float32 throughout (master weights too), its
// gradients reduced in float32, its TP collectives in series with the GEMMs, ZeRO-1's parameter
// all-gather inside OPT. Where `t` asks for another, the first key that does and what to write:
// `run` and `calibrate` on the CPU backend refuse such a job, and so does cluster.device cpu.
std::optional<ModelMismatch> CpuExecutorTrainingMismatch(const TrainingConfig& t);

}  // namespace pipetwin::models
