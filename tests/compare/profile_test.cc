// Calibration profiles: parsing errors name the file and the key; the cost table is the
// measured medians plus the executor's overheads (sim/profile.h).
#include "sim/profile.h"

#include <gtest/gtest.h>

#include <fstream>

#include "schedule/build.h"

namespace pipetwin {
namespace {

Schedule Build(const std::string& schedule) {
  auto job = ParseJob(
      "schedule: " + schedule + "\nmicrobatches: 4\nparallel: {pp: 2}\ncosts: {forward_ms: 1}\n",
      "job.yaml");
  EXPECT_TRUE(job.ok()) << job.error().message;
  return job->schedule;
}

// What `pipetwin calibrate` writes for 1f1b on pp 2 (numbers from a real run).
constexpr const char* kProfile = R"(version: 1
backend: cpu
job: "pp2.yaml"
schedule: "1f1b"
microbatches: 4
parallel: {pp: 2, dp: 1, tp: 1, cp: 1, sp: false}
stages:
  - {stage: 0, forward_ms: 36.995, backward_ms: 54.6876, optimizer_ms: 1.89258, transfer_bytes: 131072, dp_reduce_ms: 0, dp_reduce_bytes: 0}
  - {stage: 1, forward_ms: 35.6019, backward_ms: 60.2688, optimizer_ms: 2.01767, transfer_bytes: 131072, dp_reduce_ms: 0, dp_reduce_bytes: 0}
engine:
  action_overhead_ms: 0.011272
  step_start_ms: 0.107415
sync_ms: 0.000711
p2p:
  latency_ms: 0.00417729
  bandwidth_bytes_per_ms: 1.78547e+06
  samples:
    - {bytes: 8, ms: 0.0004655}
    - {bytes: 131072, ms: 0.0816243}
)";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(ProfileTest, MeasuredMediansPlusOverheads) {
  auto t = ParseProfile(kProfile, "p.yaml", Build("1f1b"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->table.stages.size(), 2u);
  const double copy_ms = 131072 / 1.78547e6;  // a received tensor, copied at the receiver
  // Stage 0 receives gradients (its B pays the copy), stage 1 activations (its F).
  EXPECT_EQ(t->table.stages[0].forward, SimTime::FromMillis(36.995 + 0.011272));
  EXPECT_EQ(t->table.stages[0].backward, SimTime::FromMillis(54.6876 + 0.011272 + copy_ms));
  EXPECT_EQ(t->table.stages[1].forward, SimTime::FromMillis(35.6019 + 0.011272 + copy_ms));
  EXPECT_EQ(t->table.stages[1].backward, SimTime::FromMillis(60.2688 + 0.011272));
  EXPECT_EQ(t->table.stages[1].optimizer, SimTime::FromMillis(2.01767 + 0.011272));
  EXPECT_EQ(t->table.stages[0].send_forward, SimTime::FromMillis(0.00417729));
  EXPECT_EQ(t->table.stages[0].send_bytes, 131072);
  EXPECT_EQ(t->table.sync, SimTime::FromMillis(0.000711 + 0.107415));
}

TEST(ProfileTest, TimesBeyondTheSimulatedStepLimitAreBadInput) {
  // 2^50 bytes at 1e-9 bytes/ms: each copy alone would overflow int64 nanoseconds.
  const std::string text =
      Replace(Replace(kProfile, "transfer_bytes: 131072", "transfer_bytes: 1125899906842624"),
              "bandwidth_bytes_per_ms: 1.78547e+06", "bandwidth_bytes_per_ms: 1e-9");
  auto t = ParseProfile(text, "p.yaml", Build("1f1b"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kBadInput);
  EXPECT_NE(t.error().message.find("the simulated step is limited to 1e12 ms"), std::string::npos)
      << t.error().message;
}

TEST(ProfileTest, ErrorsNameTheFileAndTheKey) {
  const Schedule s = Build("1f1b");
  struct Case {
    std::string text, expect;
  } cases[] = {
      {Replace(kProfile, "sync_ms:", "sync_msec:"), "unknown key 'sync_msec'"},
      {Replace(kProfile, "forward_ms: 36.995", "forward_ms: -1"), "stages[0].forward_ms"},
      {Replace(kProfile, "backward_ms: 60.2688, ", ""), "stages[1].backward_ms: required"},
      {Replace(kProfile,
               "  - {stage: 1, forward_ms: 35.6019, backward_ms: 60.2688, optimizer_ms: "
               "2.01767, transfer_bytes: 131072, dp_reduce_ms: 0, dp_reduce_bytes: 0}\n",
               ""),
       "must list 2 stages"},
      {Replace(kProfile, "{pp: 2,", "{pp: 4,"), "parallel.pp"},
      {Replace(kProfile, "version: 1", "version: 2"), "version"},
      {Replace(kProfile, "latency_ms: 0.00417729", "latency: 0.00417729"), "p2p"},
      {Replace(kProfile, "bytes: 8, ms:", "bytes: 8, msec:"), "p2p.samples[0]"},
      {Replace(kProfile, "action_overhead_ms: 0.011272", "action_overhead_ms: fast"),
       "engine.action_overhead_ms"},
      {"stages: [", "not valid YAML"},
  };
  for (const Case& c : cases) {
    auto t = ParseProfile(c.text, "prof.yaml", s);
    ASSERT_FALSE(t.ok()) << c.expect;
    EXPECT_EQ(t.error().exit_status(), 2);
    EXPECT_NE(t.error().message.find("prof.yaml"), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find(c.expect), std::string::npos) << t.error().message;
  }
}

TEST(ProfileTest, ASplitBackwardNeedsIAndW) {
  // A 1f1b profile has no I and W: zb-h1 cannot use it.
  auto t = ParseProfile(kProfile, "prof.yaml", Build("zb-h1"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("backward_input_ms: required"), std::string::npos)
      << t.error().message;
  // With I and W, B is their sum where it was not measured.
  std::string text =
      Replace(kProfile, "backward_ms: 54.6876", "backward_input_ms: 30, backward_weight_ms: 25");
  text = Replace(text, "backward_ms: 60.2688", "backward_input_ms: 31, backward_weight_ms: 26");
  auto z = ParseProfile(text, "prof.yaml", Build("zb-h1"));
  ASSERT_TRUE(z.ok()) << z.error().message;
  EXPECT_EQ(z->table.stages[1].backward_weight, SimTime::FromMillis(26 + 0.011272));
  EXPECT_EQ(z->table.stages[1].backward, SimTime::FromMillis(57 + 0.011272));
}

// A calibrated I contains the recomputed forward or not: a profile states the recompute it was
// measured with, and a job with another setting is refused (absent: not checked).
TEST(ProfileTest, RecomputeMustMatchTheJob) {
  auto job = ParseJob(
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 2}\n"
      "model: {preset: tiny}\ntraining: {micro_batch: 1, recompute: full}\n",
      "job.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  auto full = ParseProfile(std::string(kProfile) + "recompute: full\n", "p.yaml", job->schedule);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->recompute, "full");
  EXPECT_TRUE(CheckProfileMatchesJob(*full, *job, "p.yaml").ok());
  auto none = ParseProfile(std::string(kProfile) + "recompute: none\n", "p.yaml", job->schedule);
  ASSERT_TRUE(none.ok()) << none.error().message;
  const Status st = CheckProfileMatchesJob(*none, *job, "p.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("p.yaml: recompute"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("training.recompute: full"), std::string::npos);
  auto unstated = ParseProfile(kProfile, "p.yaml", job->schedule);
  ASSERT_TRUE(unstated.ok());
  EXPECT_TRUE(CheckProfileMatchesJob(*unstated, *job, "p.yaml").ok());
  auto bad = ParseProfile(std::string(kProfile) + "recompute: some\n", "p.yaml", job->schedule);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("recompute"), std::string::npos) << bad.error().message;
}

// The rates calibrate writes (stages[].*_gflops, roofline) are informational: kept, checked,
// and optional, so that a profile written before them still loads.
TEST(ProfileTest, RatesAreInformationalAndOptional) {
  auto old = ParseProfile(kProfile, "p.yaml", Build("1f1b"));
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_TRUE(old->gflops.empty());
  EXPECT_FALSE(old->roofline.has_value());
  EXPECT_EQ(old->backend, "cpu");

  std::string text = Replace(kProfile, "dp_reduce_bytes: 0}\n  - {stage: 1",
                             "dp_reduce_bytes: 0, forward_gflops: 12.5, backward_gflops: 17}\n"
                             "  - {stage: 1");
  text += "roofline: {gemm_gflops: 95.5, memory_gb_s: 11.25}\n";
  auto rated = ParseProfile(text, "p.yaml", Build("1f1b"));
  ASSERT_TRUE(rated.ok()) << rated.error().message;
  EXPECT_EQ(rated->gflops.size(), 2u);
  EXPECT_EQ(rated->gflops.at({0, ActionKind::kForward}), 12.5);
  EXPECT_EQ(rated->gflops.at({0, ActionKind::kBackward}), 17);
  ASSERT_TRUE(rated->roofline.has_value());
  EXPECT_EQ(rated->roofline->gemm_gflops, 95.5);
  EXPECT_EQ(rated->roofline->memory_gb_s, 11.25);
  EXPECT_EQ(rated->listed_ms.at({1, ActionKind::kBackward}), 60.2688);
  // The cost table is the same with and without them.
  EXPECT_EQ(rated->table.stages[0].forward, old->table.stages[0].forward);
  EXPECT_EQ(rated->table.stages[1].backward, old->table.stages[1].backward);

  const Schedule s = Build("1f1b");
  struct Case {
    std::string text, expect;
  } cases[] = {
      {Replace(kProfile, "forward_ms: 36.995,", "forward_ms: 36.995, forward_gflops: -1,"),
       "stages[0].forward_gflops: must be a number in (0, 1e+18] (GFLOP/s), got '-1'"},
      {Replace(kProfile, "forward_ms: 36.995,", "forward_ms: 36.995, forward_gflops: 0,"),
       "stages[0].forward_gflops"},
      {Replace(kProfile, "forward_ms: 35.6019,", "forward_ms: 35.6019, backward_gflops: .nan,"),
       "stages[1].backward_gflops"},
      {Replace(kProfile, "forward_ms: 36.995,", "forward_ms: 36.995, forward_gflop: 3,"),
       "unknown key 'forward_gflop'"},
      {Replace(kProfile, "forward_ms: 36.995,", "forward_ms: 36.995, backward_input_gflops: 3,"),
       "stages[0].backward_input_gflops: given without backward_input_ms"},
      {std::string(kProfile) + "roofline: {gemm_gflops: abc}\n",
       "roofline.gemm_gflops: must be a number in (0, 1e+18] (GFLOP/s), got 'abc'"},
      {std::string(kProfile) + "roofline: {gemm_gflops: 9, memory_gb_s: -2}\n",
       "roofline.memory_gb_s"},
      {std::string(kProfile) + "roofline: {gemm_gflops: 9, flops: 2}\n",
       "roofline: unknown key 'flops'"},
      {std::string(kProfile) + "roofline: 95\n", "roofline"},
  };
  for (const Case& c : cases) {
    for (const bool with_job : {true, false}) {
      auto t = with_job ? ParseProfile(c.text, "prof.yaml", s)
                        : ParseProfileWithoutJob(c.text, "prof.yaml");
      ASSERT_FALSE(t.ok()) << c.expect;
      EXPECT_EQ(t.error().exit_status(), 2);
      EXPECT_NE(t.error().message.find("prof.yaml:"), std::string::npos) << t.error().message;
      EXPECT_NE(t.error().message.find(c.expect), std::string::npos) << t.error().message;
    }
  }
}

// Without a job (compare --profile) the values are checked, not what needs the schedule.
TEST(ProfileTest, WithoutAJobChecksValuesNotTheSchedule) {
  const std::string four = Replace(kProfile, "{pp: 2,", "{pp: 4,");
  auto p = ParseProfileWithoutJob(four, "p.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->table.stages.empty());
  EXPECT_EQ(p->medians.at({0, ActionKind::kForward}), 36.995);
  EXPECT_EQ(p->listed_ms.size(), 6u);                              // F, B and OPT of 2 stages
  EXPECT_FALSE(ParseProfile(four, "p.yaml", Build("1f1b")).ok());  // with the job: parallel.pp
  auto bad = ParseProfileWithoutJob(Replace(kProfile, "optimizer_ms: 1.89258", "optimizer_ms: x"),
                                    "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("stages[0].optimizer_ms"), std::string::npos);
  auto missing = LoadProfileWithoutJob("/nonexistent/profile.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().exit_status(), 2);
  EXPECT_NE(missing.error().message.find("/nonexistent/profile.yaml"), std::string::npos);
  EXPECT_NE(missing.error().message.find("--profile"), std::string::npos);
}

TEST(ProfileTest, MissingFileIsBadInput) {
  auto t = LoadProfile("/nonexistent/profile.yaml", Build("1f1b"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().exit_status(), 2);
  EXPECT_NE(t.error().message.find("/nonexistent/profile.yaml"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin

namespace pipetwin {
namespace {

TEST(ProfileTest, ReplayReplacesTheListedMedians) {
  const ActionMedians measured = {{{1, ActionKind::kForward}, 20.0}};
  auto t = ParseProfile(kProfile, "p.yaml", Build("1f1b"), &measured);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->table.stages[1].forward, SimTime::FromMillis(20.0 + 0.011272 + 131072 / 1.78547e6));
  EXPECT_EQ(t->table.stages[0].forward, SimTime::FromMillis(36.995 + 0.011272));  // not listed
}

}  // namespace
}  // namespace pipetwin

namespace pipetwin {
namespace {

TEST(ProfileTest, JitterIsOneFactorPerPipelineRankAndStep) {
  const std::string ok = std::string(kProfile) + "jitter:\n  - [1.1, 0.9]\n  - [1, 1.25]\n";
  auto t = ParseProfile(ok, "p.yaml", Build("1f1b"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->jitter.size(), 2u);
  EXPECT_EQ(t->jitter[0], (std::vector<double>{1.1, 0.9}));
  EXPECT_EQ(t->jitter[1], (std::vector<double>{1.0, 1.25}));
  struct Case {
    std::string tail, expect;
  } cases[] = {
      {"jitter: 1.5\n", "jitter: must be a list"},
      {"jitter:\n  - [1.1, 0.9]\n  - [1.0]\n", "jitter[1]: must list 2 factors"},
      {"jitter:\n  - [1.1, 0]\n", "jitter[0][1]"},
      {"jitter:\n  - [fast, 1]\n", "jitter[0][0]"},
  };
  for (const Case& c : cases) {
    auto e = ParseProfile(std::string(kProfile) + c.tail, "prof.yaml", Build("1f1b"));
    ASSERT_FALSE(e.ok()) << c.expect;
    EXPECT_EQ(e.error().exit_status(), 2);
    EXPECT_NE(e.error().message.find(c.expect), std::string::npos) << e.error().message;
  }
}

TEST(ProfileTest, ScaleComputeByRankScalesComputeOnly) {
  const Schedule s = Build("1f1b");  // stage k on pipeline rank k
  auto t = ParseProfile(kProfile, "p.yaml", s);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const CostTable x = ScaleComputeByRank(t->table, s, {2.0, 0.5});
  EXPECT_EQ(x.stages[0].forward, SimTime::FromMillis(2.0 * t->table.stages[0].forward.ToMillis()));
  EXPECT_EQ(x.stages[0].backward,
            SimTime::FromMillis(2.0 * t->table.stages[0].backward.ToMillis()));
  EXPECT_EQ(x.stages[1].forward, SimTime::FromMillis(0.5 * t->table.stages[1].forward.ToMillis()));
  EXPECT_EQ(x.stages[1].optimizer,
            SimTime::FromMillis(0.5 * t->table.stages[1].optimizer.ToMillis()));
  // Links and the step's fixed costs are not the cores' speed.
  EXPECT_EQ(x.stages[0].send_forward, t->table.stages[0].send_forward);
  EXPECT_EQ(x.sync, t->table.sync);
}

// One rank, one microbatch: a step is F + B + OPT (nothing else costs time here), so each
// jitter row plays a step of 32 ms × its factor, and the report is run's median (the upper
// middle of the sorted steps).
TEST(ProfileTest, JitterReportsTheMedianOfThePlayedSteps) {
  auto job = ParseJob(
      "schedule: gpipe\nmicrobatches: 1\nparallel: {pp: 1}\ncosts: {forward_ms: 1}\n", "job.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  const std::string base = R"(version: 1
stages:
  - {stage: 0, forward_ms: 10, backward_ms: 20, optimizer_ms: 2}
engine: {action_overhead_ms: 0, step_start_ms: 0}
sync_ms: 0
)";
  const std::string path = ::testing::TempDir() + "/jitter_profile.yaml";
  struct Case {
    std::string rows;
    double median, min, max;
  } cases[] = {
      {"  - [1]\n  - [2]\n  - [0.5]\n  - [1.5]\n  - [3]\n", 48, 16, 96},  // 16 32 48 64 96
      {"  - [1]\n  - [2]\n  - [0.5]\n  - [1.5]\n", 48, 16, 64},           // 16 32 48 64
      {"", 32, 0, 0},                                                     // no jitter
  };
  for (const Case& c : cases) {
    {
      std::ofstream out(path);
      out << base << (c.rows.empty() ? "" : "jitter:\n" + c.rows);
    }
    auto r = SimulateWithProfile(*job, path, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_DOUBLE_EQ(r->report.iteration_time_ms, c.median) << c.rows;
    if (c.rows.empty()) {
      EXPECT_FALSE(r->report.profile->has_jitter);
      continue;
    }
    const ProfileUse& j = *r->report.profile;
    EXPECT_DOUBLE_EQ(j.nominal_iteration_time_ms, 32.0);
    EXPECT_DOUBLE_EQ(j.jitter_min_ms, c.min);
    EXPECT_DOUBLE_EQ(j.jitter_max_ms, c.max);
  }
}

}  // namespace
}  // namespace pipetwin
