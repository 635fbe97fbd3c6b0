#include "exec/cpu/optimizer.h"

#include <cassert>
#include <cmath>

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
  float* m = m_.data();
  float* v = v_.data();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const float g = grads[i];
    m[i] = cfg_.beta1 * m[i] + (1.0f - cfg_.beta1) * g;
    v[i] = cfg_.beta2 * v[i] + (1.0f - cfg_.beta2) * g * g;
    const float update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + cfg_.eps);
    params[i] -= cfg_.lr * (update + cfg_.weight_decay * params[i]);
  }
}

Sgd::Sgd(std::size_t n, const SgdConfig& cfg, Accountant& acc) : cfg_(cfg) {
  if (cfg.momentum != 0.0f) buf_ = Tensor(acc, MemCategory::kOptimizer, 1, static_cast<Index>(n));
}

void Sgd::Step(std::span<float> params, std::span<const float> grads) {
  assert(params.size() == grads.size());
  const bool momentum = !buf_.empty();
  assert(!momentum || static_cast<Index>(params.size()) == buf_.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    float g = grads[i] + cfg_.weight_decay * params[i];
    if (momentum) {
      float& b = buf_.data()[i];
      b = cfg_.momentum * b + g;
      g = b;
    }
    params[i] -= cfg_.lr * g;
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
