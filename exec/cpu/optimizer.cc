#include "exec/cpu/optimizer.h"

#include <cassert>
#include <cmath>
#include <cstddef>

namespace pipetwin::cpu {

Adam::Adam(std::size_t n, const AdamConfig& cfg, Accountant& acc)
    : cfg_(cfg),
      m_(acc, MemCategory::kOptimizer, 1, static_cast<Index>(n)),
      v_(acc, MemCategory::kOptimizer, 1, static_cast<Index>(n)) {}

void Adam::Step(std::span<float> params, std::span<const float> grads) {
  assert(params.size() == grads.size() && static_cast<Index>(params.size()) == m_.size());
  ++t_;
  const double t = static_cast<double>(t_);
  const auto bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg_.beta1), t));
  const auto bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg_.beta2), t));
  // One fused pass over p, g, m and v. The buffers never overlap (`omp simd` tells the
  // compiler so: built with -fopenmp-simd), and -fno-math-errno lets sqrt vectorise.
  float* m = m_.data();
  float* v = v_.data();
  float* p = params.data();
  const float* gr = grads.data();
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps, lr = cfg_.lr;
  const float wd = cfg_.weight_decay;
  const auto n = static_cast<std::ptrdiff_t>(params.size());
#pragma omp simd
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const float g = gr[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    p[i] -= lr * (update + wd * p[i]);
  }
}

Sgd::Sgd(std::size_t n, const SgdConfig& cfg, Accountant& acc) : cfg_(cfg) {
  if (cfg.momentum != 0.0f) buf_ = Tensor(acc, MemCategory::kOptimizer, 1, static_cast<Index>(n));
}

void Sgd::Step(std::span<float> params, std::span<const float> grads) {
  assert(params.size() == grads.size());
  const bool momentum = !buf_.empty();
  assert(!momentum || static_cast<Index>(params.size()) == buf_.size());
  float* p = params.data();
  const float* gr = grads.data();
  const float lr = cfg_.lr, wd = cfg_.weight_decay, mu = cfg_.momentum;
  const auto n = static_cast<std::ptrdiff_t>(params.size());
  if (momentum) {
    float* buf = buf_.data();
#pragma omp simd
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      const float b = mu * buf[i] + (gr[i] + wd * p[i]);
      buf[i] = b;
      p[i] -= lr * b;
    }
  } else {
#pragma omp simd
    for (std::ptrdiff_t i = 0; i < n; ++i) p[i] -= lr * (gr[i] + wd * p[i]);
  }
}

std::size_t OptimizerStateBytes(OptimizerKind kind, std::size_t n, float momentum) {
  switch (kind) {
    case OptimizerKind::kAdam:
      return 2 * n * sizeof(float);
    case OptimizerKind::kSgd:
      return momentum != 0.0f ? n * sizeof(float) : 0;
  }
  return 0;
}

}  // namespace pipetwin::cpu
