#include "models/memory.h"

#include <gtest/gtest.h>

namespace pipetwin::models {
namespace {

// Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N = 64, mixed-precision Adam (K = 12).
TEST(MemoryTest, ZeroStagesMatchRajbhandari) {
  const std::int64_t psi = 7'500'000'000;
  const std::int64_t n = 64;
  TrainingConfig t;                                                           // bf16, adam
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 64).total(), (2 + 2 + 12) * psi);      // 120 GB
  EXPECT_EQ(ModelStateBytes(psi, t, 1, 64).total(), 4 * psi + 12 * psi / n);  // 31.4 GB
  EXPECT_EQ(ModelStateBytes(psi, t, 2, 64).total(), 2 * psi + 14 * psi / n);  // 16.6 GB
  EXPECT_EQ(ModelStateBytes(psi, t, 3, 64).total(), 16 * psi / n);            // 1.9 GB
  const StateBytes z0 = ModelStateBytes(psi, t, 0, 64);
  EXPECT_EQ(z0.params, 2 * psi);
  EXPECT_EQ(z0.grads, 2 * psi);
  EXPECT_EQ(z0.optimizer, 12 * psi);
  // Without data parallelism ZeRO changes nothing.
  EXPECT_EQ(ModelStateBytes(psi, t, 3, 1).total(), 16 * psi);
}

TEST(MemoryTest, OptimizersDiffer) {
  const std::int64_t psi = 1'000'000;
  TrainingConfig t;
  t.optimizer = Optimizer::kSgd;
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 1).optimizer, 4 * psi);  // fp32 master copy
  t.optimizer = Optimizer::kSgdMomentum;
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 1).optimizer, 8 * psi);
  t.precision = Precision::kFp32;
  t.optimizer = Optimizer::kSgd;
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 1).total(), 8 * psi);  // no state at all
  t.optimizer = Optimizer::kAdam;
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 1).total(), 16 * psi);
}

TEST(MemoryTest, OptimizerStepTraffic) {
  TrainingConfig t;
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 28 * 1000.0);  // 2 + 2*12 + 2
  t.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 12 * 1000.0);
}

}  // namespace
}  // namespace pipetwin::models
