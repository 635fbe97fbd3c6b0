// layer_costs.h — what one decoder layer (and the embedding and output layers) costs one
// rank for one microbatch: GEMM shapes, FLOPs of F, I (input gradient) and W (weight
// gradient), parameters held, and the inventory of saved activations, under tensor
// parallelism (tp), Megatron sequence parallelism (sp), context parallelism (cp, ring
// attention) and recompute none | selective | full.
//
//   Sharding sh{.tp = 8, .sp = true, .cp = 1};
//   LayerFlops fl = DecoderLayerFlops(model, /*micro_batch=*/1, sh);   // per rank
//   ActivationInventory a = DecoderLayerActivations(model, training, sh);
//   // GPT-3, 16-bit, tp 8 + sp + selective:  a.inflight == 34 s b h / 8
//
// FLOP conventions (Narayanan et al. 2021): a GEMM [m x k] x [k x n] costs 2mnk; the
// attention core costs 4 b s^2 h forward (QK^T and AV, no causal-mask saving). Backward
// splits into I = dX GEMMs + 2x attention, and W = dW GEMMs; each GEMM's dX and dW cost what
// its forward costs, so F + I + W = 3F.
//
// Activation inventory (Korthikanti et al. 2022, Sec. 4 and Table 2), per layer, elements
// of e bytes (2 for bf16/fp16, 4 for fp32), masks 1 byte, T = b s / cp tokens per rank,
// r = tp with sp, else 1 (what sequence parallelism shards):
//   norm-1 input h/r, QKV input h/r, Q K V (h + 2 kv)/tp, attention-output input h/tp,
//   dropout mask h/r, norm-2 input h/r, fc1 input h/r, activation input f/tp (2f/tp for
//   SwiGLU), fc2 input f/tp, dropout mask h/r; per token (a/tp) s scores x (softmax e +
//   mask 1 + dropout e) when attention is unfused and not recomputed. Flash attention keeps
//   a 4-byte log-sum-exp per head instead. Selective recompute drops the scores; full
//   recompute keeps the layer input e h/r only.
// What a pending W needs (Zero Bubble's M_W): the inputs of the four weight GEMMs and the
// gradients of their outputs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "models/training.h"

namespace pipetwin::models {

struct Sharding {
  int tp = 1;
  bool sp = false;
  int cp = 1;
};

// Y[m x n] = X[m x k] W[k x n], per rank.
struct Gemm {
  std::string_view name;
  double m = 0, n = 0, k = 0;
  double flops() const { return 2 * m * n * k; }
};

// FLOPs of one microbatch on one rank.
struct LayerFlops {
  double gemm = 0;       // forward GEMMs (dX and dW cost the same again, each)
  double attention = 0;  // forward attention core (its backward costs twice this, in I)
  double F() const { return gemm + attention; }
  double I() const { return gemm + 2 * attention; }
  double W() const { return gemm; }
};

// Bytes of saved activations of one microbatch on one rank.
struct ActivationInventory {
  double inflight = 0;   // from F until I (or B) is done, under the recompute setting
  double pending_w = 0;  // from I until W is done
  double transient = 0;  // extra working set while recomputing in I (full; selective unfused)
};

double TokensPerRank(const ModelConfig& m, int micro_batch, const Sharding& sh);  // b s / cp

std::vector<Gemm> DecoderLayerGemms(const ModelConfig& m, int micro_batch, const Sharding& sh);
LayerFlops DecoderLayerFlops(const ModelConfig& m, int micro_batch, const Sharding& sh);
// The output (logit) layer: one GEMM of [T x h] x [h x V/tp].
Gemm OutputGemm(const ModelConfig& m, int micro_batch, const Sharding& sh);
// Extra FLOPs that recompute adds to I, per layer per rank.
double RecomputeFlops(const ModelConfig& m, int micro_batch, const Sharding& sh, Recompute r);

ActivationInventory DecoderLayerActivations(const ModelConfig& m, const TrainingConfig& t,
                                            const Sharding& sh);
// Embedding (first stage): dropout mask; its W needs the output gradient.
ActivationInventory EmbeddingActivations(const ModelConfig& m, const TrainingConfig& t,
                                         const Sharding& sh);
// Final norm, output GEMM input and fp32 logits for the loss (last stage).
ActivationInventory OutputActivations(const ModelConfig& m, const TrainingConfig& t,
                                      const Sharding& sh);

// Parameters one TP rank holds. Column-parallel weights and biases, row-parallel weights
// and the vocabulary-parallel embedding are split over tp; norms, row-parallel biases and
// learned position embeddings are replicated.
std::int64_t DecoderLayerParamsPerRank(const ModelConfig& m, int tp);
// Of those, the weights of the layer's four GEMMs (qkv, attention output, fc1, fc2): what
// TransformerEngine's FP8 recipe casts to FP8 (training.precision: fp8, fp8_params).
std::int64_t DecoderLayerGemmWeightsPerRank(const ModelConfig& m, int tp);
// ZeRO-3's unit on one TP rank (training.zero3_unit): a decoder layer, or its largest weight
// matrix (what the memory must hold of a module-sized gather).
std::int64_t Zero3UnitParams(const ModelConfig& m, const TrainingConfig& t, int tp);
std::int64_t EmbeddingParamsPerRank(const ModelConfig& m, int tp);
// Final norm plus the output layer; with tied embeddings and more than one stage the last
// stage keeps its own copy of the word embedding (Megatron), so `separate_stage` adds it.
std::int64_t OutputParamsPerRank(const ModelConfig& m, int tp, bool separate_stage);

// Of DecoderLayerElementwiseBytes, the unfused attention's passes over the s x s scores
// (softmax: read, write; its dropout: read, write, mask); 0 with flash attention. Selective
// recompute runs them again (Korthikanti et al. 2022, Sec. 5: the core attention is QK^T,
// softmax, softmax dropout and the product with V).
double AttentionScoresElementwiseBytes(const ModelConfig& m, const TrainingConfig& t,
                                       const Sharding& sh);

// Of DecoderLayerElementwiseBytes, the two residual adds with the hidden dropout fused in (read
// the branch and the residual, write the sum and the 1-byte mask); 0 without dropout. They draw
// a random number per element, which DeviceSpec::dropout_add_factor prices.
double DecoderLayerDropoutAddBytes(const ModelConfig& m, const TrainingConfig& t,
                                   const Sharding& sh);

// Memory-bound traffic (bytes of HBM read + write) of a layer's elementwise work in F
// (norms, residual adds with the hidden dropout fused in, activation function, rotary,
// unfused softmax); I moves twice this.
double DecoderLayerElementwiseBytes(const ModelConfig& m, const TrainingConfig& t,
                                    const Sharding& sh);

}  // namespace pipetwin::models
