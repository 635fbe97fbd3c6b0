// memory.h — bytes of model state per rank: parameters, gradients and optimizer states,
// with ZeRO (Rajbhandari et al. 2020) sharding over the data-parallel group.
//
// Mixed precision (bf16/fp16), per parameter before sharding, following the ZeRO paper:
//   parameters 2, gradients 2, optimizer K: Adam 12 (fp32 master copy, momentum, variance),
//   SGD 4 (fp32 master copy only), SGD with momentum 8 (master copy + momentum).
// fp32 training: parameters 4, gradients 4, optimizer K: Adam 8, SGD 0, SGD-momentum 4.
// training.master_weights: remainders (Apex's store_param_remainders, bf16): Adam 10.
// ZeRO over N data-parallel ranks (Psi parameters, Adam, mixed precision):
//   stage 0: (2 + 2 + 12) Psi      stage 1: 4 Psi + 12 Psi / N
//   stage 2: 2 Psi + 14 Psi / N    stage 3: 16 Psi / N
//
//   StateBytes s = ModelStateBytes(1'000'000, training, /*zero=*/2, /*n=*/64);
//   s.total() == 2e6 + 14e6 / 64 (rounded up per category)
#pragma once

#include <cstdint>

#include "models/training.h"

namespace pipetwin::models {

struct StateBytes {
  std::int64_t params = 0, grads = 0, optimizer = 0;
  std::int64_t total() const { return params + grads + optimizer; }
};

struct BytesPerParam {
  int params, grads, optimizer;
};
BytesPerParam StateBytesPerParam(Precision p, Optimizer o);
// The same with training.master_weights: remainders keeps 2 bytes of the master copy, not 4
// (Adam in mixed precision: optimizer 10).
BytesPerParam StateBytesPerParam(const TrainingConfig& t);

// `params` parameters held by one rank before ZeRO; `dp` ranks share them under ZeRO.
StateBytes ModelStateBytes(std::int64_t params, const TrainingConfig& t, int zero, int dp);

// HBM traffic of one optimizer step over `params` parameters (read gradient and states,
// write states and the compute-precision copy).
double OptimizerStepBytes(std::int64_t params, const TrainingConfig& t);

}  // namespace pipetwin::models
