// Finite-difference checks of every layer's backward (input and weight gradients), and the
// split I + W against the fused backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/layers.h"
#include "tests/exec/cpu_test_util.h"
#include "tests/exec/kv_widen_reference.h"

namespace pipetwin::cpu {
namespace {

using testing::Dot;
using testing::FiniteDifferenceError;
using testing::KvWiden;
using testing::RandomVector;
using testing::RelErr;

struct Param {
  Param(Index r, Index c, std::uint64_t seed, float scale = 0.5f)
      : rows(r),
        cols(c),
        value(RandomVector(static_cast<std::size_t>(r * c), seed, scale)),
        grad(value.size(), 0.0f) {}
  ParamRef ref() { return ParamRef{value.data(), grad.data(), rows, cols}; }
  Index rows;
  Index cols;
  std::vector<float> value;
  std::vector<float> grad;
};

Tensor FromVector(Accountant& acc, const std::vector<float>& v, Index rows, Index cols) {
  Tensor t(acc, MemCategory::kWorkspace, rows, cols);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

// With a bias and, as under model.bias: false, without one (then y = x W exactly, by hand).
TEST(CpuLayers, LinearGradients) {
  for (const bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    Accountant acc;
    Param w(7, 4, 11), b(1, 4, 12);
    const Linear lin(w.ref(), with_bias ? b.ref() : ParamRef{});
    std::vector<float> x = RandomVector(5 * 7, 13);
    const std::vector<float> r = RandomVector(5 * 4, 14);
    auto objective = [&] {
      Linear::Saved s;
      return Dot(lin.Forward(FromVector(acc, x, 5, 7), &s).span(), r);
    };
    Linear::Saved s;
    const Tensor y = lin.Forward(FromVector(acc, x, 5, 7), &s);
    const Tensor dx = lin.BackwardInput(FromVector(acc, r, 5, 4), &s);
    lin.BackwardWeight(&s);
    EXPECT_TRUE(s.x.empty() && s.dy.empty());
    EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective), 1e-3);
    EXPECT_LT(FiniteDifferenceError(w.value, w.grad, objective), 1e-3);
    if (with_bias) {
      EXPECT_LT(FiniteDifferenceError(b.value, b.grad, objective), 1e-3);
    } else {
      for (Index i = 0; i < 5; ++i) {
        for (Index o = 0; o < 4; ++o) {
          double want = 0;
          for (Index k = 0; k < 7; ++k) {
            want += static_cast<double>(x[static_cast<std::size_t>(i * 7 + k)]) *
                    static_cast<double>(w.value[static_cast<std::size_t>(k * 4 + o)]);
          }
          EXPECT_NEAR(y.data()[i * 4 + o], want, 1e-5) << i << ", " << o;
        }
      }
    }
    EXPECT_EQ(acc.current(MemCategory::kActivations), 0u);
  }
}

// A tied output layer: its weight stored [out, in] (the [vocab, hidden] embedding), y = x Wᵀ;
// the same numbers as an ordinary linear holding Wᵀ, and finite differences agree.
TEST(CpuLayers, TransposedLinearGradients) {
  Accountant acc;
  Param w(4, 7, 21), b(1, 4, 22);  // [out = 4, in = 7]
  const Linear lin(w.ref(), b.ref(), Linear::Options{.transposed_weight = true});
  std::vector<float> x = RandomVector(5 * 7, 23);
  const std::vector<float> r = RandomVector(5 * 4, 24);
  auto objective = [&] {
    Linear::Saved s;
    return Dot(lin.Forward(FromVector(acc, x, 5, 7), &s).span(), r);
  };
  Linear::Saved s;
  const Tensor y = lin.Forward(FromVector(acc, x, 5, 7), &s);
  const Tensor dx = lin.BackwardInput(FromVector(acc, r, 5, 4), &s);
  lin.BackwardWeight(&s);
  EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective), 1e-3);
  EXPECT_LT(FiniteDifferenceError(w.value, w.grad, objective), 1e-3);
  EXPECT_LT(FiniteDifferenceError(b.value, b.grad, objective), 1e-3);

  // y[i][o] = sum_k x[i][k] W[o][k] + b[o], by hand.
  for (Index i = 0; i < 5; ++i) {
    for (Index o = 0; o < 4; ++o) {
      double want = static_cast<double>(b.value[static_cast<std::size_t>(o)]);
      for (Index k = 0; k < 7; ++k) {
        want += static_cast<double>(x[static_cast<std::size_t>(i * 7 + k)]) *
                static_cast<double>(w.value[static_cast<std::size_t>(o * 7 + k)]);
      }
      EXPECT_NEAR(y.data()[i * 4 + o], want, 1e-5) << i << ", " << o;
    }
  }
}

TEST(CpuLayers, LayerNormGradients) {
  Accountant acc;
  Param gamma(1, 8, 21), beta(1, 8, 22);
  const LayerNorm ln(gamma.ref(), beta.ref(), 1e-5f);
  std::vector<float> x = RandomVector(6 * 8, 23);
  const std::vector<float> r = RandomVector(6 * 8, 24);
  auto objective = [&] {
    LayerNorm::Saved s;
    return Dot(ln.Forward(FromVector(acc, x, 6, 8), &s).span(), r);
  };
  LayerNorm::Saved s;
  const Tensor y = ln.Forward(FromVector(acc, x, 6, 8), &s);
  // Normalised rows: mean 0, variance 1 before gamma/beta.
  EXPECT_NEAR(s.xhat.mat().row(2).mean(), 0.0f, 1e-6f);
  EXPECT_NEAR(s.xhat.mat().row(2).squaredNorm() / 8.0f, 1.0f, 1e-4f);
  const Tensor dx = ln.BackwardInput(FromVector(acc, r, 6, 8), &s);
  ln.BackwardWeight(&s);
  EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective, 1e-3f), 1e-2);
  EXPECT_LT(FiniteDifferenceError(gamma.value, gamma.grad, objective), 1e-3);
  EXPECT_LT(FiniteDifferenceError(beta.value, beta.grad, objective), 1e-3);
}

// RMSNorm (model.norm: rmsnorm): y = x / sqrt(mean(x²) + eps) · gamma, by hand on one row, and
// finite differences for x and gamma; no beta.
TEST(CpuLayers, RmsNormGradients) {
  Accountant acc;
  Param gamma(1, 8, 41);
  const LayerNorm rms(gamma.ref(), ParamRef{}, 1e-5f, /*rms=*/true);
  std::vector<float> x = RandomVector(6 * 8, 43);
  for (Index c = 0; c < 8; ++c) x[static_cast<std::size_t>(c)] += 1.0f;  // a row with a mean
  const std::vector<float> r = RandomVector(6 * 8, 44);
  auto objective = [&] {
    LayerNorm::Saved s;
    return Dot(rms.Forward(FromVector(acc, x, 6, 8), &s).span(), r);
  };
  LayerNorm::Saved s;
  const Tensor y = rms.Forward(FromVector(acc, x, 6, 8), &s);
  double mean_square = 0;
  for (Index c = 0; c < 8; ++c) {
    mean_square += std::pow(static_cast<double>(x[static_cast<std::size_t>(c)]), 2) / 8;
  }
  for (Index c = 0; c < 8; ++c) {
    const auto k = static_cast<std::size_t>(c);
    const double want = static_cast<double>(x[k]) / std::sqrt(mean_square + 1e-5) *
                        static_cast<double>(gamma.value[k]);
    EXPECT_NEAR(y.data()[c], want, 1e-5) << c;
  }
  // Not centred: row 0 keeps its mean; its mean square is 1 before gamma.
  EXPECT_GT(s.xhat.mat().row(0).mean(), 0.5f);
  EXPECT_NEAR(s.xhat.mat().row(0).squaredNorm() / 8.0f, 1.0f, 1e-4f);
  const Tensor dx = rms.BackwardInput(FromVector(acc, r, 6, 8), &s);
  rms.BackwardWeight(&s);
  EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective, 1e-3f), 1e-2);
  EXPECT_LT(FiniteDifferenceError(gamma.value, gamma.grad, objective), 1e-3);
  EXPECT_TRUE(s.xhat.empty() && s.rstd.empty());
}

// Rotary positions: Q and K of each head turned pair by pair (i with i + d/2) by pos ·
// 10000^(−2i/d), V untouched; by hand for two entries, and the backward is the forward's adjoint
// (<Forward(x), r> = <x, Backward(r)>, which makes it the exact gradient of a linear map).
TEST(CpuLayers, RotaryPositions) {
  Accountant acc;
  const Index batch = 2, seq = 8, heads = 2, d = 4, n = batch * seq, hl = heads * d;
  const std::vector<float> x = RandomVector(static_cast<std::size_t>(n * 3 * hl), 61);
  const std::vector<float> r = RandomVector(x.size(), 62);
  for (const int cp_rank : {0, 1}) {
    // Under CP 2 a rank holds 4 of the 8 positions: rank 1 holds global 2, 3 and 4, 5.
    const CpConfig cp{.size = 2, .rank = cp_rank};
    const Index rows = n / 2;  // this rank's 4 local positions × 2 batch rows
    const Rotary rope(batch, seq, heads, d, cp);
    Tensor y =
        FromVector(acc, std::vector<float>(x.begin(), x.begin() + rows * 3 * hl), rows, 3 * hl);
    rope.Forward(y);
    for (const Index t : {Index{1}, Index{3}}) {
      const double pos = static_cast<double>(CpGlobalPosition(cp, seq, t));
      const Index row = t * batch + 1;  // batch row 1
      const auto at = [&](Index col) {
        return static_cast<double>(x[static_cast<std::size_t>(row * 3 * hl + col)]);
      };
      // K of head 1 (columns hl + d ..), pair i = 1: dimensions 1 and 3, angle pos / 100.
      const Index k1 = hl + d;
      const double a = pos * std::pow(10000.0, -2.0 / 4.0);
      EXPECT_NEAR(y.data()[row * 3 * hl + k1 + 1],
                  at(k1 + 1) * std::cos(a) - at(k1 + 3) * std::sin(a), 1e-5);
      EXPECT_NEAR(y.data()[row * 3 * hl + k1 + 3],
                  at(k1 + 3) * std::cos(a) + at(k1 + 1) * std::sin(a), 1e-5);
      // V is untouched.
      EXPECT_EQ(y.data()[row * 3 * hl + 2 * hl + 1],
                x[static_cast<std::size_t>(row * 3 * hl + 2 * hl + 1)]);
    }
    Tensor g =
        FromVector(acc, std::vector<float>(r.begin(), r.begin() + rows * 3 * hl), rows, 3 * hl);
    rope.Backward(g);
    const double lhs = Dot(y.span(), std::vector<float>(r.begin(), r.begin() + rows * 3 * hl));
    const double rhs = Dot(g.span(), std::vector<float>(x.begin(), x.begin() + rows * 3 * hl));
    EXPECT_NEAR(lhs, rhs, 1e-4 * std::abs(lhs) + 1e-5) << "cp rank " << cp_rank;
    // And Backward undoes Forward (a rotation).
    rope.Backward(y);
    for (Index k = 0; k < rows * 3 * hl; ++k) {
      EXPECT_NEAR(y.data()[k], x[static_cast<std::size_t>(k)], 1e-5) << k;
    }
  }
}

TEST(CpuLayers, CausalAttentionGradients) {
  Accountant acc;
  const Index batch = 2, seq = 5, heads = 2, d = 3, n = batch * seq, hl = heads * d;
  const CausalSelfAttention attn(batch, seq, heads, d);
  std::vector<float> qkv = RandomVector(static_cast<std::size_t>(n * 3 * hl), 31);
  const std::vector<float> r = RandomVector(static_cast<std::size_t>(n * hl), 32);
  auto objective = [&] {
    CausalSelfAttention::Saved s;
    return Dot(attn.Forward(FromVector(acc, qkv, n, 3 * hl), &s).span(), r);
  };
  CausalSelfAttention::Saved s;
  const Tensor out = attn.Forward(FromVector(acc, qkv, n, 3 * hl), &s);
  // Causality: the first position of every sequence attends only to itself, so its output is
  // its own V row. Row t * batch + b; V of head 0 starts at column 2 * hl.
  for (Index b = 0; b < batch; ++b) {
    for (Index c = 0; c < d; ++c) {
      EXPECT_FLOAT_EQ(out.mat()(b, c), qkv[static_cast<std::size_t>(b * 3 * hl + 2 * hl + c)]);
    }
  }
  EXPECT_FLOAT_EQ(s.probs.mat().row(3).sum(), 1.0f);
  EXPECT_EQ(s.probs.mat()(1, 2), 0.0f);  // masked
  const Tensor dqkv = attn.BackwardInput(FromVector(acc, r, n, hl), &s);
  EXPECT_TRUE(s.qkv.empty() && s.probs.empty());
  EXPECT_LT(FiniteDifferenceError(qkv, dqkv.span(), objective, 1e-2f, 200), 1e-2);
}

// Attention dropout against a reference written out here in double: per batch row, head and
// query position i, the causal softmax P of the scaled scores and Out_i = sum_j M_ij P_ij V_j,
// M the mask AttentionDropout draws (0 or 1 / (1 − p)). 70 positions: two row blocks of the
// core. The gradient by central differences (the mask is fixed by the key), and the share of
// dropped probabilities near p.
TEST(CpuLayers, CausalAttentionWithDropout) {
  Accountant acc;
  const Index batch = 2, seq = 70, heads = 2, d = 3, n = batch * seq, hl = heads * d;
  const Index heads_total = 6, head_offset = 2;  // this core: heads 2 and 3 of 6 (TP rank 1 of 3)
  const float p = 0.25f;
  const double pd = static_cast<double>(p);
  const std::uint64_t key = 77;
  const AttentionDropout dropout(p, heads_total, head_offset);
  const CausalSelfAttention attn(batch, seq, heads, d, dropout);
  std::vector<float> qkv = RandomVector(static_cast<std::size_t>(n * 3 * hl), 51);
  const std::vector<float> r = RandomVector(static_cast<std::size_t>(n * hl), 52);

  std::vector<double> want(static_cast<std::size_t>(n * hl), 0.0);
  std::vector<float> mask(static_cast<std::size_t>(seq));
  std::int64_t dropped = 0, drawn = 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto at = [&](Index t, Index b, Index col) {
    return static_cast<double>(qkv[static_cast<std::size_t>((t * batch + b) * 3 * hl + col)]);
  };
  for (Index b = 0; b < batch; ++b) {
    for (Index h = 0; h < heads; ++h) {
      for (Index i = 0; i < seq; ++i) {
        dropout.Row(key, b, h, seq, i, 0, i + 1, mask.data());
        std::vector<double> e(static_cast<std::size_t>(i + 1));
        double top = -1e300, sum = 0;
        for (Index j = 0; j <= i; ++j) {
          double sc = 0;
          for (Index c = 0; c < d; ++c) sc += at(i, b, h * d + c) * at(j, b, hl + h * d + c);
          e[static_cast<std::size_t>(j)] = sc * scale;
          top = std::max(top, sc * scale);
        }
        for (double& x : e) sum += (x = std::exp(x - top));
        for (Index j = 0; j <= i; ++j) {
          const double m = mask[static_cast<std::size_t>(j)];
          ASSERT_TRUE(m == 0.0 || std::abs(m - 1.0 / (1.0 - pd)) < 1e-6) << m;
          dropped += m == 0.0 ? 1 : 0;
          ++drawn;
          for (Index c = 0; c < d; ++c) {
            want[static_cast<std::size_t>((i * batch + b) * hl + h * d + c)] +=
                m * e[static_cast<std::size_t>(j)] / sum * at(j, b, 2 * hl + h * d + c);
          }
        }
      }
    }
  }
  // 9,940 draws: the share dropped is p within 4 standard deviations (0.017).
  const double share = static_cast<double>(dropped) / static_cast<double>(drawn);
  EXPECT_NEAR(share, pd, 4 * std::sqrt(pd * (1 - pd) / static_cast<double>(drawn)));

  CausalSelfAttention::Saved s;
  const Tensor out = attn.Forward(FromVector(acc, qkv, n, 3 * hl), &s, key);
  const std::vector<float> want_f(want.begin(), want.end());
  EXPECT_LT(testing::RelErr(out.span(), want_f), 1e-5);
  // Another key draws other masks; no dropout gives another output.
  CausalSelfAttention::Saved s2;
  EXPECT_GT(
      testing::RelErr(attn.Forward(FromVector(acc, qkv, n, 3 * hl), &s2, key + 1).span(), want_f),
      1e-2);
  const CausalSelfAttention plain(batch, seq, heads, d);
  CausalSelfAttention::Saved s3;
  EXPECT_GT(testing::RelErr(plain.Forward(FromVector(acc, qkv, n, 3 * hl), &s3).span(), want_f),
            1e-2);

  auto objective = [&] {
    CausalSelfAttention::Saved so;
    return Dot(attn.Forward(FromVector(acc, qkv, n, 3 * hl), &so, key).span(), r);
  };
  const Tensor dqkv = attn.BackwardInput(FromVector(acc, r, n, hl), &s);
  EXPECT_LT(FiniteDifferenceError(qkv, dqkv.span(), objective, 1e-2f, 200), 1e-2);
}

TEST(CpuLayers, GeluGradients) {
  Accountant acc;
  const Gelu gelu;
  std::vector<float> x = RandomVector(4 * 6, 41, 2.0f);
  const std::vector<float> r = RandomVector(4 * 6, 42);
  auto objective = [&] {
    Gelu::Saved s;
    return Dot(gelu.Forward(FromVector(acc, x, 4, 6), &s).span(), r);
  };
  Gelu::Saved s;
  const Tensor y =
      gelu.Forward(FromVector(acc, std::vector<float>{0.0f, 1.0f, -1.0f, 3.0f}, 1, 4), &s);
  EXPECT_FLOAT_EQ(y.data()[0], 0.0f);
  EXPECT_NEAR(y.data()[1], 0.841192f, 1e-5f);  // tanh-approximate GeLU(1)
  EXPECT_NEAR(y.data()[2], -0.158808f, 1e-5f);
  EXPECT_NEAR(y.data()[3], 2.996363f, 1e-5f);
  s.x.Reset();
  gelu.Forward(FromVector(acc, x, 4, 6), &s);
  const Tensor dx = gelu.BackwardInput(FromVector(acc, r, 4, 6), &s);
  EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective, 1e-3f), 1e-2);
}

// SwiGLU by hand, value and both halves of the gradient, then by finite differences (the
// gate's values spread over ±4: σ in its curved part and near its tails).
TEST(CpuLayers, SwigluGradients) {
  Accountant acc;
  const Swiglu swiglu;
  {
    // Rows [gate | up], f = 2: (g, u) = (0, 5), (1, 2) and (-2, 1), (100, 0.5).
    Swiglu::Saved s;
    const Tensor y = swiglu.Forward(
        FromVector(acc, std::vector<float>{0.0f, 1.0f, 5.0f, 2.0f, -2.0f, 100.0f, 1.0f, 0.5f}, 2,
                   4),
        &s);
    ASSERT_EQ(y.cols(), 2);
    const double s1 = 1.0 / (1.0 + std::exp(-1.0)), s2 = 1.0 / (1.0 + std::exp(2.0));
    EXPECT_FLOAT_EQ(y.data()[0], 0.0f);               // SiLU(0) · 5
    EXPECT_NEAR(y.data()[1], 1.0 * s1 * 2.0, 1e-6);   // SiLU(1) · 2 = 1.462117
    EXPECT_NEAR(y.data()[2], -2.0 * s2 * 1.0, 1e-6);  // SiLU(−2) = −0.238406
    EXPECT_NEAR(y.data()[3], 50.0f, 1e-4f);           // σ(100) = 1
    const Tensor dx = swiglu.BackwardInput(
        FromVector(acc, std::vector<float>{1.0f, 1.0f, 1.0f, -2.0f}, 2, 2), &s);
    ASSERT_EQ(dx.cols(), 4);
    EXPECT_NEAR(dx.data()[0], 5.0 * 0.5, 1e-6);                            // u σ(0)(1 + 0)
    EXPECT_NEAR(dx.data()[1], 2.0 * s1 * (1.0 + 1.0 * (1.0 - s1)), 1e-6);  // 1.855337
    EXPECT_FLOAT_EQ(dx.data()[2], 0.0f);                                   // d up = SiLU(0)
    EXPECT_NEAR(dx.data()[3], s1, 1e-6);                                   // SiLU(1)
    EXPECT_NEAR(dx.data()[4], 1.0 * s2 * (1.0 - 2.0 * (1.0 - s2)), 1e-6);
    EXPECT_NEAR(dx.data()[5], -2.0 * 0.5, 1e-4);  // −2 · u · (σ = 1)
    EXPECT_NEAR(dx.data()[6], -2.0 * s2, 1e-6);
    EXPECT_NEAR(dx.data()[7], -2.0 * 100.0, 1e-3);
    EXPECT_TRUE(s.x.empty());
  }
  const Index n = 3, f = 5;
  std::vector<float> x = RandomVector(static_cast<std::size_t>(n * 2 * f), 43, 4.0f);
  const std::vector<float> r = RandomVector(static_cast<std::size_t>(n * f), 44);
  auto objective = [&] {
    Swiglu::Saved s;
    return Dot(swiglu.Forward(FromVector(acc, x, n, 2 * f), &s).span(), r);
  };
  Swiglu::Saved s;
  swiglu.Forward(FromVector(acc, x, n, 2 * f), &s);
  const Tensor dx = swiglu.BackwardInput(FromVector(acc, r, n, f), &s);
  EXPECT_LT(FiniteDifferenceError(x, dx.span(), objective, 1e-3f), 1e-2);
}

// The grouped-query reference's widening by hand (tests/exec/kv_widen_reference.h; 4 query
// heads, 2 K/V heads of width 2): query heads 0, 1 read K/V head 0, heads 2, 3 head 1; backward
// sums each pair; and the two are adjoint: <E x, y> = <x, Eᵀ y> for random x and y.
TEST(CpuLayers, KvWidenReferenceSharesHeadsByGroup) {
  Accountant acc;
  const KvWiden expand(4, 2, 2);
  ASSERT_TRUE(expand.active());
  EXPECT_FALSE(KvWiden(4, 4, 2).active());
  // Q: 8 columns 0..7; K heads (10, 11), (12, 13); V heads (20, 21), (22, 23).
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 20, 21, 22, 23};
  const Tensor wide = expand.Forward(FromVector(acc, x, 1, 16));
  const std::vector<float> want = {0,  1,  2,  3,  4,  5,  6,  7,  10, 11, 10, 11,
                                   12, 13, 12, 13, 20, 21, 20, 21, 22, 23, 22, 23};
  ASSERT_EQ(wide.cols(), 24);
  EXPECT_EQ(std::vector<float>(wide.data(), wide.data() + 24), want);
  std::vector<float> dy(24);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i);
  const Tensor dx = expand.Backward(FromVector(acc, dy, 1, 24));
  const std::vector<float> want_dx = {
      0, 1, 2, 3, 4, 5, 6, 7, 8 + 10, 9 + 11, 12 + 14, 13 + 15, 16 + 18, 17 + 19, 20 + 22, 21 + 23};
  EXPECT_EQ(std::vector<float>(dx.data(), dx.data() + 16), want_dx);
  const Index n = 3;
  const std::vector<float> a = RandomVector(n * 16, 45), b = RandomVector(n * 24, 46);
  const double ea_b = Dot(expand.Forward(FromVector(acc, a, n, 16)).span(), b);
  const double a_etb = Dot(a, expand.Backward(FromVector(acc, b, n, 24)).span());
  EXPECT_NEAR(ea_b, a_etb, 1e-5 * std::abs(ea_b) + 1e-6);
}

// The unblocked core (selective recompute at cp 1) under grouped-query attention: on the narrow
// qkv [N, (heads + 2 kv) d] it equals the multi-head core on K and V widened to every query head
// (output, and dqkv summed back over each group), with and without dropout, for kv 1, 2 and 4
// of 4 heads; what it saves is the narrow qkv and the probabilities. The group mapping matters:
// the same core with the K/V heads swapped differs.
TEST(CpuLayers, CausalSelfAttentionGroupedEqualsWidened) {
  const Index batch = 2, seq = 70, heads = 4, d = 6, hl = heads * d, n = batch * seq;
  for (const Index kv : {1, 2, 4}) {
    for (const float p : {0.0f, 0.2f}) {
      Accountant acc;
      const Index qw = hl + 2 * kv * d;
      const std::vector<float> x = RandomVector(static_cast<std::size_t>(n * qw), 61, 0.5f);
      const std::vector<float> g = RandomVector(static_cast<std::size_t>(n * hl), 62);
      const AttentionDropout drop(p, 8, 4);
      const std::uint64_t key = 77;
      const KvWiden widen(heads, kv, d);
      CausalSelfAttention ref(batch, seq, heads, d, drop);
      CausalSelfAttention::Saved rs;
      const Tensor want = ref.Forward(widen.Forward(FromVector(acc, x, n, qw)), &rs, key);
      const Tensor want_d = widen.Backward(ref.BackwardInput(FromVector(acc, g, n, hl), &rs));

      Accountant got_acc;
      CausalSelfAttention grouped(batch, seq, heads, d, drop, kv);
      CausalSelfAttention::Saved s;
      const Tensor got = grouped.Forward(FromVector(got_acc, x, n, qw), &s, key);
      EXPECT_EQ(got_acc.current(MemCategory::kActivations),
                static_cast<std::size_t>(4 * (n * qw + batch * heads * seq * seq)));
      const Tensor got_d = grouped.BackwardInput(FromVector(got_acc, g, n, hl), &s);
      EXPECT_EQ(got_acc.current(MemCategory::kActivations), 0u);
      EXPECT_LT(RelErr(got.span(), want.span()), 1e-6) << "kv " << kv << " p " << p;
      EXPECT_LT(RelErr(got_d.span(), want_d.span()), 1e-6) << "kv " << kv << " p " << p;
      if (kv == 2 && p == 0.0f) {  // K/V heads 0 and 1 swapped (K and V both): a different answer
        std::vector<float> swapped = x;
        for (Index r = 0; r < n; ++r) {
          for (Index part = 0; part < 2; ++part) {
            float* k = swapped.data() + r * qw + hl + part * 2 * d;
            std::swap_ranges(k, k + d, k + d);
          }
        }
        CausalSelfAttention::Saved ss;
        EXPECT_GT(RelErr(grouped.Forward(FromVector(got_acc, swapped, n, qw), &ss, key).span(),
                         want.span()),
                  1e-2);
      }
    }
  }
}

TEST(CpuLayers, EmbeddingGradients) {
  Accountant acc;
  const Index batch = 2, seq = 3, vocab = 5, h = 4;
  Param tok(vocab, h, 51), pos(seq, h, 52);
  const std::vector<std::int32_t> tokens = {4, 0, 4, 1, 2, 3};  // [batch, seq]
  // Rows 2..5 of the sequence-major layout: (t=1,b=0) (t=1,b=1) (t=2,b=0) (t=2,b=1).
  const Embedding emb(tok.ref(), pos.ref(), batch, seq, 2, 4);
  const std::vector<float> r = RandomVector(4 * h, 53);
  auto objective = [&] {
    Embedding::Saved s;
    return Dot(emb.Forward(tokens, &s, acc).span(), r);
  };
  Embedding::Saved s;
  const Tensor y = emb.Forward(tokens, &s, acc);
  EXPECT_FLOAT_EQ(y.mat()(1, 0), tok.value[2 * h] + pos.value[1 * h]);  // token 2 at t = 1
  emb.BackwardInput(FromVector(acc, r, 4, h), &s);
  emb.BackwardWeight(&s);
  EXPECT_LT(FiniteDifferenceError(tok.value, tok.grad, objective, 1e-2f, 100), 1e-3);
  EXPECT_LT(FiniteDifferenceError(pos.value, pos.grad, objective, 1e-2f, 100), 1e-3);
  EXPECT_EQ(pos.grad[0], 0.0f);  // position 0 is not in these rows
}

TEST(CpuLayers, SoftmaxCrossEntropyGradients) {
  Accountant acc;
  const Index batch = 2, seq = 3, vocab = 7;
  const std::vector<std::int32_t> labels = {1, 6, 0, 3, 3, 5};
  const SoftmaxCrossEntropy ce(batch, seq, 0, batch * seq);
  std::vector<float> logits = RandomVector(static_cast<std::size_t>(batch * seq * vocab), 61);
  auto objective = [&] {
    SoftmaxCrossEntropy::Saved s;
    return ce.Forward(FromVector(acc, logits, batch * seq, vocab), labels, 1.0f, &s);
  };
  // Uniform logits: each row's loss is ln(vocab).
  {
    SoftmaxCrossEntropy::Saved s;
    const double loss =
        ce.Forward(FromVector(acc, std::vector<float>(42, 0.5f), 6, 7), labels, 1.0f, &s);
    EXPECT_NEAR(loss, 6.0 * std::log(7.0), 1e-5);
  }
  SoftmaxCrossEntropy::Saved s;
  ce.Forward(FromVector(acc, logits, batch * seq, vocab), labels, 1.0f, &s);
  const Tensor dlogits = ce.BackwardInput(&s);
  EXPECT_TRUE(s.dlogits.empty());
  EXPECT_NEAR(dlogits.mat().row(0).sum(), 0.0f, 1e-6f);
  EXPECT_LT(FiniteDifferenceError(logits, dlogits.span(), objective, 1e-2f, 42), 1e-3);
}

// A chunk of blocks in the middle of the pipeline: gradients of sum(R .* output) with respect to
// its input and to every parameter of its blocks (all randomised, LayerNorms and biases too).
// With dropout on, the masks depend only on (step, microbatch), so the same microbatch id gives
// the same function and the check still applies. Also as Llama's blocks are built: RMSNorm, no
// biases in the linear layers, rotary positions, SwiGLU, grouped-query attention.
struct BlockVariant {
  float dropout = 0.0f;
  bool rms_norm = false;
  bool bias = true;
  bool rope = false;
  bool swiglu = false;
  int kv_heads = 0;  // of 2 heads
};
class CpuBlockGradients : public ::testing::TestWithParam<BlockVariant> {};

// A three-layer model of this variant, and its middle layer as a chunk.
ModelConfig ThreeLayers(BlockVariant v) {
  return ModelConfig{.layers = 3,
                     .hidden = 8,
                     .ffn_hidden = 12,
                     .heads = 2,
                     .vocab = 11,
                     .seq_len = 4,
                     .micro_batch = 2,
                     .dropout = v.dropout,
                     .bias = v.bias,
                     .rms_norm = v.rms_norm,
                     .rope = v.rope,
                     .swiglu = v.swiglu,
                     .kv_heads = v.kv_heads};
}
constexpr ChunkSpec kMiddleLayer{.first_layer = 1, .num_layers = 1, .first = false, .last = false};

TEST_P(CpuBlockGradients, MatchFiniteDifferences) {
  Accountant acc;
  Chunk chunk(ThreeLayers(GetParam()), kMiddleLayer, TpConfig{}, acc);
  testing::RandomFill(chunk.params(), 71, 0.3f);
  std::vector<float> x = RandomVector(chunk.activation_size(), 72);
  const std::vector<float> r = RandomVector(chunk.activation_size(), 73);
  std::vector<float> y(chunk.activation_size());
  const std::int64_t mb = 3;
  auto objective = [&] {
    chunk.Forward(mb, {.input = x, .output = y, .step = 5});
    std::vector<float> discard(x.size());
    chunk.Backward(mb, r, discard);
    return Dot(y, r);
  };
  std::vector<float> dx(x.size());
  chunk.Forward(mb, {.input = x, .output = y, .step = 5});
  chunk.Backward(mb, r, dx);
  const std::vector<float> grads(chunk.grads().begin(), chunk.grads().end());
  EXPECT_LT(FiniteDifferenceError(x, dx, objective), 1e-2);
  for (const ParamInfo& p : chunk.layout().params) {
    auto v = chunk.params().subspan(p.offset, static_cast<std::size_t>(p.size()));
    auto g = std::span<const float>(grads).subspan(p.offset, v.size());
    EXPECT_LT(FiniteDifferenceError(v, g, objective, 1e-2f, 16), 2e-2) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuBlockGradients,
    ::testing::Values(
        BlockVariant{}, BlockVariant{.dropout = 0.3f},
        BlockVariant{.rms_norm = true, .bias = false},
        BlockVariant{.dropout = 0.3f, .rms_norm = true}, BlockVariant{.rope = true},
        BlockVariant{.rms_norm = true, .bias = false, .rope = true}, BlockVariant{.swiglu = true},
        BlockVariant{.dropout = 0.3f, .swiglu = true},
        BlockVariant{.rms_norm = true, .bias = false, .rope = true, .swiglu = true},
        BlockVariant{.kv_heads = 1}, BlockVariant{.dropout = 0.3f, .kv_heads = 1},
        BlockVariant{
            .rms_norm = true, .bias = false, .rope = true, .swiglu = true, .kv_heads = 1}));

// The masks follow ForwardArgs::sample (the microbatch's index among the step's dp ×
// microbatches) where given, not the rank's microbatch id: data-parallel rank 1's microbatch 0
// is the single-process run's microbatch `microbatches`. Same sample, another id: the same
// output; same id, another sample: another output; no sample: keyed by the id.
TEST(CpuLayers, DropoutMasksFollowTheSample) {
  Accountant acc;
  Chunk chunk(ThreeLayers({.dropout = 0.3f}), kMiddleLayer, TpConfig{}, acc);
  testing::RandomFill(chunk.params(), 81, 0.3f);
  const std::vector<float> x = RandomVector(chunk.activation_size(), 82);
  auto out = [&](std::int64_t id, std::int64_t sample) {
    std::vector<float> y(chunk.activation_size());
    chunk.Forward(id, {.input = x, .output = y, .step = 1, .sample = sample});
    std::vector<float> discard(x.size());
    chunk.Backward(id, y, discard);  // frees the microbatch's state
    return y;
  };
  const std::vector<float> by_id = out(4, -1);
  EXPECT_EQ(out(0, 4), by_id);
  EXPECT_EQ(out(7, 4), by_id);
  EXPECT_GT(testing::RelErr(out(4, 5), by_id), 1e-2);
}

TEST(CpuLayers, DropoutMaskIsSeededAndSplittable) {
  Accountant acc;
  const Dropout drop(0.25f);
  Tensor a(acc, MemCategory::kWorkspace, 100, 50);
  a.mat().setOnes();
  drop.Apply(a, 42, 0);
  const Index zeros = (a.mat().array() == 0.0f).count();
  EXPECT_GT(zeros, 1100);  // 25% of 5000 = 1250
  EXPECT_LT(zeros, 1400);
  EXPECT_FLOAT_EQ(a.mat().maxCoeff(), 1.0f / 0.75f);
  // Rows 60..99 alone, as a sequence-parallel rank would hold them, get the same mask.
  Tensor b(acc, MemCategory::kWorkspace, 40, 50);
  b.mat().setOnes();
  drop.Apply(b, 42, 60);
  EXPECT_EQ(b.mat(), a.mat().bottomRows(40));
  // Another key, another mask.
  Tensor c(acc, MemCategory::kWorkspace, 100, 50);
  c.mat().setOnes();
  drop.Apply(c, 43, 0);
  EXPECT_NE(c.mat(), a.mat());
}

// The whole model in one chunk: gradients of the mean loss; with LayerNorm, biases and learned
// positions, and with RMSNorm, no biases and rotary positions (the final norm too).
class CpuWholeModel : public ::testing::TestWithParam<bool> {};

TEST_P(CpuWholeModel, LossGradients) {
  Accountant acc;
  const bool llama_style = GetParam();
  ModelConfig m{.layers = 2,
                .hidden = 8,
                .ffn_hidden = 16,
                .heads = 2,
                .vocab = 9,
                .seq_len = 4,
                .micro_batch = 2,
                .seed = 5,
                .init_std = 0.5f,
                .bias = !llama_style,
                .rms_norm = llama_style,
                .rope = llama_style,
                .swiglu = llama_style,
                .kv_heads = llama_style ? 1 : 0};
  Chunk chunk(m, ChunkSpec{.first_layer = 0, .num_layers = 2}, TpConfig{}, acc);
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 8, 7, 0, 6};
  const std::vector<std::int32_t> labels = {2, 3, 4, 5, 7, 0, 6, 1};
  chunk.set_loss_scale(100.0f);  // d(100 * loss): keeps the float loss's rounding out of reach
  std::int64_t mb = 0;
  auto objective = [&] {
    const float loss = chunk.Forward(mb, {.tokens = tokens, .labels = labels});
    chunk.Backward(mb++, {}, {});
    return 100.0 * static_cast<double>(loss);
  };
  chunk.Forward(mb, {.tokens = tokens, .labels = labels});
  chunk.Backward(mb++, {}, {});
  const std::vector<float> grads(chunk.grads().begin(), chunk.grads().end());
  for (const ParamInfo& p : chunk.layout().params) {
    auto v = chunk.params().subspan(p.offset, static_cast<std::size_t>(p.size()));
    auto g = std::span<const float>(grads).subspan(p.offset, v.size());
    // A step of 3e-3: SwiGLU's product of two branches curves the first layers' loss enough
    // that at 1e-2 the central difference's own error reaches 4% (it falls as the step's square:
    // 24%, 3.7%, 0.35%, 0.04% at 3e-2, 1e-2, 3e-3, 1e-3 for embed.tok, measured).
    EXPECT_LT(FiniteDifferenceError(v, g, objective, 3e-3f, 16), 2e-2) << p.name;
  }
  // The layout holds exactly the model's parameters: 2 norms a layer and the final one, with
  // a beta each under LayerNorm only; four linear biases a layer or none; fc1 [h, f] or, SwiGLU,
  // [h, 2f]; QKV [h, 3h] or, one K/V head of the two, [h, h + 2 h / 2].
  const auto has = [&](const char* name) { return chunk.layout().TryFind(name) != nullptr; };
  EXPECT_EQ(has("block0.ln1_b"), !llama_style);
  EXPECT_EQ(has("head.ln_b"), !llama_style);
  EXPECT_EQ(has("block1.fc2_b"), !llama_style);
  EXPECT_TRUE(has("block1.ln2_g") && has("head.ln_g"));
  const std::size_t h = 8, f = 16, v = 9, s = 4, layers = 2;
  const std::size_t norms = (2 * layers + 1) * (llama_style ? h : 2 * h);
  const std::size_t biases = llama_style ? 0 : layers * (3 * h + h + f + h);
  EXPECT_EQ(has("embed.pos"), !llama_style);
  EXPECT_EQ(chunk.layout().total,
            v * h + (llama_style ? 0 : s * h) +
                layers * ((llama_style ? 2 : 3) * h * h + h * h + (llama_style ? 3 : 2) * h * f) +
                norms + biases + h * v);
}

INSTANTIATE_TEST_SUITE_P(NormsAndBiases, CpuWholeModel, ::testing::Bool());

// I and W split apart, with the other microbatch's F and I in between, give bit-for-bit the
// losses, input gradients and weight gradients of the fused backward (W in the same microbatch
// order: gradient accumulation is a floating-point sum, so its order matters).
TEST(CpuLayers, SplitBackwardEqualsFused) {
  ModelConfig m{.layers = 3,
                .hidden = 8,
                .ffn_hidden = 16,
                .heads = 2,
                .vocab = 9,
                .seq_len = 4,
                .micro_batch = 2};
  for (const ChunkSpec spec :
       {ChunkSpec{.first_layer = 0, .num_layers = 3},
        ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false}}) {
    Accountant acc;
    Chunk fused(m, spec, TpConfig{}, acc);
    Chunk split(m, spec, TpConfig{}, acc);
    testing::RandomFill(fused.params(), 81, 0.3f);
    std::copy(fused.params().begin(), fused.params().end(), split.params().begin());
    const std::vector<std::int32_t> tokens[2] = {{1, 2, 3, 4, 8, 7, 0, 6},
                                                 {5, 5, 1, 0, 2, 3, 4, 8}};
    const std::vector<std::int32_t> labels[2] = {{2, 3, 4, 5, 7, 0, 6, 1},
                                                 {0, 1, 2, 3, 4, 5, 6, 7}};
    const std::vector<float> x[2] = {RandomVector(fused.activation_size(), 82),
                                     RandomVector(fused.activation_size(), 83)};
    const std::vector<float> dy[2] = {RandomVector(fused.activation_size(), 84),
                                      RandomVector(fused.activation_size(), 85)};
    std::vector<float> out(fused.activation_size());
    std::vector<float> dx_fused[2], dx_split[2];
    auto args = [&](int i) {
      return spec.first ? Chunk::ForwardArgs{.tokens = tokens[i], .labels = labels[i]}
                        : Chunk::ForwardArgs{.input = x[i], .output = out};
    };
    std::span<const float> g[2] = {dy[0], dy[1]};
    for (int i = 0; i < 2; ++i) {
      dx_fused[i].resize(spec.first ? 0 : fused.activation_size());
      dx_split[i].resize(dx_fused[i].size());
      if (spec.last) g[i] = {};
    }
    float loss_fused[2], loss_split[2];
    for (int i = 0; i < 2; ++i) {
      loss_fused[i] = fused.Forward(i, args(i));
      fused.Backward(i, g[i], dx_fused[i]);
    }
    loss_split[0] = split.Forward(0, args(0));
    loss_split[1] = split.Forward(1, args(1));
    split.BackwardInput(0, g[0], dx_split[0]);
    EXPECT_EQ(split.inflight(), 1);
    EXPECT_EQ(split.pending_weight(), 1);
    split.BackwardInput(1, g[1], dx_split[1]);
    split.BackwardWeight(0);
    split.BackwardWeight(1);
    EXPECT_EQ(split.pending_weight(), 0);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(loss_fused[i], loss_split[i]);
      EXPECT_EQ(dx_fused[i], dx_split[i]);
    }
    const std::vector<float> gf(fused.grads().begin(), fused.grads().end());
    const std::vector<float> gs(split.grads().begin(), split.grads().end());
    EXPECT_EQ(gf, gs);
    EXPECT_GT(testing::RelErr(gf, std::vector<float>(gf.size(), 0.0f)), 0.0);
  }
}

TEST(CpuLayers, ChunkRejectsOutOfOrderActions) {
  Accountant acc;
  ModelConfig m{.layers = 1,
                .hidden = 8,
                .ffn_hidden = 8,
                .heads = 2,
                .vocab = 5,
                .seq_len = 2,
                .micro_batch = 1};
  Chunk chunk(m, ChunkSpec{.first_layer = 0, .num_layers = 1}, TpConfig{}, acc);
  const std::vector<std::int32_t> t = {1, 2};
  EXPECT_THROW(chunk.BackwardInput(0, {}, {}), std::logic_error);
  chunk.Forward(0, {.tokens = t, .labels = t});
  EXPECT_THROW(chunk.Forward(0, {.tokens = t, .labels = t}), std::logic_error);
  EXPECT_THROW(chunk.BackwardWeight(0), std::logic_error);
  const std::vector<std::int32_t> bad = {1, 5};
  EXPECT_THROW(chunk.Forward(1, {.tokens = bad, .labels = t}), std::out_of_range);
  EXPECT_THROW(Chunk(m, ChunkSpec{.first_layer = 0, .num_layers = 1}, TpConfig{.size = 3}, acc),
               std::invalid_argument);
}

}  // namespace
}  // namespace pipetwin::cpu
