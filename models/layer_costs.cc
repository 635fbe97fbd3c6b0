#include "models/layer_costs.h"

#include <algorithm>
#include <cmath>

namespace pipetwin::models {
namespace {

using I64 = std::int64_t;

double CeilDiv(double a, int b) { return std::ceil(a / b); }

// Widths (per token) the decoder layer works with.
struct Dims {
  double h, f, kv, a, s;
  double t, r;    // tp, and what sp shards (tp with sp, else 1)
  double act_in;  // width of the activation function's input: f or 2f (SwiGLU)
};

Dims Of(const ModelConfig& m, const Sharding& sh) {
  Dims d{};
  d.h = m.hidden;
  d.f = m.ffn_hidden;
  d.kv = m.kv_dim();
  d.a = m.heads;
  d.s = m.seq_len;
  d.t = sh.tp;
  d.r = sh.sp ? sh.tp : 1;
  d.act_in = m.mlp == Mlp::kSwiglu ? 2 * d.f : d.f;
  return d;
}

}  // namespace

double TokensPerRank(const ModelConfig& m, int micro_batch, const Sharding& sh) {
  return static_cast<double>(micro_batch) * m.seq_len / sh.cp;
}

std::vector<Gemm> DecoderLayerGemms(const ModelConfig& m, int micro_batch, const Sharding& sh) {
  const Dims d = Of(m, sh);
  const double tokens = TokensPerRank(m, micro_batch, sh);
  return {
      {"qkv", tokens, (d.h + 2 * d.kv) / d.t, d.h},  // column parallel
      {"attn_out", tokens, d.h, d.h / d.t},          // row parallel
      {"fc1", tokens, d.act_in / d.t, d.h},          // column parallel (gate + up)
      {"fc2", tokens, d.h, d.f / d.t},               // row parallel
  };
}

LayerFlops DecoderLayerFlops(const ModelConfig& m, int micro_batch, const Sharding& sh) {
  LayerFlops fl;
  for (const Gemm& g : DecoderLayerGemms(m, micro_batch, sh)) fl.gemm += g.flops();
  // QK^T and AV: each 2 * b * (a/tp heads) * (s/cp queries) * s keys * head_dim.
  const double tokens = TokensPerRank(m, micro_batch, sh);
  fl.attention = 4 * tokens * m.seq_len * static_cast<double>(m.hidden) / sh.tp;
  return fl;
}

Gemm OutputGemm(const ModelConfig& m, int micro_batch, const Sharding& sh) {
  return {"logits", TokensPerRank(m, micro_batch, sh), CeilDiv(m.vocab, sh.tp),
          static_cast<double>(m.hidden)};
}

double RecomputeFlops(const ModelConfig& m, int micro_batch, const Sharding& sh, Recompute r) {
  const LayerFlops fl = DecoderLayerFlops(m, micro_batch, sh);
  switch (r) {
    case Recompute::kNone:
      return 0;
    case Recompute::kSelective:
      return fl.attention;
    case Recompute::kFull:
      return fl.F();
  }
  return 0;
}

ActivationInventory DecoderLayerActivations(const ModelConfig& m, const TrainingConfig& t,
                                            const Sharding& sh) {
  const Dims d = Of(m, sh);
  const double e = t.element_bytes();
  const double mask = m.dropout ? 1 : 0;
  const double tokens = TokensPerRank(m, t.micro_batch, sh);

  // TransformerEngine's FP8 recipe keeps each GEMM input for its weight gradient as the FP8
  // cast it ran the forward on (1 byte; transformer_engine/pytorch/module/linear.py and
  // layernorm_linear.py save `inputmat_t` / `ln_out` in FP8). The norm outputs feeding QKV and
  // fc1 and the activation output feeding fc2 are kept in that form only. The attention output
  // stays 16-bit for the attention's own backward (flash attention needs O), so the
  // attention-output GEMM's FP8 copy is kept beside it.
  const bool fp8 = t.precision == Precision::kFp8;
  const double g = fp8 ? 1 : e;  // a GEMM input as saved

  // Everything but the attention scores, per token, in bytes.
  double per_token = 0;
  per_token += e * d.h / d.r;               // norm-1 input
  per_token += g * d.h / d.r;               // QKV GEMM input (norm-1 output)
  per_token += e * (d.h + 2 * d.kv) / d.t;  // Q, K, V
  per_token += e * d.h / d.t;               // attention output (the attention-output GEMM input)
  per_token += (fp8 ? 1 : 0) * d.h / d.t;   // its FP8 copy
  per_token += mask * d.h / d.r;            // attention-output dropout mask
  per_token += e * d.h / d.r;               // norm-2 input
  per_token += g * d.h / d.r;               // fc1 input (norm-2 output)
  per_token += e * d.act_in / d.t;          // activation-function input
  per_token += g * d.f / d.t;               // fc2 input
  per_token += mask * d.h / d.r;            // MLP dropout mask
  // Attention core: unfused keeps the s x s scores per head: softmax output, dropout mask,
  // dropout output (Korthikanti's 5as/h at 16 bit); fused keeps a 4-byte log-sum-exp.
  const double heads = d.a / d.t;
  const double scores_per_token =
      t.flash_attention ? 4 * heads : heads * d.s * (e + (m.dropout ? e + 1 : 0));

  ActivationInventory inv;
  const double full = tokens * (per_token + scores_per_token);
  switch (t.recompute) {
    case Recompute::kNone:
      inv.inflight = full;
      break;
    case Recompute::kSelective:
      inv.inflight = tokens * (per_token + (t.flash_attention ? scores_per_token : 0));
      // The unfused core is rebuilt one layer at a time during I: its scores live for that
      // layer's backward (flash attention rebuilds them in its kernel, in on-chip tiles).
      inv.transient = t.flash_attention ? 0 : tokens * scores_per_token;
      break;
    case Recompute::kFull:
      inv.inflight = tokens * e * d.h / d.r;  // the layer input only
      // One layer rebuilt at a time during I: all of it but the input it is rebuilt from,
      // which the stored checkpoint already holds.
      inv.transient = full - inv.inflight;
      break;
  }
  // W: inputs of the QKV, attention-output, fc1 and fc2 GEMMs and their output gradients
  // (tensors replicated over tp are kept sequence-sharded under sp and gathered again).
  // Under FP8 the inputs are the FP8 casts above.
  double w_per_token = 0;
  w_per_token += g * d.h / d.r + e * (d.h + 2 * d.kv) / d.t;  // QKV input, dQKV
  w_per_token += g * d.h / d.t + e * d.h / d.r;               // attn-out input, d(out)
  w_per_token += g * d.h / d.r + e * d.act_in / d.t;          // fc1 input, d(fc1 out)
  w_per_token += g * d.f / d.t + e * d.h / d.r;               // fc2 input, d(fc2 out)
  inv.pending_w = tokens * w_per_token;
  return inv;
}

ActivationInventory EmbeddingActivations(const ModelConfig& m, const TrainingConfig& t,
                                         const Sharding& sh) {
  const Dims d = Of(m, sh);
  const double tokens = TokensPerRank(m, t.micro_batch, sh);
  ActivationInventory inv;
  inv.inflight = m.dropout ? tokens * d.h / d.r : 0;       // dropout mask
  inv.pending_w = tokens * t.element_bytes() * d.h / d.r;  // output gradient
  return inv;
}

ActivationInventory OutputActivations(const ModelConfig& m, const TrainingConfig& t,
                                      const Sharding& sh) {
  const Dims d = Of(m, sh);
  const double e = t.element_bytes();
  const double tokens = TokensPerRank(m, t.micro_batch, sh);
  const double v = CeilDiv(m.vocab, sh.tp);
  ActivationInventory inv;
  // Final norm input, output GEMM input, logits kept in fp32 for the cross entropy.
  inv.inflight = tokens * (2 * e * d.h / d.r + 4 * v);
  inv.pending_w = tokens * (e * d.h / d.r + e * v);  // output GEMM input, d(logits)
  return inv;
}

std::int64_t DecoderLayerGemmWeightsPerRank(const ModelConfig& m, int tp) {
  const I64 h = m.hidden, f = m.ffn_hidden, kv = m.kv_dim(), t = tp;
  const I64 fc1_out = m.mlp == Mlp::kGelu ? f : 2 * f;
  return h * (h + 2 * kv) / t + h * h / t + h * fc1_out / t + f * h / t;
}

std::int64_t DecoderLayerParamsPerRank(const ModelConfig& m, int tp) {
  const I64 h = m.hidden, f = m.ffn_hidden, kv = m.kv_dim(), t = tp;
  const I64 qkv_out = h + 2 * kv;
  const I64 fc1_out = m.mlp == Mlp::kGelu ? f : 2 * f;
  I64 p = DecoderLayerGemmWeightsPerRank(m, tp);
  if (m.bias) p += qkv_out / t + h + fc1_out / t + h;  // row-parallel biases replicated
  const I64 norm = m.norm == Norm::kLayerNorm ? 2 * h : h;
  return p + 2 * norm;
}

std::int64_t Zero3UnitParams(const ModelConfig& m, const TrainingConfig& t, int tp) {
  if (t.zero3_unit == Zero3Unit::kLayer) return DecoderLayerParamsPerRank(m, tp);
  const I64 h = m.hidden, f = m.ffn_hidden, tpl = tp;
  const I64 fc1_out = m.mlp == Mlp::kGelu ? f : 2 * f;
  return std::max({h * (h + 2 * I64{m.kv_dim()}), h * h, h * fc1_out, f * h}) / tpl;
}

std::int64_t EmbeddingParamsPerRank(const ModelConfig& m, int tp) {
  const I64 h = m.hidden;
  const I64 vocab_rows = (I64{m.vocab} + tp - 1) / tp;
  return vocab_rows * h + (m.position == Position::kLearned ? I64{m.seq_len} * h : 0);
}

std::int64_t OutputParamsPerRank(const ModelConfig& m, int tp, bool separate_stage) {
  const I64 h = m.hidden;
  const I64 norm = m.norm == Norm::kLayerNorm ? 2 * h : h;
  const I64 vocab_rows = (I64{m.vocab} + tp - 1) / tp;
  const bool own_copy = !m.tied_embeddings || separate_stage;
  return norm + (own_copy ? vocab_rows * h : 0);
}

namespace {
// Per token, the two residual adds (read 2, write 1), with the hidden dropout fused in when the
// model has it (Megatron-LM's bias_dropout_add_fused_train, its default in 2021 and since;
// NeMo's bias_dropout_add_fusion): only its 1-byte mask more.
double ResidualAddBytesPerToken(const ModelConfig& m, double e, const Dims& d) {
  return 2 * (3 * e + (m.dropout ? 1 : 0)) * d.h / d.r;
}
}  // namespace

double DecoderLayerElementwiseBytes(const ModelConfig& m, const TrainingConfig& t,
                                    const Sharding& sh) {
  const Dims d = Of(m, sh);
  const double e = t.element_bytes();
  const double tokens = TokensPerRank(m, t.micro_batch, sh);
  double per_token = 0;
  per_token += 2 * (2 * e * d.h / d.r);  // two norms: read, write
  per_token += ResidualAddBytesPerToken(m, e, d);
  per_token += e * (d.act_in + d.f) / d.t;  // activation function: read input, write output
  if (m.position == Position::kRope) per_token += 2 * e * (d.h + d.kv) / d.t;  // rotate Q, K
  return tokens * per_token + AttentionScoresElementwiseBytes(m, t, sh);
}

double DecoderLayerDropoutAddBytes(const ModelConfig& m, const TrainingConfig& t,
                                   const Sharding& sh) {
  if (!m.dropout) return 0;
  const Dims d = Of(m, sh);
  return TokensPerRank(m, t.micro_batch, sh) * ResidualAddBytesPerToken(m, t.element_bytes(), d);
}

double AttentionScoresElementwiseBytes(const ModelConfig& m, const TrainingConfig& t,
                                       const Sharding& sh) {
  if (t.flash_attention) return 0;
  const Dims d = Of(m, sh);
  const double e = t.element_bytes();
  // Unfused softmax over the scores: read, write; dropout: read, write, mask.
  return TokensPerRank(m, t.micro_batch, sh) * d.a / d.t * d.s *
         (2 * e + (m.dropout ? 2 * e + 1 : 0));
}

}  // namespace pipetwin::models
