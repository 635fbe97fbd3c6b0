// execution.stragglers: the seeded per-rank, per-step factors have the distribution's mean
// and coefficient of variation, and fixed slowdowns multiply them.
#include "models/stragglers.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pipetwin::models {
namespace {

struct Moments {
  double mean, cv;
};

Moments Draws(const Stragglers& s, int ranks, int steps) {
  double sum = 0, sum2 = 0;
  const double n = static_cast<double>(ranks) * steps;
  for (int r = 0; r < ranks; ++r) {
    for (int k = 0; k < steps; ++k) {
      const double x = StragglerFactor(s, r, k);
      sum += x;
      sum2 += x * x;
    }
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean) / mean};
}

TEST(Stragglers, RandomFactorsHaveMeanOneAndTheirCv) {
  // 40,000 draws: the mean's standard error is cv / 200, the cv's about cv / 280.
  for (auto d : {Variability::Distribution::kNormal, Variability::Distribution::kLognormal}) {
    Stragglers s;
    s.variability = {d, 0.1};
    s.seed = 11;
    const Moments m = Draws(s, 40, 1000);
    EXPECT_NEAR(m.mean, 1.0, 0.002) << ToString(d);
    EXPECT_NEAR(m.cv, 0.1, 0.002) << ToString(d);
  }
}

// slow_fraction: about `fraction` of the ranks are slow, the same ones in every step, and the
// per-step spread has the stated cv around each rank's mode.
TEST(Stragglers, SlowFractionPicksPersistentSlowRanks) {
  Stragglers s;
  s.variability = {Variability::Distribution::kSlowFraction, 0, 0.1, 1.5};
  s.seed = 5;
  ASSERT_TRUE(s.random());
  int slow = 0;
  const int ranks = 20000;
  for (int r = 0; r < ranks; ++r) {
    const double x = StragglerFactor(s, r, 0);
    ASSERT_TRUE(x == 1.0 || x == 1.5) << x;
    slow += x == 1.5;
    EXPECT_EQ(StragglerFactor(s, r, 7), x) << "rank " << r;
  }
  // Binomial(20000, 0.1): standard deviation 42.
  EXPECT_NEAR(slow, 0.1 * ranks, 170);
  s.variability.cv = 0.05;
  const Moments m = Draws(s, 400, 100);
  // Mean 1 + 0.1 * 0.5; cv of the mixture: sqrt(E[X^2] - E[X]^2) / E[X].
  const double mean = 1.05, ex2 = (0.9 * 1 + 0.1 * 2.25) * (1 + 0.05 * 0.05);
  EXPECT_NEAR(m.mean, mean, 0.02);
  EXPECT_NEAR(m.cv, std::sqrt(ex2 - mean * mean) / mean, 0.02);
}

TEST(Stragglers, SeedRankAndStepEachChangeTheDraw) {
  Stragglers s;
  s.variability = {Variability::Distribution::kLognormal, 0.2};
  s.seed = 1;
  const double x = StragglerFactor(s, 0, 0);
  EXPECT_EQ(x, StragglerFactor(s, 0, 0));
  EXPECT_NE(x, StragglerFactor(s, 1, 0));
  EXPECT_NE(x, StragglerFactor(s, 0, 1));
  Stragglers t = s;
  t.seed = 2;
  EXPECT_NE(x, StragglerFactor(t, 0, 0));
}

TEST(Stragglers, FixedOnlyIsExactAndOnlyOnItsRank) {
  Stragglers s;
  s.fixed = {{2, 1.5}, {5, 3.0}};
  EXPECT_FALSE(s.random());
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(StragglerFactor(s, 0, step), 1.0);
    EXPECT_EQ(StragglerFactor(s, 2, step), 1.5);
    EXPECT_EQ(StragglerFactor(s, 5, step), 3.0);
  }
}

}  // namespace
}  // namespace pipetwin::models
