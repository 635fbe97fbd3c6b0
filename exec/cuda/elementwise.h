// elementwise.h — the per-element math of the CUDA backend's kernels, as inline functions that
// compile both for the device (nvcc) and for the host (plain C++), so that the CPU test suite
// checks exactly the arithmetic the kernels run against the CPU layers (exec/cpu/layers.cc).
//
// Kernels (kernels.cu) only add the reductions around these (row maxima, sums, column sums);
// every formula lives here, in float32.
//
//   float y = ew::GeluForward(x);                 // same as cpu::Gelu
//   float dx = ew::GeluBackward(x, dy);
//   float p = ew::SoftmaxNumerator(score, scale, row_max_of_scaled);   // then / row sum
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PT_HD __host__ __device__ __forceinline__
#include <math.h>
#else
#include <cmath>
#define PT_HD inline
#endif

namespace pipetwin::cuda::ew {

#if defined(__CUDACC__)
PT_HD float Tanh(float x) { return tanhf(x); }
PT_HD float Exp(float x) { return expf(x); }
PT_HD float Log(float x) { return logf(x); }
PT_HD float Sqrt(float x) { return sqrtf(x); }
#else
inline float Tanh(float x) { return std::tanh(x); }
inline float Exp(float x) { return std::exp(x); }
inline float Log(float x) { return std::log(x); }
inline float Sqrt(float x) { return std::sqrt(x); }
#endif

// GeLU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;
PT_HD float GeluForward(float x) {
  return 0.5f * x * (1.0f + Tanh(kGeluC * (x + kGeluA * x * x * x)));
}
PT_HD float GeluBackward(float x, float dy) {
  const float t = Tanh(kGeluC * (x + kGeluA * x * x * x));
  const float d =
      0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  return dy * d;
}

// LayerNorm over one row of h elements, from the row's mean and variance (population).
PT_HD float LayerNormRstd(float var, float eps) { return 1.0f / Sqrt(var + eps); }
PT_HD float LayerNormXhat(float x, float mean, float rstd) { return (x - mean) * rstd; }
PT_HD float LayerNormForward(float x, float mean, float rstd, float gamma, float beta) {
  return LayerNormXhat(x, mean, rstd) * gamma + beta;
}
// dx of one element, given the row means mean_d = mean(dy * gamma) and
// mean_dx = mean(dy * gamma * xhat).
PT_HD float LayerNormBackward(float dy, float gamma, float xhat, float rstd, float mean_d,
                              float mean_dx) {
  return rstd * (dy * gamma - mean_d - xhat * mean_dx);
}

// Causal softmax of one score row i (query position) of a [seq, seq] matrix: column j is masked
// when j > i. The kernel takes the maximum m of scale * s over the unmasked columns, then
// p = SoftmaxNumerator / sum of the numerators.
PT_HD bool CausalMasked(std::int64_t query, std::int64_t key) { return key > query; }
PT_HD float SoftmaxNumerator(float score, float scale, float row_max) {
  return Exp(score * scale - row_max);
}
// dS of one element: p (dp - sum_j p_j dp_j) * scale (the 1/sqrt(d) of the scores).
PT_HD float SoftmaxBackward(float p, float dp, float row_dot, float scale) {
  return p * (dp - row_dot) * scale;
}

// Cross entropy of one row with log-sum-exp lse: loss = lse - logit[label]; the gradient of
// grad_scale * loss with respect to one logit.
PT_HD float CrossEntropyLoss(float lse, float label_logit) { return lse - label_logit; }
PT_HD float CrossEntropyGrad(float logit, float lse, bool is_label, float grad_scale) {
  return Exp(logit - lse) * grad_scale - (is_label ? grad_scale : 0.0f);
}
PT_HD float LogSumExp(float row_max, float sum_exp) { return row_max + Log(sum_exp); }

// Sequence-major rows (row g = t * batch + b) and b-major tokens/labels [batch, seq].
PT_HD std::int64_t TokenIndexOfRow(std::int64_t row, std::int64_t batch, std::int64_t seq) {
  return (row % batch) * seq + row / batch;
}
PT_HD std::int64_t PositionOfRow(std::int64_t row, std::int64_t batch) { return row / batch; }
PT_HD float EmbeddingForward(float tok, float pos) { return tok + pos; }

PT_HD float BiasAdd(float y, float b) { return y + b; }
PT_HD float ResidualAdd(float y, float x) { return y + x; }

// Adam (bias-corrected, decoupled weight decay) on one element, in cpu::Adam's order of
// operations. bc1 = 1 - beta1^t, bc2 = 1 - beta2^t.
struct AdamScalars {
  float lr, beta1, beta2, eps, weight_decay, bc1, bc2;
};
PT_HD void AdamUpdate(float& p, float& m, float& v, float g, const AdamScalars& a) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  const float update = (m / a.bc1) / (Sqrt(v / a.bc2) + a.eps);
  p -= a.lr * (update + a.weight_decay * p);
}
// Plain SGD (no momentum), as cpu::Sgd with momentum 0.
PT_HD void SgdUpdate(float& p, float g, float lr, float weight_decay) {
  p -= lr * (g + weight_decay * p);
}

// bfloat16 storage: round to nearest even, as __float2bfloat16 does (NaN kept quiet). Used by
// host tests to reproduce what the device stores.
PT_HD std::uint16_t FloatToBf16Bits(float f) {
  std::uint32_t u = 0;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  std::memcpy(&u, &f, sizeof u);
#endif
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  }
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}
PT_HD float Bf16BitsToFloat(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
PT_HD float RoundToBf16(float f) { return Bf16BitsToFloat(FloatToBf16Bits(f)); }

}  // namespace pipetwin::cuda::ew
