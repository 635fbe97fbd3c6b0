#include "exec/cpu/layers.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/cpu/gemm.h"
#include "exec/cpu/model.h"

namespace pipetwin::cpu {

namespace {

using RowVecMap = Eigen::Map<Eigen::RowVectorXf>;

// Query rows per block of the causal attention (the GEMMs skip blocks above the diagonal).
constexpr Index kAttnBlock = 64;

Tensor NewLike(const Tensor& like, Index rows, Index cols) {
  assert(like.accountant() != nullptr);
  return Tensor(*like.accountant(), MemCategory::kWorkspace, rows, cols);
}
// For results the caller writes whole before reading (GEMM outputs with beta 0, elementwise
// and row-wise results).
Tensor NewOutputLike(const Tensor& like, Index rows, Index cols) {
  assert(like.accountant() != nullptr);
  return Tensor(*like.accountant(), MemCategory::kWorkspace, rows, cols, Uninitialized{});
}

}  // namespace

Tensor Copy(const Tensor& t) {
  Tensor c = NewOutputLike(t, t.rows(), t.cols());
  c.mat() = t.mat();
  return c;
}

// ---------------------------------------------------------------------------------------------
// Linear

Tensor Linear::Forward(Tensor x, Saved* s) const {
  const bool t = opt_.transposed_weight;
  assert(x.cols() == in());
  Tensor y = NewOutputLike(x, x.rows(), out());
  Gemm(Trans::kNo, t ? Trans::kYes : Trans::kNo, x.rows(), out(), in(), 1.0f, x.data(), x.cols(),
       w_.value, w_.cols, 0.0f, y.data(), y.cols());
  if (opt_.bias_in_forward) AddBias(y);
  s->x = Keep(std::move(x));
  return y;
}

void Linear::AddBias(Tensor& y) const {
  if (b_.empty()) return;
  y.mat().rowwise() += RowVecMap(b_.value, b_.cols);
}

Tensor Linear::BackwardInput(Tensor dy, Saved* s) const {
  const bool t = opt_.transposed_weight;
  assert(dy.cols() == out());
  Tensor dx = NewOutputLike(dy, dy.rows(), in());
  // dx = dy op(W)ᵀ: dy Wᵀ, or dy W for a transposed weight.
  Gemm(Trans::kNo, t ? Trans::kNo : Trans::kYes, dy.rows(), in(), out(), 1.0f, dy.data(), dy.cols(),
       w_.value, w_.cols, 0.0f, dx.data(), dx.cols());
  s->dy = Keep(std::move(dy));
  return dx;
}

void Linear::BackwardWeight(Saved* s) const {
  assert(!s->x.empty() && !s->dy.empty());
  if (opt_.transposed_weight) {
    // dW [out, in] += dyᵀ x
    Gemm(Trans::kYes, Trans::kNo, w_.rows, w_.cols, s->x.rows(), 1.0f, s->dy.data(), s->dy.cols(),
         s->x.data(), s->x.cols(), 1.0f, w_.grad, w_.cols);
  } else {
    // dW [in, out] += xᵀ dy
    Gemm(Trans::kYes, Trans::kNo, w_.rows, w_.cols, s->x.rows(), 1.0f, s->x.data(), s->x.cols(),
         s->dy.data(), s->dy.cols(), 1.0f, w_.grad, w_.cols);
  }
  if (!b_.empty()) {
    const Index n = opt_.bias_rows < 0 ? s->dy.rows() : opt_.bias_rows;
    RowVecMap(b_.grad, b_.cols) += s->dy.mat().middleRows(opt_.bias_row_begin, n).colwise().sum();
  }
  s->x.Reset();
  s->dy.Reset();
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

Tensor LayerNorm::Forward(const Tensor& x, Saved* s) const {
  const Index n = x.rows();
  const Index h = x.cols();
  Tensor y = NewOutputLike(x, n, h);
  Tensor xhat = NewOutputLike(x, n, h);
  Tensor rstd = NewOutputLike(x, n, 1);
  const auto gamma = RowVecMap(gamma_.value, h);
  const float inv_h = 1.0f / static_cast<float>(h);
  for (Index i = 0; i < n; ++i) {
    const auto row = x.mat().row(i);
    // RMSNorm: no centring; the "variance" is the mean square.
    const float mean = rms_ ? 0.0f : row.sum() * inv_h;
    const float var = (row.array() - mean).square().sum() * inv_h;
    const float r = 1.0f / std::sqrt(var + eps_);
    rstd.data()[i] = r;
    xhat.mat().row(i) = (row.array() - mean) * r;
    y.mat().row(i) = xhat.mat().row(i).cwiseProduct(gamma);
    if (!rms_) y.mat().row(i) += RowVecMap(beta_.value, h);
  }
  s->xhat = Keep(std::move(xhat));
  s->rstd = Keep(std::move(rstd));
  return y;
}

Tensor LayerNorm::BackwardInput(const Tensor& dy, Saved* s) const {
  const Index n = dy.rows();
  const Index h = dy.cols();
  assert(s->xhat.rows() == n && s->xhat.cols() == h);
  Tensor dx = NewOutputLike(dy, n, h);
  const auto gamma = RowVecMap(gamma_.value, h);
  const float inv_h = 1.0f / static_cast<float>(h);
  Eigen::RowVectorXf dxhat(h);
  for (Index i = 0; i < n; ++i) {
    const auto xh = s->xhat.mat().row(i);
    dxhat = dy.mat().row(i).cwiseProduct(gamma);
    // LayerNorm: dx = r (dx̂ − mean(dx̂) − x̂ mean(dx̂ ∘ x̂)); RMSNorm has no mean to remove,
    // so no mean(dx̂) term.
    const float mean_d = rms_ ? 0.0f : dxhat.sum() * inv_h;
    const float mean_dx = dxhat.dot(xh) * inv_h;
    dx.mat().row(i) = s->rstd.data()[i] * (dxhat.array() - mean_d - xh.array() * mean_dx);
  }
  RowVecMap(gamma_.grad, h) += dy.mat().cwiseProduct(s->xhat.mat()).colwise().sum();
  if (!rms_) RowVecMap(beta_.grad, h) += dy.mat().colwise().sum();
  s->xhat.Reset();
  s->rstd.Reset();
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Attention dropout

namespace {
// The dropout decisions of the counter-based stream of `key`: element k is dropped iff the 16
// bits of Mix64(Mix64(key) + k / 4) at bit 16 (k mod 4) are below round(p · 65536), so that one
// hash serves four consecutive elements; a kept element is scaled by 65536 / (65536 −
// threshold), which keeps its expectation exactly (p itself is kept to 1/65536).
class MaskStream {
 public:
  MaskStream(std::uint64_t key, float p)
      : base_(Mix64(key)),
        threshold_(static_cast<std::uint32_t>(std::lround(static_cast<double>(p) * 65536.0))),
        keep_scale_(static_cast<float>(65536.0 / (65536.0 - threshold_))) {}
  // mask[j] = 0 or the keep scale, for the elements first .. first + n − 1.
  void Fill(std::uint64_t first, Index n, float* mask) const {
    const auto count = static_cast<std::uint64_t>(n);
    std::uint64_t k = first;
    const std::uint64_t end = first + count;
    auto put = [&](std::uint64_t bits) { *mask++ = bits < threshold_ ? 0.0f : keep_scale_; };
    for (; k < end && k % 4 != 0; ++k) put((Mix64(base_ + k / 4) >> (16 * (k % 4))) & 0xffff);
    for (; k + 4 <= end; k += 4) {  // whole groups: one hash, four decisions
      const std::uint64_t h = Mix64(base_ + k / 4);
      put(h & 0xffff);
      put((h >> 16) & 0xffff);
      put((h >> 32) & 0xffff);
      put(h >> 48);
    }
    for (; k < end; ++k) put((Mix64(base_ + k / 4) >> (16 * (k % 4))) & 0xffff);
  }

 private:
  std::uint64_t base_;
  std::uint32_t threshold_;
  float keep_scale_;
};
}  // namespace

void AttentionDropout::Row(std::uint64_t key, Index b, Index head, Index seq_total, Index i,
                           Index j0, Index n, float* mask) const {
  const auto first = static_cast<std::uint64_t>(
      ((b * heads_total_ + head_offset_ + head) * seq_total + i) * seq_total + j0);
  MaskStream(key, p_).Fill(first, n, mask);
}

// ---------------------------------------------------------------------------------------------
// Causal self-attention

Tensor CausalSelfAttention::Forward(Tensor qkv, Saved* s, std::uint64_t dropout_key) const {
  const Index hl = heads_ * head_dim_;
  const Index n = batch_ * seq_;
  const Index qw = qkv_width();
  assert(qkv.rows() == n && qkv.cols() == qw);
  Tensor out = NewLike(qkv, n, hl);
  Tensor probs = NewLike(qkv, batch_ * heads_ * seq_, seq_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  const Index ld_qkv = batch_ * qw;  // row stride of one head's q, k, v
  const Index ld_out = batch_ * hl;
  // With dropout, the P V GEMM reads dropout(P) of a row block, made here (P stays saved).
  RowMatrix<float> dropped(dropout_.active() ? std::min(kAttnBlock, seq_) : 0,
                           dropout_.active() ? seq_ : 0);
  // Row blocks of kAttnBlock queries: block [r0, r0 + rows) sees keys [0, r0 + rows) only, so
  // the GEMMs skip the masked upper blocks (the probabilities there stay 0).
  for (Index b = 0; b < batch_; ++b) {
    for (Index hd = 0; hd < heads_; ++hd) {
      const float* base = qkv.data() + b * qw;  // batch row b's first row
      const float* q = base + hd * head_dim_;
      const float* k = base + KOffset(hd);
      const float* v = base + VOffset(hd);
      float* pd = probs.data() + (b * heads_ + hd) * seq_ * seq_;
      float* o = out.data() + b * hl + hd * head_dim_;
      MatMap p(pd, seq_, seq_);
      for (Index r0 = 0; r0 < seq_; r0 += kAttnBlock) {
        const Index rows = std::min(kAttnBlock, seq_ - r0);
        const Index keys = r0 + rows;
        // Scores scale * q k^T, then the causal softmax of each row's first i + 1 entries.
        Gemm(Trans::kNo, Trans::kYes, rows, keys, head_dim_, scale, q + r0 * ld_qkv, ld_qkv, k,
             ld_qkv, 0.0f, pd + r0 * seq_, seq_);
        for (Index i = r0; i < keys; ++i) {
          auto row = p.row(i).head(i + 1);
          const float m = row.maxCoeff();
          row = (row.array() - m).exp();
          row /= row.sum();
          p.row(i).segment(i + 1, keys - i - 1).setZero();
        }
        const float* pv = pd + r0 * seq_;
        if (dropout_.active()) {
          for (Index i = 0; i < rows; ++i) {
            float* row = dropped.data() + i * seq_;
            dropout_.Row(dropout_key, b, hd, seq_, r0 + i, 0, keys, row);
            for (Index j = 0; j < keys; ++j) row[j] *= pv[i * seq_ + j];
          }
          pv = dropped.data();
        }
        Gemm(Trans::kNo, Trans::kNo, rows, head_dim_, keys, 1.0f, pv, seq_, v, ld_qkv, 0.0f,
             o + r0 * ld_out, ld_out);
      }
    }
  }
  s->qkv = Keep(std::move(qkv));
  s->probs = Keep(std::move(probs));
  s->dropout_key = dropout_key;
  return out;
}

Tensor CausalSelfAttention::BackwardInput(const Tensor& dout, Saved* s) const {
  const Index hl = heads_ * head_dim_;
  const Index n = batch_ * seq_;
  assert(dout.rows() == n && dout.cols() == hl);
  const Index qw = qkv_width();
  Tensor dqkv = NewLike(dout, n, qw);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  const Index ld_qkv = batch_ * qw;
  const Index ld_out = batch_ * hl;
  RowMatrix<float> dp(seq_, seq_);
  // With dropout: the masks of a row block, and dropout(P) for dV.
  const bool drop = dropout_.active();
  const Index mask_rows = drop ? std::min(kAttnBlock, seq_) : 0;
  RowMatrix<float> mask(mask_rows, drop ? seq_ : 0), dropped(mask_rows, drop ? seq_ : 0);
  // The forward's row blocks: block [r0, r0 + rows) touches keys [0, r0 + rows) only. dK and
  // dV accumulate over the blocks (and, grouped, over the query heads of a K/V head) into dqkv,
  // which starts zero-filled (Buffer).
  for (Index b = 0; b < batch_; ++b) {
    for (Index hd = 0; hd < heads_; ++hd) {
      const Index base = b * qw;
      const float* q = s->qkv.data() + base + hd * head_dim_;
      const float* k = s->qkv.data() + base + KOffset(hd);
      const float* v = s->qkv.data() + base + VOffset(hd);
      float* dq = dqkv.data() + base + hd * head_dim_;
      float* dk = dqkv.data() + base + KOffset(hd);
      float* dv = dqkv.data() + base + VOffset(hd);
      const float* dout_bh = dout.data() + b * hl + hd * head_dim_;
      const float* pd = s->probs.data() + (b * heads_ + hd) * seq_ * seq_;
      ConstMatMap p(pd, seq_, seq_);
      for (Index r0 = 0; r0 < seq_; r0 += kAttnBlock) {
        const Index rows = std::min(kAttnBlock, seq_ - r0);
        const Index keys = r0 + rows;
        const float* pr = pd + r0 * seq_;
        float* dpr = dp.data() + r0 * seq_;
        const float* dor = dout_bh + r0 * ld_out;
        const float* pv = pr;  // what multiplied V: P, or dropout(P)
        if (drop) {
          for (Index i = 0; i < rows; ++i) {
            dropout_.Row(s->dropout_key, b, hd, seq_, r0 + i, 0, keys, mask.data() + i * seq_);
            for (Index j = 0; j < keys; ++j) {
              dropped(i, j) = mask(i, j) * pr[i * seq_ + j];
            }
          }
          pv = dropped.data();
        }
        // dV[0, keys) += P[block, 0:keys]^T dOut[block]; dP[block] = dOut[block] V[0:keys]^T
        // (through the mask with dropout).
        Gemm(Trans::kYes, Trans::kNo, keys, head_dim_, rows, 1.0f, pv, seq_, dor, ld_out, 1.0f, dv,
             ld_qkv);
        Gemm(Trans::kNo, Trans::kYes, rows, keys, head_dim_, 1.0f, dor, ld_out, v, ld_qkv, 0.0f,
             dpr, seq_);
        if (drop) {
          for (Index i = 0; i < rows; ++i) {
            dp.row(r0 + i).head(keys).array() *= mask.row(i).head(keys).array();
          }
        }
        // dS = P * (dP - rowsum(dP * P)), scaled back through the 1/sqrt(d) of the scores.
        for (Index i = r0; i < keys; ++i) {
          auto dpi = dp.row(i).head(keys);
          const auto pi = p.row(i).head(keys);
          const float dot = pi.dot(dpi);
          dpi = (pi.array() * (dpi.array() - dot) * scale).matrix();
        }
        // dQ[block] = dS[block, 0:keys] K[0:keys]; dK[0, keys) += dS[block, 0:keys]^T Q[block].
        Gemm(Trans::kNo, Trans::kNo, rows, head_dim_, keys, 1.0f, dpr, seq_, k, ld_qkv, 0.0f,
             dq + r0 * ld_qkv, ld_qkv);
        Gemm(Trans::kYes, Trans::kNo, keys, head_dim_, rows, 1.0f, dpr, seq_, q + r0 * ld_qkv,
             ld_qkv, 1.0f, dk, ld_qkv);
      }
    }
  }
  s->qkv.Reset();
  s->probs.Reset();
  return dqkv;
}

// ---------------------------------------------------------------------------------------------
// GeLU

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

// Eigen's packet tanh (a rational approximation, vectorised; no errno) over flat arrays. The
// cubic sees x clamped to [-20, 20]: tanh is exactly ±1 in float well before (u(10) > 13), so
// nothing changes there, and x^3 cannot overflow into inf * 0 in the derivative.
constexpr float kGeluClamp = 20.0f;

void GeluForward(const float* x, float* y, Index n) {
  const auto v = Eigen::Map<const Eigen::ArrayXf>(x, n);
  const auto vc = v.max(-kGeluClamp).min(kGeluClamp);
  Eigen::Map<Eigen::ArrayXf>(y, n) =
      0.5f * v * (1.0f + (kGeluC * (vc + kGeluA * vc * vc * vc)).tanh());
}

void GeluBackward(const float* x, const float* dy, float* dx, Index n) {
  const auto v = Eigen::Map<const Eigen::ArrayXf>(x, n);
  const auto vc = v.max(-kGeluClamp).min(kGeluClamp);
  auto t = Eigen::Map<Eigen::ArrayXf>(dx, n);
  t = (kGeluC * (vc + kGeluA * vc * vc * vc)).tanh();  // dx holds tanh(u) for the next pass
  t = Eigen::Map<const Eigen::ArrayXf>(dy, n) *
      (0.5f * (1.0f + t) + 0.5f * vc * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * vc * vc));
}

Tensor Gelu::Forward(Tensor x, Saved* s) const {
  Tensor y = NewOutputLike(x, x.rows(), x.cols());
  GeluForward(x.data(), y.data(), x.size());
  s->x = Keep(std::move(x));
  return y;
}

Tensor Gelu::BackwardInput(const Tensor& dy, Saved* s) const {
  assert(dy.size() == s->x.size());
  Tensor dx = NewOutputLike(dy, dy.rows(), dy.cols());
  GeluBackward(s->x.data(), dy.data(), dx.data(), dy.size());
  s->x.Reset();
  return dx;
}

// ---------------------------------------------------------------------------------------------
// SwiGLU

namespace {
using RowMajorArray = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

void SwigluForward(const float* x, float* y, Index n, Index f) {
  const Eigen::Map<const RowMajorArray> in(x, n, 2 * f);
  const auto gate = in.leftCols(f);
  // σ(g) = 1 / (1 + e^−g): Eigen's exp saturates (no inf · 0), so σ is 0 or 1 far out.
  Eigen::Map<RowMajorArray>(y, n, f) = gate / (1.0f + (-gate).exp()) * in.rightCols(f);
}

void SwigluBackward(const float* x, const float* dy, float* dx, Index n, Index f) {
  const Eigen::Map<const RowMajorArray> in(x, n, 2 * f);
  const Eigen::Map<const RowMajorArray> d(dy, n, f);
  Eigen::Map<RowMajorArray> out(dx, n, 2 * f);
  const auto gate = in.leftCols(f);
  out.leftCols(f) = 1.0f / (1.0f + (-gate).exp());  // σ(g), held for the next two lines
  out.rightCols(f) = d * gate * out.leftCols(f);    // d up = dy SiLU(g)
  out.leftCols(f) =
      d * in.rightCols(f) * out.leftCols(f) * (1.0f + gate * (1.0f - out.leftCols(f)));
}

Tensor Swiglu::Forward(Tensor x, Saved* s) const {
  assert(x.cols() % 2 == 0);
  Tensor y = NewOutputLike(x, x.rows(), x.cols() / 2);
  SwigluForward(x.data(), y.data(), x.rows(), x.cols() / 2);
  s->x = Keep(std::move(x));
  return y;
}

Tensor Swiglu::BackwardInput(const Tensor& dy, Saved* s) const {
  assert(dy.rows() == s->x.rows() && 2 * dy.cols() == s->x.cols());
  Tensor dx = NewOutputLike(dy, dy.rows(), 2 * dy.cols());
  SwigluBackward(s->x.data(), dy.data(), dx.data(), dy.rows(), dy.cols());
  s->x.Reset();
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Embedding

Tensor Embedding::Forward(std::span<const std::int32_t> tokens, Saved* s, Accountant& acc) const {
  if (static_cast<Index>(tokens.size()) != batch_ * seq_) {
    throw std::invalid_argument("embedding: expected " + std::to_string(batch_ * seq_) +
                                " tokens, got " + std::to_string(tokens.size()));
  }
  const Index h = tok_.cols;
  Tensor y(acc, MemCategory::kWorkspace, rows_, h);
  IntTensor saved(acc, MemCategory::kActivations, rows_, 1);
  for (Index i = 0; i < rows_; ++i) {
    const Index g = row_begin_ + i;
    const Index t = CpGlobalPosition(cp_, seq_, g / batch_);
    const Index b = g % batch_;
    const std::int32_t tok = tokens[static_cast<std::size_t>(b * seq_ + t)];
    if (tok < 0 || tok >= tok_.rows) {
      throw std::out_of_range("embedding: token " + std::to_string(tok) + " outside vocab of " +
                              std::to_string(tok_.rows));
    }
    saved.data()[i] = tok;
    y.mat().row(i) = tok_.w().row(tok);
    if (!pos_.empty()) y.mat().row(i) += pos_.w().row(t);
  }
  s->tokens = std::move(saved);
  return y;
}

void Embedding::BackwardInput(Tensor dy, Saved* s) const {
  assert(dy.rows() == rows_);
  s->dy = Keep(std::move(dy));
}

void Embedding::BackwardWeight(Saved* s) const {
  for (Index i = 0; i < rows_; ++i) {
    const Index t = CpGlobalPosition(cp_, seq_, (row_begin_ + i) / batch_);
    tok_.g().row(s->tokens.data()[i]) += s->dy.mat().row(i);
    if (!pos_.empty()) pos_.g().row(t) += s->dy.mat().row(i);
  }
  s->tokens.Reset();
  s->dy.Reset();
}

// ---------------------------------------------------------------------------------------------
// Rotary position embedding

void Rotary::Turn(Tensor& t, double sign) const {
  const Index d = head_dim_, half = d / 2;
  assert(d % 2 == 0 && t.cols() == (heads_ + 2 * kv_heads_) * d && t.rows() % batch_ == 0);
  std::vector<float> cos(static_cast<std::size_t>(half)), sin(cos.size());
  for (Index t_local = 0; t_local < t.rows() / batch_; ++t_local) {
    const auto pos = static_cast<double>(CpGlobalPosition(cp_, seq_, t_local));
    for (Index i = 0; i < half; ++i) {
      const double angle =
          sign * pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      cos[static_cast<std::size_t>(i)] = static_cast<float>(std::cos(angle));
      sin[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(angle));
    }
    for (Index b = 0; b < batch_; ++b) {
      float* row = t.data() + (t_local * batch_ + b) * t.cols();
      for (Index head = 0; head < heads_ + kv_heads_; ++head) {  // Q's heads, then K's
        float* x = row + head * d;
        for (Index i = 0; i < half; ++i) {
          const float x1 = x[i], x2 = x[i + half];
          const float c = cos[static_cast<std::size_t>(i)], s = sin[static_cast<std::size_t>(i)];
          x[i] = x1 * c - x2 * s;
          x[i + half] = x2 * c + x1 * s;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy

double SoftmaxCrossEntropy::Forward(Tensor logits, std::span<const std::int32_t> labels,
                                    float grad_scale, Saved* s) const {
  if (static_cast<Index>(labels.size()) != batch_ * seq_) {
    throw std::invalid_argument("loss: expected " + std::to_string(batch_ * seq_) +
                                " labels, got " + std::to_string(labels.size()));
  }
  assert(logits.rows() == rows_);
  const Index v = logits.cols();
  double loss = 0.0;
  for (Index i = 0; i < rows_; ++i) {
    const Index g = row_begin_ + i;
    const Index t = CpGlobalPosition(cp_, seq_, g / batch_);
    const std::int32_t label = labels[static_cast<std::size_t>((g % batch_) * seq_ + t)];
    if (label < 0 || label >= v) {
      throw std::out_of_range("loss: label " + std::to_string(label) + " outside vocab of " +
                              std::to_string(v));
    }
    auto row = logits.mat().row(i);
    const float m = row.maxCoeff();
    const float lse = m + std::log((row.array() - m).exp().sum());
    loss += static_cast<double>(lse - row(label));
    row = ((row.array() - lse).exp() * grad_scale).matrix();
    row(label) -= grad_scale;
  }
  s->dlogits = Keep(std::move(logits));
  return loss;
}

Tensor SoftmaxCrossEntropy::BackwardInput(Saved* s) const { return std::move(s->dlogits); }

// ---------------------------------------------------------------------------------------------
// Dropout

void Dropout::Apply(Tensor& t, std::uint64_t key, Index row_begin) const {
  if (!active()) return;
  const MaskStream stream(key, p_);
  std::vector<float> mask(static_cast<std::size_t>(t.cols()));
  for (Index r = 0; r < t.rows(); ++r) {
    Index row = row_begin + r;
    if (cp_.size > 1) row = CpGlobalPosition(cp_, seq_len_, row / batch_) * batch_ + row % batch_;
    stream.Fill(static_cast<std::uint64_t>(row * t.cols()), t.cols(), mask.data());
    float* v = t.data() + r * t.cols();
    for (Index c = 0; c < t.cols(); ++c) v[c] *= mask[static_cast<std::size_t>(c)];
  }
}

}  // namespace pipetwin::cpu
