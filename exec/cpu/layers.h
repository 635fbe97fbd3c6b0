// layers.h — the numerical layers of the CPU backend's GPT decoder (float32, Eigen).
//
// Each layer is a small const object holding views of its parameters and their gradients
// (ParamRef, into a chunk's flat buffers) and offers three separate steps, so that zero-bubble
// schedules can split the backward:
//   Forward        computes the output and saves what the backward needs in the layer's
//                  explicit `Saved` struct (counted as MemCategory::kActivations);
//   BackwardInput  (I) computes the input gradient, keeps what W needs — a GEMM's input and
//                  its output gradient — and frees the rest;
//   BackwardWeight (W) accumulates (+=) the weight gradients, so microbatches sum, and frees
//                  the rest of `Saved`.
// A full backward B is I followed by W. Layers without weights have no W. LayerNorm's gamma and
// beta gradients are cheap reductions and are accumulated during I (as the Zero Bubble
// implementation does), so W holds only GEMM operands and the embedding's scatter-add.
//
// Tensors flow by value: a layer that saves its input takes it by value (std::move it in), a
// layer that only reads it takes a const reference. Results are allocated with the input's
// Accountant in MemCategory::kWorkspace.
//
//   Linear fc(w, b);
//   Linear::Saved s;
//   Tensor y = fc.Forward(std::move(x), &s);        // s.x = x
//   Tensor dx = fc.BackwardInput(std::move(dy), &s);  // s.dy = dy
//   fc.BackwardWeight(&s);                           // dW += x^T dy, db += colsum(dy); s empty
#pragma once

#include <cassert>
#include <cstdint>
#include <span>

#include "exec/cpu/memory.h"

namespace pipetwin::cpu {

// A view of one parameter tensor and its gradient.
struct ParamRef {
  float* value = nullptr;
  float* grad = nullptr;
  Index rows = 0;
  Index cols = 0;
  bool empty() const { return value == nullptr; }
  MatMap w() const { return {value, rows, cols}; }
  MatMap g() const { return {grad, rows, cols}; }
};

// y = x W (+ b). x [n, in], W [in, out], b [1, out], y [n, out].
class Linear {
 public:
  struct Saved {
    Tensor x;   // from F
    Tensor dy;  // from I
  };
  struct Options {
    // False for a row-parallel linear: the caller adds the bias after the partial sums are
    // reduced (AddBias), and W sums the bias gradient over rows [bias_row_begin,
    // bias_row_begin + bias_rows) of dy only (this rank's sequence slice; -1 = all rows).
    bool bias_in_forward = true;
    Index bias_row_begin = 0;
    Index bias_rows = -1;
    // W is stored [out, in] and applied as y = x Wᵀ: a tied output layer, whose weight is the
    // [vocab, hidden] token embedding.
    bool transposed_weight = false;
  };
  Linear() = default;
  Linear(ParamRef w, ParamRef b) : w_(w), b_(b) {}
  Linear(ParamRef w, ParamRef b, Options o) : w_(w), b_(b), opt_(o) {}

  Tensor Forward(Tensor x, Saved* s) const;
  void AddBias(Tensor& y) const;
  Tensor BackwardInput(Tensor dy, Saved* s) const;
  void BackwardWeight(Saved* s) const;

 private:
  // op(W) is [in, out]: W itself, or Wᵀ of a weight stored [out, in].
  Index in() const { return opt_.transposed_weight ? w_.cols : w_.rows; }
  Index out() const { return opt_.transposed_weight ? w_.rows : w_.cols; }

  ParamRef w_;
  ParamRef b_;
  Options opt_;
};

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row; with `rms` (model.norm: rmsnorm)
// y = x / sqrt(mean(x²) + eps) * gamma, no beta (Zhang and Sennrich 2019). Gamma (and beta)
// gradients in I. Both keep the same tensors for the backward: x̂ and 1 / sqrt(...) per row.
class LayerNorm {
 public:
  struct Saved {
    Tensor xhat;  // [n, h]
    Tensor rstd;  // [n, 1]
  };
  LayerNorm() = default;
  LayerNorm(ParamRef gamma, ParamRef beta, float eps, bool rms = false)
      : gamma_(gamma), beta_(beta), eps_(eps), rms_(rms) {
    assert(rms_ == beta_.empty());
  }

  Tensor Forward(const Tensor& x, Saved* s) const;
  Tensor BackwardInput(const Tensor& dy, Saved* s) const;
  void BackwardWeight(Saved* /*s*/) const {}

 private:
  ParamRef gamma_;
  ParamRef beta_;
  float eps_ = 1e-5f;
  bool rms_ = false;
};

// Attention dropout (model.dropout): the probabilities P of head `head` (of heads_total, in the
// model's numbering) of batch row b, query position i and key position j (both global, in the
// unsplit sequence of seq_total) are kept, and scaled by about 1 / (1 - p), iff the draw of
// counter ((b · heads_total + head) · seq_total + i) · seq_total + j of the key's stream says so
// (the counter scheme of Dropout below). So every split of the heads (TP, Ulysses' all-to-all) and
// of the sequence (CP) draws the same mask for the same element, and the backward draws it again
// (nothing is saved). Each core's output is dropout(P) V; its normaliser (the row sums, the
// log-sum-exp) is of the undropped P, and the softmax backward's row term
// rowsum(dP ∘ P) = rowsum(dOut ∘ Out) still holds with dP taken through the mask.
class AttentionDropout {
 public:
  AttentionDropout() = default;
  // head_offset: the model's index of this core's first head.
  AttentionDropout(float p, Index heads_total, Index head_offset)
      : p_(p), heads_total_(heads_total), head_offset_(head_offset) {}
  bool active() const { return p_ > 0.0f; }
  // The same dropout for the `of`-th of `parts` equal shares of this core's `heads` heads.
  AttentionDropout Share(Index heads, Index parts, Index of) const {
    AttentionDropout d = *this;
    d.head_offset_ += of * (heads / parts);
    return d;
  }
  // Writes into mask[0, n) the factors (0 or 1 / (1 − p)) of key positions j0 .. j0 + n − 1 of
  // query position i, for this core's head `head` (0-based in the core) of batch row b.
  void Row(std::uint64_t key, Index b, Index head, Index seq_total, Index i, Index j0, Index n,
           float* mask) const;

 private:
  float p_ = 0.0f;
  Index heads_total_ = 0;
  Index head_offset_ = 0;
};

// Grouped-query attention (model.kv_heads below heads; Ainslie et al. 2023): the K/V head that
// query head `head` of `heads` reads when K and V have `kv_heads` heads. A group's query heads
// are consecutive, as in Megatron-Core and Hugging Face's repeat_kv; kv_heads = heads is
// multi-head attention.
inline Index KvHeadOf(Index head, Index heads, Index kv_heads) { return head / (heads / kv_heads); }

// Multi-head causal self-attention core (no weights): qkv [N, (heads + 2 kv) d] laid out as
// [Q heads | K heads | V heads] (kv = heads, or kv_heads under grouped-query attention: query
// head j reads K/V head KvHeadOf(j)), rows sequence-major (row = t * batch + b) → out
// [N, heads * d]. Positions are global (this core sees the whole sequence: cp = 1).
class CausalSelfAttention {
 public:
  struct Saved {
    Tensor qkv;    // [N, (heads + 2 kv) d]
    Tensor probs;  // [batch * heads * seq, seq], softmax with the causal mask (upper part 0)
    std::uint64_t dropout_key = 0;  // from Forward: the backward draws the same masks
  };
  CausalSelfAttention() = default;
  // kv_heads: 0 = heads.
  CausalSelfAttention(Index batch, Index seq, Index heads, Index head_dim,
                      AttentionDropout dropout = {}, Index kv_heads = 0)
      : batch_(batch),
        seq_(seq),
        heads_(heads),
        kv_heads_(kv_heads > 0 ? kv_heads : heads),
        head_dim_(head_dim),
        dropout_(dropout) {}

  // dropout_key: per (step, microbatch, layer); ignored without dropout.
  Tensor Forward(Tensor qkv, Saved* s, std::uint64_t dropout_key = 0) const;
  Tensor BackwardInput(const Tensor& dout, Saved* s) const;  // returns dqkv, frees s
  bool SavesItsInput() const { return true; }                // Saved::qkv is Forward's qkv

 private:
  Index qkv_width() const { return (heads_ + 2 * kv_heads_) * head_dim_; }
  // Offsets in a qkv row of query head hd's K and V.
  Index KOffset(Index hd) const { return (heads_ + KvHeadOf(hd, heads_, kv_heads_)) * head_dim_; }
  Index VOffset(Index hd) const { return KOffset(hd) + kv_heads_ * head_dim_; }

  Index batch_ = 0;
  Index seq_ = 0;
  Index heads_ = 0;
  Index kv_heads_ = 0;
  Index head_dim_ = 0;
  AttentionDropout dropout_;
};

// GeLU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with tanh
// evaluated by Eigen's vectorised rational approximation (no libm call, no errno). Against the
// same formula in double precision: |error| <= 4e-7 * max(1, |x|) for GeLU(x) and 2e-6 *
// max(1, |x|) for its derivative (test: CpuKernels.GeluErrorBound, [-12, 12] in steps of 2^-12
// and far-out values up to ±1e30; measured 1.6e-7 and 7.3e-7 with AVX2 + FMA).
void GeluForward(const float* x, float* y, Index n);
// dx = dy * GeLU'(x).
void GeluBackward(const float* x, const float* dy, float* dx, Index n);

class Gelu {
 public:
  struct Saved {
    Tensor x;
  };
  Tensor Forward(Tensor x, Saved* s) const;
  Tensor BackwardInput(const Tensor& dy, Saved* s) const;
};

// SwiGLU's gate (model.mlp: swiglu; Shazeer 2020, as Megatron-LM's --swiglu): x [n, 2f] holds
// [gate | up] in each row (fc1's two column groups: under TP this rank's f = ffn / tp columns
// of each), y [n, f] = SiLU(gate) ⊙ up, SiLU(g) = g σ(g). Backward: d gate = dy ⊙ up ⊙ σ(g)
// (1 + g (1 − σ(g))), d up = dy ⊙ SiLU(g). Keeps its input x, as Gelu does.
void SwigluForward(const float* x, float* y, Index n, Index f);
void SwigluBackward(const float* x, const float* dy, float* dx, Index n, Index f);

class Swiglu {
 public:
  struct Saved {
    Tensor x;
  };
  Tensor Forward(Tensor x, Saved* s) const;                // [n, 2f] → [n, f]
  Tensor BackwardInput(const Tensor& dy, Saved* s) const;  // [n, f] → [n, 2f]
};

// Rotary position embedding (model.position: rope; Su et al. 2021), in place on the Q and K
// heads of a qkv tensor [N, 3 · heads · d] laid out as CausalSelfAttention's, rows sequence-
// major (row = t · batch + b, t a local position, global position CpGlobalPosition(t)): in each
// head, dimensions i and i + d/2 (i < d/2) turn by the angle pos · 10000^(−2i/d), paired as
// Megatron-Core and GPT-NeoX pair them (rotate_half). V is left alone. Backward turns the
// gradients of Q and K by the opposite angles (the turn is orthogonal). Nothing is saved: the
// angles are computed again from the positions.
class Rotary {
 public:
  Rotary() = default;
  // kv_heads: K's heads (grouped-query attention: the tensor is [N, (heads + 2 kv) d]); 0: heads.
  Rotary(Index batch, Index seq_total, Index heads, Index head_dim, CpConfig cp = {},
         Index kv_heads = 0)
      : batch_(batch),
        seq_(seq_total),
        heads_(heads),
        kv_heads_(kv_heads > 0 ? kv_heads : heads),
        head_dim_(head_dim),
        cp_(cp) {}
  bool active() const { return head_dim_ > 0; }
  void Forward(Tensor& qkv) const { Turn(qkv, 1.0); }
  void Backward(Tensor& dqkv) const { Turn(dqkv, -1.0); }

 private:
  void Turn(Tensor& t, double sign) const;
  Index batch_ = 0;
  Index seq_ = 0;
  Index heads_ = 0;
  Index kv_heads_ = 0;
  Index head_dim_ = 0;
  CpConfig cp_;
};

// Token embedding + learned position embedding (none with rotary positions: `pos` empty), for
// rows [row_begin, row_begin + rows) of the sequence-major microbatch (tokens are [batch, seq],
// b-major). Under context parallelism the
// rows are those of the CP rank's local positions (config.h: CpGlobalPosition).
class Embedding {
 public:
  struct Saved {
    IntTensor tokens;  // [rows, 1]
    Tensor dy;         // [rows, h], from I
  };
  Embedding() = default;
  Embedding(ParamRef tok, ParamRef pos, Index batch, Index seq, Index row_begin, Index rows,
            CpConfig cp = {})
      : tok_(tok),
        pos_(pos),
        batch_(batch),
        seq_(seq),
        row_begin_(row_begin),
        rows_(rows),
        cp_(cp) {}

  Tensor Forward(std::span<const std::int32_t> tokens, Saved* s, Accountant& acc) const;
  void BackwardInput(Tensor dy, Saved* s) const;  // nothing to propagate: keeps dy for W
  void BackwardWeight(Saved* s) const;

 private:
  ParamRef tok_;
  ParamRef pos_;
  Index batch_ = 0;
  Index seq_ = 0;
  Index row_begin_ = 0;
  Index rows_ = 0;
  CpConfig cp_;
};

// Softmax cross-entropy over rows [row_begin, row_begin + rows) of a sequence-major microbatch
// with labels [batch, seq] (rows of the CP rank's local positions, as for Embedding). Forward
// returns the SUM of the rows' losses and saves grad_scale * d(sum)/d(logits) in place of the
// logits.
class SoftmaxCrossEntropy {
 public:
  struct Saved {
    Tensor dlogits;
  };
  SoftmaxCrossEntropy() = default;
  SoftmaxCrossEntropy(Index batch, Index seq, Index row_begin, Index rows, CpConfig cp = {})
      : batch_(batch), seq_(seq), row_begin_(row_begin), rows_(rows), cp_(cp) {}

  double Forward(Tensor logits, std::span<const std::int32_t> labels, float grad_scale,
                 Saved* s) const;
  Tensor BackwardInput(Saved* s) const;  // hands the saved dlogits over (s becomes empty)

 private:
  Index batch_ = 0;
  Index seq_ = 0;
  Index row_begin_ = 0;
  Index rows_ = 0;
  CpConfig cp_;
};

// Inverted dropout with a counter-based mask: element (r, c) of a [rows, cols] tensor whose
// row r is token row row_begin + r of the unsplit sequence is kept (and scaled) iff the draw of
// counter (global row · cols + c) of the key's stream says so: 16 bits of a 64-bit hash of (key,
// counter / 4) against round(p · 65536), kept elements scaled by 65536 / (65536 − that), so p
// is kept to 1/65536 and every element's expectation exactly (layers.cc, MaskStream: one hash
// for four elements). Under context parallelism a
// rank's rows are its local positions (row = t · batch + b): they are mapped to the global ones
// (CpGlobalPosition), so that every split draws the same mask. The backward is the same
// operation with the same key, so no mask is stored.
class Dropout {
 public:
  Dropout() = default;
  explicit Dropout(float p, CpConfig cp = {}, Index seq_len = 0, Index batch = 1)
      : p_(p), cp_(cp), seq_len_(seq_len), batch_(batch) {}
  bool active() const { return p_ > 0.0f; }
  // row_begin: the first row's index among this rank's rows (its local rows under CP).
  void Apply(Tensor& t, std::uint64_t key, Index row_begin) const;

 private:
  float p_ = 0.0f;
  CpConfig cp_;
  Index seq_len_ = 0;
  Index batch_ = 1;
};

// A workspace copy of t.
Tensor Copy(const Tensor& t);

}  // namespace pipetwin::cpu
