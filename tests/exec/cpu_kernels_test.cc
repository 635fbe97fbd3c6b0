// The CPU backend's kernels against independent truth in double precision: the GEMM in every
// transpose combination with padded leading dimensions, the vectorised GeLU's error bound
// (stated in layers.h), and the fused Adam step over a long buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "exec/cpu/gemm.h"
#include "exec/cpu/layers.h"
#include "exec/cpu/optimizer.h"
#include "tests/exec/cpu_test_util.h"

namespace pipetwin::cpu {
namespace {

using testing::RandomVector;

// C = alpha op(A) op(B) + beta C in double, row-major with leading dimensions.
std::vector<double> NaiveGemm(bool ta, bool tb, Index m, Index n, Index k, double alpha,
                              const std::vector<float>& a, Index lda, const std::vector<float>& b,
                              Index ldb, double beta, const std::vector<float>& c, Index ldc) {
  std::vector<double> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<double>(c[i]);
  for (Index i = 0; i < m; ++i) {
    for (Index j = 0; j < n; ++j) {
      double sum = 0;
      for (Index p = 0; p < k; ++p) {
        const float av = ta ? a[static_cast<std::size_t>(p * lda + i)]
                            : a[static_cast<std::size_t>(i * lda + p)];
        const float bv = tb ? b[static_cast<std::size_t>(j * ldb + p)]
                            : b[static_cast<std::size_t>(p * ldb + j)];
        sum += static_cast<double>(av) * static_cast<double>(bv);
      }
      double& o = out[static_cast<std::size_t>(i * ldc + j)];
      o = alpha * sum + beta * o;
    }
  }
  return out;
}

TEST(CpuKernels, GemmEveryTransposeWithStrides) {
  const Index m = 37, n = 29, k = 53;
  for (auto* gemm : {&Gemm, &EigenGemm}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const float beta : {0.0f, 1.0f, 0.5f}) {
          // Leading dimensions wider than the rows they hold (as the attention heads' views).
          const Index lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
          const std::vector<float> a =
              RandomVector(static_cast<std::size_t>((ta ? k : m) * lda), 1);
          const std::vector<float> b =
              RandomVector(static_cast<std::size_t>((tb ? n : k) * ldb), 2);
          std::vector<float> c = RandomVector(static_cast<std::size_t>(m * ldc), 3);
          if (beta == 0.0f) {
            for (float& x : c) x = std::numeric_limits<float>::quiet_NaN();  // must be ignored
          }
          const std::vector<double> want =
              NaiveGemm(ta, tb, m, n, k, 0.75, a, lda, b, ldb, beta,
                        beta == 0.0f ? std::vector<float>(c.size(), 0.0f) : c, ldc);
          gemm(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, m, n, k, 0.75f,
               a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          double worst = 0;
          for (Index i = 0; i < m; ++i) {
            for (Index j = 0; j < n; ++j) {
              const auto at = static_cast<std::size_t>(i * ldc + j);
              worst = std::max(worst, std::abs(static_cast<double>(c[at]) - want[at]));
            }
          }
          // k = 53 products of N(0,1) numbers: float rounding stays far below 1e-4.
          EXPECT_LT(worst, 1e-4) << "ta " << ta << " tb " << tb << " beta " << beta;
          // The padding between rows of C is untouched.
          EXPECT_TRUE(beta == 0.0f ? std::isnan(c[static_cast<std::size_t>(n)])
                                   : c[static_cast<std::size_t>(n)] ==
                                         static_cast<float>(want[static_cast<std::size_t>(n)]));
        }
      }
    }
  }
  EXPECT_EQ(GemmThreads(), 1);  // one thread per process unless execution.threads says more
  EXPECT_FALSE(GemmLibrary().empty());
}

double GeluExact(double x) {
  const double c = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

double GeluDerivExact(double x) {
  const double c = std::sqrt(2.0 / std::acos(-1.0));
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// The bound stated in layers.h: |GeLU(x) - exact| <= 4e-7 max(1, |x|), the derivative within
// 2e-6 max(1, |x|) too, over [-12, 12] in steps of 2^-12 and at far-out values.
TEST(CpuKernels, GeluErrorBound) {
  std::vector<float> x;
  for (int i = -12 * 4096; i <= 12 * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  for (float v : {-1e30f, -1e6f, -3e3f, -40.0f, -20.0f, 20.0f, 40.0f, 3e3f, 1e6f, 1e30f}) {
    x.push_back(v);
  }
  const auto n = static_cast<Index>(x.size());
  std::vector<float> y(x.size()), dy(x.size(), 1.0f), dx(x.size());
  GeluForward(x.data(), y.data(), n);
  GeluBackward(x.data(), dy.data(), dx.data(), n);
  double worst_y = 0, worst_d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x[i]);
    const double scale = std::max(1.0, std::abs(v));
    ASSERT_TRUE(std::isfinite(y[i]) && std::isfinite(dx[i])) << "x = " << x[i];
    worst_y = std::max(worst_y, std::abs(static_cast<double>(y[i]) - GeluExact(v)) / scale);
    worst_d = std::max(worst_d, std::abs(static_cast<double>(dx[i]) - GeluDerivExact(v)) / scale);
  }
  EXPECT_LE(worst_y, 4e-7) << worst_y;  // measured 1.6e-7 (AVX2 + FMA)
  EXPECT_LE(worst_d, 2e-6) << worst_d;  // measured 7.3e-7
  // A bound that means something: plain float rounding of the result alone is ~6e-8 |x|.
  EXPECT_GT(worst_y, 0.0);
}

// The fused, vectorised Adam against the update formula in double, over a buffer long enough
// for every vector width and a tail.
TEST(CpuKernels, FusedAdamMatchesFormula) {
  const std::size_t n = 4096 + 13;
  Accountant acc;
  const AdamConfig cfg{.lr = 0.01f, .weight_decay = 0.1f};
  Adam adam(n, cfg, acc);
  std::vector<float> p = RandomVector(n, 7);
  std::vector<double> pd(p.begin(), p.end()), m(n, 0.0), v(n, 0.0);
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = RandomVector(n, 100 + static_cast<std::uint64_t>(t));
    adam.Step(p, g);
    const double bc1 = 1.0 - std::pow(0.9, t), bc2 = 1.0 - std::pow(0.999, t);
    for (std::size_t i = 0; i < n; ++i) {
      const double gi = static_cast<double>(g[i]);
      m[i] = 0.9 * m[i] + 0.1 * gi;
      v[i] = 0.999 * v[i] + 0.001 * gi * gi;
      pd[i] -= 0.01 * ((m[i] / bc1) / (std::sqrt(v[i] / bc2) + 1e-8) + 0.1 * pd[i]);
    }
  }
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(p[i]) - pd[i]));
  }
  EXPECT_LT(worst, 1e-6);
}

}  // namespace
}  // namespace pipetwin::cpu
