#include "models/memory.h"

namespace pipetwin::models {
namespace {

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

BytesPerParam StateBytesPerParam(Precision p, Optimizer o) {
  if (p == Precision::kFp32) {
    switch (o) {
      case Optimizer::kAdam:
        return {4, 4, 8};
      case Optimizer::kSgd:
        return {4, 4, 0};
      case Optimizer::kSgdMomentum:
        return {4, 4, 4};
    }
  }
  switch (o) {
    case Optimizer::kAdam:
      return {2, 2, 12};
    case Optimizer::kSgd:
      return {2, 2, 4};
    case Optimizer::kSgdMomentum:
      return {2, 2, 8};
  }
  return {2, 2, 12};
}

BytesPerParam StateBytesPerParam(const TrainingConfig& t) {
  BytesPerParam b = StateBytesPerParam(t.precision, t.optimizer);
  // Apex's store_param_remainders: the master copy is the bf16 weight plus 16 low bits.
  if (t.master_weights == MasterWeights::kRemainders) b.optimizer -= 2;
  // The gradient buffer has the element type of the DP reduction (Megatron-Core's grad buffer
  // is fp32 under grad_reduce_in_fp32, DeepSpeed's ZeRO keeps fp32 gradient partitions, FSDP's
  // sharded gradient takes its reduce dtype): 4 bytes unless training.grad_reduce_dtype: bf16.
  b.grads = t.grad_reduce_bytes();
  return b;
}

StateBytes ModelStateBytes(std::int64_t params, const TrainingConfig& t, int zero, int dp) {
  const BytesPerParam b = StateBytesPerParam(t);
  const std::int64_t n = dp < 1 ? 1 : dp;
  StateBytes s;
  s.params = params * b.params;
  s.grads = params * b.grads;
  s.optimizer = params * b.optimizer;
  if (zero >= 1) s.optimizer = CeilDiv(s.optimizer, n);
  if (zero >= 2) s.grads = CeilDiv(s.grads, n);
  if (zero >= 3) s.params = CeilDiv(s.params, n);
  return s;
}

double OptimizerStepBytes(std::int64_t params, const TrainingConfig& t) {
  const BytesPerParam b = StateBytesPerParam(t);
  // Read the gradient; read and write every optimizer state (in fp32 training the
  // parameters are the master copy); write the compute-precision parameters once more in
  // mixed precision.
  const double states = t.mixed_precision() ? b.optimizer : b.optimizer + b.params;
  const double bytes = b.grads + 2 * states + (t.mixed_precision() ? b.params : 0);
  return bytes * static_cast<double>(params);
}

}  // namespace pipetwin::models
