#include "models/memory.h"

#include <gtest/gtest.h>

#include "models/program_memory.h"

namespace pipetwin::models {
namespace {

// Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N = 64, mixed-precision Adam (K = 12).
TEST(MemoryTest, ZeroStagesMatchRajbhandari) {
  const std::int64_t psi = 7'500'000'000;
  const std::int64_t n = 64;
  TrainingConfig t;  // bf16, adam; the paper's 16-bit gradients: a bf16 reduction
  t.grad_reduce_dtype = GradReduceDtype::kBf16;
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

// Reduced in fp32 (the default, Megatron's grad_reduce_in_fp32) the gradient buffer is fp32:
// 2 + 4 + 12 bytes a parameter; ZeRO-2 shards the fp32 gradients.
TEST(MemoryTest, Fp32ReductionKeepsFp32Gradients) {
  const std::int64_t psi = 7'500'000'000, n = 64;
  TrainingConfig t;
  ASSERT_EQ(t.grad_reduce_dtype, GradReduceDtype::kFp32);
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 64).grads, 4 * psi);
  EXPECT_EQ(ModelStateBytes(psi, t, 1, 64).total(), 6 * psi + 12 * psi / n);
  EXPECT_EQ(ModelStateBytes(psi, t, 2, 64).total(), 2 * psi + 16 * psi / n);
  // The optimizer step reads the fp32 gradient: 4 + 2 * 12 + 2 bytes a parameter.
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 30 * 1000.0);
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

// Apex's store_param_remainders (training.master_weights: remainders): the fp32 master copy is
// the bf16 weight plus 16 low bits, so Adam keeps 2 + 4 + 4 = 10 bytes a parameter, not 12.
// ZeRO-1 over N: 4 Psi + 10 Psi / N; the optimizer step moves 2 + 2 * 10 + 2 = 24 bytes.
TEST(MemoryTest, MasterWeightRemaindersKeepTwoBytesOfTheMasterCopy) {
  const std::int64_t psi = 7'500'000'000, n = 64;
  TrainingConfig t;
  t.grad_reduce_dtype = GradReduceDtype::kBf16;  // NeMo's recipes with remainders reduce in bf16
  t.master_weights = MasterWeights::kRemainders;
  EXPECT_EQ(ModelStateBytes(psi, t, 0, 64).optimizer, 10 * psi);
  EXPECT_EQ(ModelStateBytes(psi, t, 1, 64).total(), 4 * psi + 10 * psi / n);
  EXPECT_EQ(ModelStateBytes(psi, t, 3, 64).total(), 14 * psi / n);
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 24 * 1000.0);
  // The parameters and gradients themselves do not change.
  TrainingConfig full;
  full.grad_reduce_dtype = GradReduceDtype::kBf16;
  EXPECT_EQ(ModelStateBytes(psi, t, 1, 64).params, ModelStateBytes(psi, full, 1, 64).params);
  EXPECT_EQ(ModelStateBytes(psi, t, 1, 64).grads, ModelStateBytes(psi, full, 1, 64).grads);
}

TEST(MemoryTest, OptimizerStepTraffic) {
  TrainingConfig t;
  t.grad_reduce_dtype = GradReduceDtype::kBf16;
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 28 * 1000.0);  // 2 + 2*12 + 2
  t.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(OptimizerStepBytes(1000, t), 12 * 1000.0);
}

}  // namespace

// FSDP over whole stages: the gathered parameters count from UNSHARD until RESHARD, as params,
// and their unsharded gradients from the first backward until REDUCE_GRAD, as grads.
// State 10 + 20 + 30, 100 bytes of activations per microbatch, 1000 gathered, 400 of gradients:
//   UNSHARD F0 SEND F1 B0 B1 REDUCE RESHARD OPT  peaks at B0, both microbatches held:
//     60 + 1000 + 400 + 200 = 1660 (params 1010, grads 420);
//   UNSHARD F0 RESHARD F1 B0 B1  at max(60 + 1000 + 100, 60 + 200) = 1160 (no gradients held).
TEST(MemoryTest, UnshardedParametersFromUnshardToReshard) {
  using pipetwin::Action;
  using pipetwin::ActionKind;
  JobCosts jc;
  StageCost c;
  c.param_bytes = 10;
  c.grad_bytes = 20;
  c.optimizer_bytes = 30;
  c.activation_bytes_per_microbatch = 100;
  c.unshard = {.applies = true, .held_bytes = 1000, .held_grad_bytes = 400};
  jc.stages = {c};
  using K = ActionKind;
  const std::vector<Action> whole = {
      {0, K::kUnshard, -1},    {0, K::kForward, 0},  {0, K::kSendF, 0},
      {0, K::kForward, 1},     {0, K::kBackward, 0}, {0, K::kBackward, 1},
      {0, K::kReduceGrad, -1}, {0, K::kReshard, -1}, {0, K::kOptimizer, -1}};
  RankMemory m = RankMemoryOverProgram(whole, jc);
  EXPECT_EQ(m.peak, 1660);
  EXPECT_EQ(m.at_peak.params, 1010);
  EXPECT_EQ(m.at_peak.grads, 420);
  EXPECT_EQ(m.at_peak.activations, 200);
  const std::vector<Action> early = {{0, K::kUnshard, -1}, {0, K::kForward, 0},
                                     {0, K::kReshard, -1}, {0, K::kForward, 1},
                                     {0, K::kBackward, 0}, {0, K::kBackward, 1}};
  EXPECT_EQ(RankMemoryOverProgram(early, jc).peak, 1160);
  jc.stages[0].unshard.applies = false;  // no FSDP: nothing is gathered
  EXPECT_EQ(RankMemoryOverProgram(whole, jc).peak, 260);
}

}  // namespace pipetwin::models
