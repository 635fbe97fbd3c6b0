#include "exec/cpu/block.h"

#include <cassert>

#include "exec/cpu/model.h"

namespace pipetwin::cpu {

Tensor ReduceFromTpRegion(Tensor partial, const TpContext& tp) {
  if (tp.cfg.size == 1) return partial;
  assert(tp.comm != nullptr && tp.comm->size() == tp.cfg.size);
  if (!tp.cfg.sequence_parallel) {
    tp.comm->AllReduceSum(partial.span());
    return partial;
  }
  Tensor local(*partial.accountant(), MemCategory::kWorkspace, partial.rows() / tp.cfg.size,
               partial.cols());
  tp.comm->ReduceScatterSum(partial.span(), local.span());
  return local;
}

Tensor GatherToTpRegion(Tensor local, const TpContext& tp) {
  if (tp.cfg.size == 1 || !tp.cfg.sequence_parallel) return local;
  assert(tp.comm != nullptr && tp.comm->size() == tp.cfg.size);
  Tensor full(*local.accountant(), MemCategory::kWorkspace, local.rows() * tp.cfg.size,
              local.cols());
  tp.comm->AllGather(local.span(), full.span());
  return full;
}

TransformerBlock::TransformerBlock(const BlockParams& p, const ModelConfig& model,
                                   const TpContext& tp, int layer, Recompute recompute,
                                   const CpContext& cp)
    : tp_(tp),
      dropout_(model.dropout, cp.cfg, model.seq_len, model.micro_batch),
      layer_(layer),
      recompute_(recompute) {
  const LocalDims d = MakeLocalDims(model, tp.cfg, cp.cfg);
  // This TP rank's heads are the model's heads [rank · heads / tp, (rank + 1) · heads / tp).
  const AttentionDropout attention_dropout(model.dropout, model.heads, tp.cfg.rank * d.heads_local);
  ln1_ = LayerNorm(p.ln1_g, p.ln1_b, model.layernorm_eps, model.rms_norm);
  ln2_ = LayerNorm(p.ln2_g, p.ln2_b, model.layernorm_eps, model.rms_norm);
  qkv_ = Linear(p.qkv_w, p.qkv_b);
  fc1_ = Linear(p.fc1_w, p.fc1_b);
  // Row-parallel: bias after the reduction; its gradient from this rank's rows of dy (all rows
  // without SP, where every rank then holds the same full gradient).
  Linear::Options row_parallel;
  row_parallel.bias_in_forward = false;
  row_parallel.bias_row_begin = d.row_begin;
  row_parallel.bias_rows = d.rows;
  proj_ = Linear(p.proj_w, p.proj_b, row_parallel);
  fc2_ = Linear(p.fc2_w, p.fc2_b, row_parallel);
  // Blocked (flash-style) attention keeps out and log-sum-exp instead of the probabilities;
  // selective recompute at cp = 1 recomputes CausalSelfAttention's probabilities, at cp > 1
  // the ring's forward (out and log-sum-exp, its K/V exchanges again).
  ring_attention_ = cp.cfg.size > 1 || recompute != Recompute::kSelective;
  // Grouped-query attention: every core (the ring, the all-gather, Ulysses' all-to-all, the
  // blocked core at cp 1 and CausalSelfAttention) reads each K/V head for its group of query
  // heads, and the exchanges pass K and V of the kv heads only.
  if (ring_attention_) {
    ring_ = RingAttention(d.batch, d.seq_local, d.heads_local, d.head_dim, cp, attention_dropout,
                          d.kv_heads_local);
  } else {
    attn_ = CausalSelfAttention(d.batch, d.seq, d.heads_local, d.head_dim, attention_dropout,
                                d.kv_heads_local);
  }
  if (model.rope) {
    rotary_ = Rotary(d.batch, d.seq, d.heads_local, d.head_dim, cp.cfg, d.kv_heads_local);
  }
  row_begin_ = d.row_begin;
  use_swiglu_ = model.swiglu;
}

namespace {
// An attention core's forward that keeps only its input (qkv) in *kept: the rest of what it
// saves (the probabilities, or the ring's output and log-sum-exp) stays workspace and is freed
// on return, to be recomputed in I.
template <class Core>
Tensor ForwardKeepingInput(const Core& core, Tensor qkv, std::uint64_t dropout_key, Tensor* kept) {
  typename Core::Saved saved;
  Tensor out;
  // A core that does not save its input as it is (Ulysses keeps the head-sharded qkv) gets a
  // copy, kept instead.
  Tensor input = core.SavesItsInput() ? Tensor() : Copy(qkv);
  {
    const DiscardSaved scope;
    out = core.Forward(std::move(qkv), &saved, dropout_key);
  }
  *kept = Keep(input.empty() ? std::move(saved.qkv) : std::move(input));
  return out;
}

// Dropout keys of a block's two branches (0: attention, 1: MLP, before the residual adds).
std::uint64_t BranchKey(std::uint64_t key, int layer, int branch) {
  return Mix64(key ^
               Mix64(static_cast<std::uint64_t>(layer) * 2 + static_cast<std::uint64_t>(branch)));
}
// The key of the block's attention probabilities (AttentionDropout).
std::uint64_t AttentionKey(std::uint64_t key, int layer) {
  return Mix64(BranchKey(key, layer, 0) ^ 0x6a09e667f3bcc909ULL);
}
}  // namespace

Tensor TransformerBlock::Forward(Tensor x, Saved* s, std::uint64_t dropout_key) const {
  s->dropout_key = dropout_key;
  switch (recompute_) {
    case Recompute::kNone:
      return ForwardSaving(x, dropout_key, s, /*keep_core=*/true);
    case Recompute::kSelective:
      return ForwardSaving(x, dropout_key, s, /*keep_core=*/false);
    case Recompute::kFull: {
      Tensor y;
      {
        Saved discarded;
        const DiscardSaved scope;
        y = ForwardSaving(x, dropout_key, &discarded, /*keep_core=*/true);
      }
      s->input = Keep(std::move(x));
      return y;
    }
  }
  return {};
}

Tensor TransformerBlock::ForwardSaving(const Tensor& x, std::uint64_t dropout_key, Saved* s,
                                       bool keep_core) const {
  // Attention half.
  const std::uint64_t core_key = AttentionKey(dropout_key, layer_);
  Tensor a = ln1_.Forward(x, &s->ln1);
  a = GatherToTpRegion(std::move(a), tp_);
  a = qkv_.Forward(std::move(a), &s->qkv);
  if (rotary_.active()) rotary_.Forward(a);
  if (keep_core) {
    a = ring_attention_ ? ring_.Forward(std::move(a), &s->ring, core_key)
                        : attn_.Forward(std::move(a), &s->attn, core_key);
  } else {  // kSelective: of the core, only its input is kept
    a = ring_attention_ ? ForwardKeepingInput(ring_, std::move(a), core_key, &s->attn_qkv)
                        : ForwardKeepingInput(attn_, std::move(a), core_key, &s->attn_qkv);
  }
  a = proj_.Forward(std::move(a), &s->proj);
  Tensor x1 = ReduceFromTpRegion(std::move(a), tp_);
  proj_.AddBias(x1);
  dropout_.Apply(x1, BranchKey(dropout_key, layer_, 0), row_begin_);
  x1.mat() += x.mat();
  // MLP half.
  Tensor m = ln2_.Forward(x1, &s->ln2);
  m = GatherToTpRegion(std::move(m), tp_);
  m = fc1_.Forward(std::move(m), &s->fc1);
  m = use_swiglu_ ? swiglu_.Forward(std::move(m), &s->swiglu)
                  : gelu_.Forward(std::move(m), &s->gelu);
  m = fc2_.Forward(std::move(m), &s->fc2);
  Tensor y = ReduceFromTpRegion(std::move(m), tp_);
  fc2_.AddBias(y);
  dropout_.Apply(y, BranchKey(dropout_key, layer_, 1), row_begin_);
  y.mat() += x1.mat();
  return y;
}

Tensor TransformerBlock::BackwardInput(const Tensor& dy, Saved* s) const {
  if (recompute_ == Recompute::kFull) {
    // The forward again from the kept input, saving everything; its output is not needed.
    const Tensor x = std::move(s->input);
    (void)ForwardSaving(x, s->dropout_key, s, /*keep_core=*/true);
  }  // x freed here
  // MLP half: dy reaches fc2's output (kept for W) and, through the residual, x1.
  Tensor g = Copy(dy);
  dropout_.Apply(g, BranchKey(s->dropout_key, layer_, 1), row_begin_);
  g = GatherToTpRegion(std::move(g), tp_);
  g = fc2_.BackwardInput(std::move(g), &s->fc2);
  g = use_swiglu_ ? swiglu_.BackwardInput(g, &s->swiglu) : gelu_.BackwardInput(g, &s->gelu);
  g = fc1_.BackwardInput(std::move(g), &s->fc1);
  g = ReduceFromTpRegion(std::move(g), tp_);
  Tensor dx1 = ln2_.BackwardInput(g, &s->ln2);
  dx1.mat() += dy.mat();
  // Attention half.
  Tensor a = Copy(dx1);
  dropout_.Apply(a, BranchKey(s->dropout_key, layer_, 0), row_begin_);
  a = GatherToTpRegion(std::move(a), tp_);
  a = proj_.BackwardInput(std::move(a), &s->proj);
  if (recompute_ == Recompute::kSelective) {
    // The attention core's forward again from its kept input (s->attn becomes qkv + probs;
    // s->ring qkv, out and log-sum-exp, the K/V blocks passed around the ring again).
    const std::uint64_t core_key = AttentionKey(s->dropout_key, layer_);
    (void)(ring_attention_ ? ring_.Forward(std::move(s->attn_qkv), &s->ring, core_key)
                           : attn_.Forward(std::move(s->attn_qkv), &s->attn, core_key));
  }
  a = ring_attention_ ? ring_.BackwardInput(a, &s->ring) : attn_.BackwardInput(a, &s->attn);
  if (rotary_.active()) rotary_.Backward(a);
  a = qkv_.BackwardInput(std::move(a), &s->qkv);
  a = ReduceFromTpRegion(std::move(a), tp_);
  Tensor dx = ln1_.BackwardInput(a, &s->ln1);
  dx.mat() += dx1.mat();
  return dx;
}

void TransformerBlock::BackwardWeight(Saved* s) const {
  fc2_.BackwardWeight(&s->fc2);
  fc1_.BackwardWeight(&s->fc1);
  proj_.BackwardWeight(&s->proj);
  qkv_.BackwardWeight(&s->qkv);
  ln2_.BackwardWeight(&s->ln2);
  ln1_.BackwardWeight(&s->ln1);
}

}  // namespace pipetwin::cpu
