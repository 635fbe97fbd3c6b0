// training.dp_sync played over given step times: hand-worked examples of two workers, one
// three times slower than the other (10 ms and 30 ms steps), four steps.
#include "models/dp_sync.h"

#include <gtest/gtest.h>

#include <vector>

namespace pipetwin::models {
namespace {

const std::vector<std::vector<double>> kSteps = {{10, 10, 10, 10}, {30, 30, 30, 30}};

TEST(DpSyncTest, SyncWaitsForTheSlowestEveryStep) {
  const DpSyncTimes t = PlayDpSync(kSteps, DpSync::kSync, 0);
  EXPECT_EQ(t.start_ms[0], (std::vector<double>{0, 30, 60, 90}));
  EXPECT_EQ(t.end_ms[0], (std::vector<double>{10, 40, 70, 100}));
  EXPECT_EQ(t.start_ms[1], (std::vector<double>{0, 30, 60, 90}));
  EXPECT_EQ(t.staleness[0], (std::vector<int>{0, 0, 0, 0}));
  const DpSyncReport r = SummarizeDpSync(t, DpSync::kSync, 0, 0, 8);
  // Start to start: 3 intervals of 30 ms for both workers.
  ASSERT_EQ(r.worker_steps_per_s.size(), 2u);
  EXPECT_NEAR(r.worker_steps_per_s[0], 1000.0 / 30, 1e-9);
  EXPECT_NEAR(r.worker_steps_per_s[1], 1000.0 / 30, 1e-9);
  EXPECT_NEAR(r.samples_per_s, 2 * 8 * 1000.0 / 30, 1e-9);
  EXPECT_EQ(r.staleness_max, 0);
  EXPECT_EQ(r.staleness_bound, 0);
  EXPECT_EQ(r.mode, "sync");
}

TEST(DpSyncTest, StaleZeroIsSyncExactly) {
  const DpSyncTimes a = PlayDpSync(kSteps, DpSync::kSync, 0);
  const DpSyncTimes b = PlayDpSync(kSteps, DpSync::kStale, 0);
  EXPECT_EQ(a.start_ms, b.start_ms);
  EXPECT_EQ(a.end_ms, b.end_ms);
  EXPECT_EQ(a.staleness, b.staleness);
}

// Stale 1: the fast worker's step k waits for update k - 2 (the slow worker's step k - 2,
// ending at 30, 60): it starts at 0, 10, 30, 60 and computes on parameters one update old.
TEST(DpSyncTest, StaleOneRunsOneStepAhead) {
  const DpSyncTimes t = PlayDpSync(kSteps, DpSync::kStale, 1);
  EXPECT_EQ(t.start_ms[0], (std::vector<double>{0, 10, 30, 60}));
  EXPECT_EQ(t.start_ms[1], (std::vector<double>{0, 30, 60, 90}));
  EXPECT_EQ(t.staleness[0], (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(t.staleness[1], (std::vector<int>{0, 0, 0, 0}));
  const DpSyncReport r = SummarizeDpSync(t, DpSync::kStale, 1, 0, 1);
  EXPECT_NEAR(r.worker_steps_per_s[0], 3 / 0.060, 1e-9);
  EXPECT_NEAR(r.worker_steps_per_s[1], 3 / 0.090, 1e-9);
  EXPECT_NEAR(r.steps_per_s, (50 + 100.0 / 3) / 2, 1e-9);
  EXPECT_DOUBLE_EQ(r.staleness_mean, 3.0 / 8);
  EXPECT_EQ(r.staleness_max, 1);
  EXPECT_EQ(r.staleness_bound, 1);
}

// Async: nobody waits. The fast worker's step 3 starts at 30, when update 0 (at 30) is in:
// staleness 0, 1, 2, 2; the slow one always finds the previous step's update.
TEST(DpSyncTest, AsyncNeverWaits) {
  const DpSyncTimes t = PlayDpSync(kSteps, DpSync::kAsync, 0);
  EXPECT_EQ(t.start_ms[0], (std::vector<double>{0, 10, 20, 30}));
  EXPECT_EQ(t.start_ms[1], (std::vector<double>{0, 30, 60, 90}));
  EXPECT_EQ(t.staleness[0], (std::vector<int>{0, 1, 2, 2}));
  EXPECT_EQ(t.staleness[1], (std::vector<int>{0, 0, 0, 0}));
  const DpSyncReport r = SummarizeDpSync(t, DpSync::kAsync, 0, 1, 1);  // warm-up 1
  EXPECT_EQ(r.steps, 3);
  EXPECT_NEAR(r.worker_steps_per_s[0], 2 / 0.020, 1e-9);
  EXPECT_DOUBLE_EQ(r.staleness_mean, 5.0 / 6);
  EXPECT_EQ(r.staleness_max, 2);
  EXPECT_EQ(r.staleness_bound, -1);
}

}  // namespace
}  // namespace pipetwin::models
