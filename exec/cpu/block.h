// block.h — one pre-LayerNorm GPT transformer block, Megatron tensor/sequence parallel.
//
//   x ─► LN1 ─► [f] ─► QKV (column-parallel) ─► causal attention (local heads; dropout on
//        its probabilities, layers.h AttentionDropout; model.position rope: Q and K turned;
//        model.kv_heads < heads: each core reads a K/V head for its group of query heads,
//        layers.h KvHeadOf, and the CP exchanges pass K and V of the kv heads only)
//        ─► out-proj (row-parallel) ─► [g] ─► + bias ─► dropout ─► + x ═► x1
//   x1 ─► LN2 ─► [f] ─► fc1 (column-parallel) ─► GeLU ─► fc2 (row-parallel) ─► [g] ─► + bias
//        ─► dropout ─► + x1 ═► y
// (model.mlp swiglu: fc1 gives [gate | up], twice as wide, and SwiGLU takes GeLU's place.)
//
// [f] and [g] are Megatron's conjugate region operators over the TP group:
//   without SP: f = identity forward / all-reduce backward; g = all-reduce forward / identity
//               backward; LayerNorms and residuals see all N rows on every rank.
//   with SP:    f = all-gather (along the sequence) forward / reduce-scatter backward; g =
//               reduce-scatter forward / all-gather backward; LayerNorms and residuals see
//               this rank's N / tp rows.
// All collectives happen in Forward and BackwardInput; BackwardWeight never communicates (the
// column-parallel linears keep the gathered input, the row-parallel ones the gathered output
// gradient).
//
// Activation recomputation (the block's Recompute, Korthikanti et al. 2022). The recomputed
// part is re-run by the same Forward code from its saved input, so whatever that forward does
// (e.g. another attention core) is recomputed exactly; the dropout masks are counter-based on
// the saved key, so nothing random is redrawn.
//   kNone       F saves every tensor the backward needs (Saved below).
//   kSelective  F keeps everything but the attention core's state: of it, only its input qkv
//               [N, 3·hl] (Saved::attn_qkv), not the B·al·S·S probabilities. I re-runs the core's
//               Forward from qkv just before the core's backward (the probabilities exist from
//               there until the core's backward frees them, inside I).
//   kFull       F keeps only the block's input x [R, h] (Saved::input); it runs the forward with
//               its saved tensors discarded (DiscardSaved: they stay workspace, freed with the
//               forward). I first re-runs Forward from x, saving as kNone does (the TP
//               collectives of the forward run again), frees x, then runs the backward.
// Split backward (I then W, zero-bubble schedules): in both modes the recomputed tensors are
// consumed inside I, and what W needs is what it needs without recompute — each linear's input
// (from the recomputed forward under kFull) and output gradient, kept from I until W. So the
// memory a microbatch holds between its I and W is the same in all three modes; only what it
// holds between F and I, and the working set inside I, differ (models/cpu_inventory.h).
//
// Under context parallelism (cp > 1) the attention core is ring attention over the CP group
// (ring_attention.h) on this rank's two chunks of the sequence; everything else is per token.
// kFull re-runs it (and its ring exchanges) unchanged. kSelective keeps the ring's input qkv
// only, not its output [N, hl] and log-sum-exp [N, heads]; I re-runs the ring's forward, its
// K/V blocks passed around the CP group again, just before the ring's backward (4 (cp − 1) K/V
// or dK/dV blocks a layer and microbatch instead of 3, as under kFull).
//
//   TransformerBlock block(params, model, tp, layer, Recompute::kFull, cp);  // cp: {} = no CP
//   TransformerBlock::Saved s;
//   Tensor y = block.Forward(std::move(x), &s);   // takes x over (kFull keeps it)
//   Tensor dx = block.BackwardInput(dy, &s);      // recomputes first
//   block.BackwardWeight(&s);
#pragma once

#include <cstdint>

#include "exec/cpu/collectives.h"
#include "exec/cpu/layers.h"
#include "exec/cpu/model.h"
#include "exec/cpu/ring_attention.h"

namespace pipetwin::cpu {

// The TP group as the layers see it; comm may be null when cfg.size == 1.
struct TpContext {
  TpConfig cfg;
  Collectives* comm = nullptr;
};

// Megatron's f (backward) / g (forward) reduction: partial sums [N, c] → all-reduced [N, c]
// without SP, reduce-scattered [N / tp, c] with SP; unchanged when tp == 1.
Tensor ReduceFromTpRegion(Tensor partial, const TpContext& tp);
// Megatron's f (forward) / g (backward) entry: [rows, c] → [N, c] (all-gather under SP;
// unchanged otherwise).
Tensor GatherToTpRegion(Tensor local, const TpContext& tp);

struct BlockParams {
  ParamRef ln1_g, ln1_b;
  // column-parallel, [h, 3h/tp] as [Q | K | V] of this rank's heads ([h, (h + 2 kv d)/tp] under
  // grouped-query attention: kv heads of width d for K and for V)
  ParamRef qkv_w, qkv_b;
  ParamRef proj_w, proj_b;  // row-parallel [h/tp, h]; bias replicated
  ParamRef ln2_g, ln2_b;
  ParamRef fc1_w, fc1_b;  // column-parallel [h, ffn/tp] (SwiGLU: [h, 2·ffn/tp], gate | up)
  ParamRef fc2_w, fc2_b;  // row-parallel [ffn/tp, h]; bias replicated
};

class TransformerBlock {
 public:
  struct Saved {
    LayerNorm::Saved ln1;
    Linear::Saved qkv;
    CausalSelfAttention::Saved attn;
    RingAttention::Saved ring;  // cp > 1 instead of attn
    Linear::Saved proj;
    LayerNorm::Saved ln2;
    Linear::Saved fc1;
    Gelu::Saved gelu;
    Swiglu::Saved swiglu;  // model.mlp swiglu instead of gelu
    Linear::Saved fc2;
    Tensor input;                   // kFull: the block's input, from F until I recomputes
    Tensor attn_qkv;                // kSelective: the attention core's input, from F until I
    std::uint64_t dropout_key = 0;  // from Forward, reused by BackwardInput
  };

  // layer: the global layer index (keys the dropout masks).
  TransformerBlock(const BlockParams& p, const ModelConfig& model, const TpContext& tp,
                   int layer = 0, Recompute recompute = Recompute::kNone, const CpContext& cp = {});

  // dropout_key: per (step, microbatch); ignored when model.dropout == 0.
  Tensor Forward(Tensor x, Saved* s,
                 std::uint64_t dropout_key = 0) const;     // [rows, h] → [rows, h]
  Tensor BackwardInput(const Tensor& dy, Saved* s) const;  // [rows, h] → [rows, h]
  void BackwardWeight(Saved* s) const;
  Recompute recompute() const { return recompute_; }

 private:
  // The forward itself, saving what the backward needs (all of it when `keep_core`, else the
  // attention core's input only, in s->attn_qkv).
  Tensor ForwardSaving(const Tensor& x, std::uint64_t dropout_key, Saved* s, bool keep_core) const;

  TpContext tp_;
  LayerNorm ln1_, ln2_;
  Linear qkv_, proj_, fc1_, fc2_;
  CausalSelfAttention attn_;
  RingAttention ring_;
  bool ring_attention_ = false;  // blocked attention: cp > 1, or recompute none or full
  Gelu gelu_;
  Swiglu swiglu_;
  bool use_swiglu_ = false;
  Dropout dropout_;
  Rotary rotary_;  // model.position rope: Q and K turned after the QKV layer (inactive: learned)
  int layer_ = 0;
  Index row_begin_ = 0;
  Recompute recompute_ = Recompute::kNone;
};

}  // namespace pipetwin::cpu
