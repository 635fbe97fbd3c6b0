// Optimizer updates against hand-computed numbers, and the synthetic data's properties.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "exec/cpu/optimizer.h"
#include "exec/model/data.h"

namespace pipetwin::cpu {
namespace {

TEST(CpuOptimizer, AdamTwoStepsByHand) {
  Accountant acc;
  Adam adam(2, AdamConfig{.lr = 0.1f}, acc);
  EXPECT_EQ(acc.current(MemCategory::kOptimizer), 16u);
  std::vector<float> p = {1.0f, -2.0f};
  // Step 1: bias correction makes m_hat = g, v_hat = g^2, so each parameter moves by lr * sign.
  adam.Step(p, std::vector<float>{0.5f, -0.1f});
  EXPECT_NEAR(p[0], 0.9f, 1e-6f);
  EXPECT_NEAR(p[1], -1.9f, 1e-6f);
  // Step 2, g = (0.5, 0.3):
  //   m = (0.095, 0.021), v = (0.00049975, 0.00009999), 1 - b1^2 = 0.19, 1 - b2^2 = 0.001999
  //   p0: 0.9 - 0.1 * (0.095 / 0.19) / sqrt(0.00049975 / 0.001999) = 0.9 - 0.1 = 0.8
  //   p1: -1.9 - 0.1 * 0.1105263 / sqrt(0.0500200) = -1.9 - 0.0494188 = -1.9494188
  adam.Step(p, std::vector<float>{0.5f, 0.3f});
  EXPECT_NEAR(p[0], 0.8f, 1e-6f);
  EXPECT_NEAR(p[1], -1.9494188f, 1e-6f);
  EXPECT_EQ(adam.steps(), 2);
}

TEST(CpuOptimizer, AdamDecoupledWeightDecay) {
  Accountant acc;
  Adam adam(1, AdamConfig{.lr = 0.1f, .weight_decay = 0.5f}, acc);
  std::vector<float> p = {2.0f};
  adam.Step(p, std::vector<float>{-1.0f});  // 2 - 0.1 * (-1 + 0.5 * 2) = 2
  EXPECT_NEAR(p[0], 2.0f, 1e-6f);
}

TEST(CpuOptimizer, SgdPlainAndMomentum) {
  Accountant acc;
  Sgd plain(2, SgdConfig{.lr = 0.1f}, acc);
  EXPECT_EQ(acc.current(MemCategory::kOptimizer), 0u);
  std::vector<float> p = {1.0f, 1.0f};
  plain.Step(p, std::vector<float>{0.5f, -1.0f});
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 1.1f);

  Sgd mom(1, SgdConfig{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f}, acc);
  EXPECT_EQ(acc.current(MemCategory::kOptimizer), 4u);
  std::vector<float> q = {1.0f};
  mom.Step(q, std::vector<float>{0.4f});  // g' = 0.5, buf = 0.5, q = 0.95
  EXPECT_NEAR(q[0], 0.95f, 1e-7f);
  mom.Step(q, std::vector<float>{0.4f});  // g' = 0.495, buf = 0.945, q = 0.8555
  EXPECT_NEAR(q[0], 0.8555f, 1e-6f);
}

TEST(CpuData, SeededSequencesFollowThePermutation) {
  const SyntheticDataConfig cfg{.vocab = 50, .seq_len = 12, .micro_batch = 3, .seed = 4};
  SyntheticData a(cfg), b(cfg);
  std::vector<std::int32_t> t1(36), l1(36), t2(36), l2(36);
  a.Fill(2, 5, t1, l1);
  b.Fill(2, 5, t2, l2);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(l1, l2);
  const auto& perm = a.permutation();
  EXPECT_EQ(std::set<std::int32_t>(perm.begin(), perm.end()).size(), 50u);
  for (std::size_t bi = 0; bi < 3; ++bi) {
    for (std::size_t t = 0; t < 12; ++t) {
      const std::size_t i = bi * 12 + t;
      EXPECT_EQ(l1[i], perm[static_cast<std::size_t>(t1[i])]);  // noise 0: labels follow perm
      if (t + 1 < 12) {
        EXPECT_EQ(l1[i], t1[i + 1]);
      }
    }
  }
  a.Fill(2, 6, t2, l2);
  EXPECT_NE(t1, t2);
  // With noise, some labels break the rule, but most follow it.
  SyntheticData noisy({.vocab = 50, .seq_len = 200, .micro_batch = 1, .seed = 4, .noise = 0.25f});
  std::vector<std::int32_t> t3(200), l3(200);
  noisy.Fill(0, 0, t3, l3);
  int follow = 0;
  for (std::size_t i = 0; i < 200; ++i)
    follow += l3[i] == noisy.permutation()[static_cast<std::size_t>(t3[i])];
  EXPECT_GT(follow, 120);
  EXPECT_LT(follow, 190);
}

}  // namespace
}  // namespace pipetwin::cpu
