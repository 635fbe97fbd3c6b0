// optimizer.h — Adam (bias-corrected, optional decoupled weight decay) and SGD (optional
// momentum) over flat parameter buffers. State is allocated through the Accountant
// (MemCategory::kOptimizer), sized by the span it will step (a ZeRO-1 shard works the same).
//
//   Adam adam(chunk.params().size(), AdamConfig{.lr = 1e-3f}, acc);
//   adam.Step(chunk.params(), chunk.grads());
//   chunk.ZeroGrads();
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "exec/cpu/memory.h"

namespace pipetwin::cpu {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void Step(std::span<float> params, std::span<const float> grads) = 0;
  virtual std::size_t state_bytes() const = 0;
};

struct AdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled (AdamW): p -= lr * wd * p
};

// t += 1; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + lr * wd * p.
class Adam final : public Optimizer {
 public:
  Adam(std::size_t n, const AdamConfig& cfg, Accountant& acc);
  void Step(std::span<float> params, std::span<const float> grads) override;
  std::size_t state_bytes() const override { return m_.bytes() + v_.bytes(); }
  std::int64_t steps() const { return t_; }

 private:
  AdamConfig cfg_;
  Tensor m_;
  Tensor v_;
  std::int64_t t_ = 0;
};

struct SgdConfig {
  float lr = 1e-2f;
  float momentum = 0.0f;  // 0: no momentum buffer is allocated
  float weight_decay = 0.0f;
};

// g' = g + wd p; buf = momentum * buf + g' (buf starts at 0); p -= lr * (momentum ? buf : g').
class Sgd final : public Optimizer {
 public:
  Sgd(std::size_t n, const SgdConfig& cfg, Accountant& acc);
  void Step(std::span<float> params, std::span<const float> grads) override;
  std::size_t state_bytes() const override { return buf_.bytes(); }

 private:
  SgdConfig cfg_;
  Tensor buf_;
};

enum class OptimizerKind : std::uint8_t { kAdam, kSgd };

// Bytes of optimizer state for n parameters (Adam: 2 floats each; SGD: 1 with momentum, else 0).
std::size_t OptimizerStateBytes(OptimizerKind kind, std::size_t n, float momentum = 0.0f);

}  // namespace pipetwin::cpu
