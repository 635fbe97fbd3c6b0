// Simulator against closed forms and hand-worked timelines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "models/stragglers.h"
#include "schedule/generators.h"
#include "schedule/lower.h"
#include "schedule/report.h"
#include "schedule/trace.h"
#include "schedule/trace_read.h"
#include "sim/engine.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

struct Costs {
  double f = 1, i = 1, w = 1, p2p = 0, opt = 0, dp_reduce = 0;
};

SimResult Sim(const std::string& schedule, int pp, int m, int vpp, Costs c, bool sync = true,
              int dp = 1) {
  const std::string yaml =
      "schedule: " + schedule + "\nmicrobatches: " + std::to_string(m) +
      "\noptimizer_sync: " + (sync ? "true" : "false") + "\nparallel: {pp: " + std::to_string(pp) +
      ", vpp: " + std::to_string(vpp) + ", dp: " + std::to_string(dp) +
      "}\ncosts: {forward_ms: " + std::to_string(c.f) +
      ", backward_input_ms: " + std::to_string(c.i) +
      ", backward_weight_ms: " + std::to_string(c.w) + ", p2p_ms: " + std::to_string(c.p2p) +
      ", optimizer_ms: " + std::to_string(c.opt) +
      ", dp_reduce_ms: " + std::to_string(c.dp_reduce) + "}\n";
  auto job = ParseJob(yaml, "test.yaml");
  EXPECT_TRUE(job.ok()) << job.error().message;
  auto r = Simulate(*job);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(*r);
}

constexpr double kEps = 1e-9;

struct Shape {
  int pp, m;
};
const Shape kShapes[] = {{1, 1},  {2, 2}, {2, 5},  {4, 4},  {4, 8},
                         {4, 13}, {8, 8}, {8, 32}, {16, 64}};

TEST(ClosedForm, GpipeAnd1F1BBubbleFraction) {
  for (const char* name : {"gpipe", "1f1b"}) {
    for (const Shape& s : kShapes) {
      const SimResult r = Sim(name, s.pp, s.m, 1, {1.0, 1.5, 0.5});
      const double p = s.pp, m = s.m;
      EXPECT_NEAR(r.report.bubble_fraction, (p - 1) / (m + p - 1), kEps)
          << name << " pp " << s.pp << " m " << s.m;
      EXPECT_NEAR(r.report.iteration_time_ms, (m + p - 1) * 3.0, kEps);
    }
  }
}

TEST(ClosedForm, InterleavedBubbleIsOneChunkPerStage) {
  struct Case {
    int pp, m, v;
  };
  for (const Case& c : {Case{2, 4, 2}, Case{4, 8, 2}, Case{4, 16, 4}, Case{8, 16, 2},
                        Case{8, 32, 4}, Case{3, 9, 3}}) {
    const double f = 1.0, b = 2.0;  // per chunk
    const SimResult r = Sim("interleaved-1f1b", c.pp, c.m, c.v, {f, 1.0, 1.0});
    const double busy = c.m * c.v * (f + b);
    EXPECT_NEAR(r.report.iteration_time_ms - busy, (c.pp - 1) * (f + b), kEps)
        << "pp " << c.pp << " m " << c.m << " v " << c.v;
  }
}

TEST(ClosedForm, ZbH1BubbleTime) {
  for (const Shape& s : kShapes) {
    if (s.m < s.pp) continue;
    for (Costs c : {Costs{1, 1, 1}, Costs{1.0, 1.2, 0.8}, Costs{2, 2, 1}}) {
      const SimResult r = Sim("zb-h1", s.pp, s.m, 1, c);
      const double busy = s.m * (c.f + c.i + c.w);
      EXPECT_NEAR(r.report.iteration_time_ms - busy, (s.pp - 1) * (c.f + c.i - c.w), 1e-6)
          << "pp " << s.pp << " m " << s.m << " F " << c.f << " I " << c.i << " W " << c.w;
    }
  }
}

TEST(ClosedForm, ZbH2BubbleTimeWithoutOptimizerSync) {
  for (const Shape& s : kShapes) {
    if (s.m < 2 * s.pp - 1) continue;
    for (Costs c : {Costs{1, 1, 1}, Costs{1.5, 1.5, 1.0}}) {
      const SimResult r = Sim("zb-h2", s.pp, s.m, 1, c, /*sync=*/false);
      const double busy = s.m * (c.f + c.i + c.w);
      EXPECT_NEAR(r.report.iteration_time_ms - busy, (s.pp - 1) * (c.f + c.i - 2 * c.w), 1e-6)
          << "pp " << s.pp << " m " << s.m;
    }
  }
  // F = I = W with enough microbatches: no bubble at all.
  const SimResult r = Sim("zb-h2", 4, 8, 1, {1, 1, 1}, false);
  EXPECT_NEAR(r.report.bubble_fraction, 0.0, kEps);
}

TEST(ClosedForm, ZbvBeatsZbH1AndDualPipeVIsNoWorse) {
  for (const Shape& s : kShapes) {
    if (s.m < 2 * s.pp) continue;
    const SimResult h1 = Sim("zb-h1", s.pp, s.m, 1, {1, 1, 1});
    const SimResult zbv = Sim("zbv", s.pp, s.m, 2, {0.5, 0.5, 0.5});
    const SimResult dpv = Sim("dualpipev", s.pp, s.m, 2, {0.5, 0.5, 0.5});
    if (s.pp > 1) {
      EXPECT_LT(zbv.report.iteration_time_ms, h1.report.iteration_time_ms)
          << "pp " << s.pp << " m " << s.m;
    }
    EXPECT_LE(dpv.report.iteration_time_ms, h1.report.iteration_time_ms + kEps)
        << "pp " << s.pp << " m " << s.m;
  }
}

// GPipe over 4 stages, 8 microbatches, F 1, I 1.5, W 0.5 ms, with `stragglers` as the value of
// execution.stragglers.
Expected<ResolvedJob> GpipeWithStragglers(const std::string& stragglers) {
  return ParseJob(
      "schedule: gpipe\nmicrobatches: 8\nparallel: {pp: 4}\n"
      "costs: {forward_ms: 1, backward_input_ms: 1.5, backward_weight_ms: 0.5}\n"
      "execution: {stragglers: " +
          stragglers + "}\n",
      "test.yaml");
}

// execution.stragglers: GPipe with one stage k times slower (k >= 1) is a flow shop whose
// slow stage paces both passes: T = (pp - 1 + m k)(F + B), with F, B the nominal times.
TEST(ClosedForm, GpipeWithOneFixedStraggler) {
  const int pp = 4, m = 8;
  const double f = 1.0, b = 2.0;  // B = I + W = 1.5 + 0.5
  for (int rank : {0, 2, 3}) {
    for (double k : {1.5, 3.0}) {
      auto job = GpipeWithStragglers("[{rank: " + std::to_string(rank) +
                                     ", slowdown: " + std::to_string(k) + "}]");
      ASSERT_TRUE(job.ok()) << job.error().message;
      auto r = Simulate(*job);
      ASSERT_TRUE(r.ok());
      EXPECT_NEAR(r->report.iteration_time_ms, (pp - 1 + m * k) * (f + b), kEps)
          << "rank " << rank << " slowdown " << k;
    }
  }
  // Without a straggler: (pp - 1 + m)(F + B).
  EXPECT_NEAR(Sim("gpipe", pp, m, 1, {1.0, 1.5, 0.5}).report.iteration_time_ms,
              (pp - 1 + m) * (f + b), kEps);
}

// execution.stragglers' slow_fraction draws which ranks are slow once per (seed, rank), the same
// in every step. GPipe's step with stage factors k_s is a flow shop of identical jobs: (sum of
// k_s + (m - 1) max k_s)(F + B); one slow rank gives the fixed-straggler form above, all slow
// (fraction 1) k times the step.
TEST(ClosedForm, GpipeWithSlowFractionStragglers) {
  const int pp = 4, m = 8;
  const double f = 1.0, b = 2.0, k = 2.0;
  int mixed = 0;
  for (const char* fraction : {"1", "0.5"}) {
    for (int seed = 1; seed <= 8; ++seed) {
      auto job = GpipeWithStragglers(
          "{variability: {distribution: slow_fraction, fraction: " + std::string(fraction) +
          ", slowdown: 2}, seed: " + std::to_string(seed) + "}");
      ASSERT_TRUE(job.ok()) << job.error().message;
      double sum = 0, worst = 0;
      int slow = 0;
      for (int r = 0; r < pp; ++r) {
        const double x = models::StragglerFactor(job->config.stragglers, r, 0);
        ASSERT_TRUE(x == 1.0 || x == k) << x;
        EXPECT_EQ(x, models::StragglerFactor(job->config.stragglers, r, 5));
        sum += x;
        worst = std::max(worst, x);
        slow += x == k;
      }
      auto r = Simulate(*job);
      ASSERT_TRUE(r.ok());
      EXPECT_NEAR(r->report.iteration_time_ms, (sum + (m - 1) * worst) * (f + b), kEps)
          << "fraction " << fraction << " seed " << seed;
      if (std::string(fraction) == "1") {
        EXPECT_EQ(slow, pp);
      }
      mixed += slow > 0 && slow < pp;
    }
  }
  EXPECT_GT(mixed, 0);  // some seeds draw a mix of slow and healthy ranks
}

// With dp > 1 a pipeline rank plays the slowest of its data-parallel replicas: world rank 3
// of pp 2 x dp 2 (Megatron order: DP inside PP) is pipeline rank 1 of replica 1.
TEST(ClosedForm, StragglerOfAReplicaSlowsItsPipelineRank) {
  auto job = ParseJob(
      "schedule: gpipe\nmicrobatches: 4\nparallel: {pp: 2, dp: 2}\n"
      "costs: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n"
      "execution: {stragglers: [{rank: 3, slowdown: 1.5}]}\n",
      "test.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  const std::vector<double> f = StragglerFactors(*job, 0);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0], 1.0);
  EXPECT_EQ(f[1], 1.5);
  auto r = Simulate(*job);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->report.iteration_time_ms, (2 - 1 + 4 * 1.5) * 3.0, kEps);
}

// A random part: the prediction is the median of one play per measured step, and the same
// seed gives the same prediction.
TEST(Stragglers, RandomPartPlaysTheMeasuredSteps) {
  const std::string yaml =
      "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\n"
      "costs: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n"
      "execution: {steps: 9, warmup: 1, stragglers: {variability: {distribution: lognormal, "
      "cv: 0.2}, seed: 5}}\n";
  auto job = ParseJob(yaml, "test.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  auto a = Simulate(*job);
  auto b = Simulate(*job);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->report.iteration_time_ms, b->report.iteration_time_ms);
  // Each play is the step at that step's factors: the reported one is one of them.
  std::vector<double> plays;
  for (int step = 1; step < 10; ++step) {
    const CostTable t =
        ScaleComputeByRank(JobCostTable(*job), job->schedule, StragglerFactors(*job, step));
    const SimStats st = RunEngine(job->schedule, t, {.optimizer_sync = true}, nullptr);
    plays.push_back(static_cast<double>(IterationNs(true, StepRecordOf(st))) * 1e-6);
  }
  std::sort(plays.begin(), plays.end());
  EXPECT_NEAR(a->report.iteration_time_ms, plays[4], 1e-6);
  EXPECT_NE(plays.front(), plays.back());
}

// A stage's factor is the largest of its ranks' (StragglerFactor, rank by rank: the
// reference), with fixed slowdowns looked up once rather than per rank and draw.
TEST(Stragglers, StageFactorIsTheSlowestOfItsRanks) {
  for (const char* variability :
       {"", ", variability: {distribution: normal, cv: 0.2}",
        ", variability: {distribution: slow_fraction, fraction: 0.3, slowdown: 2}"}) {
    auto job =
        ParseJob(std::string("schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4, dp: 3, tp: 2}\n"
                             "costs: {forward_ms: 1}\ncluster: {rank_order: pp-dp-cp-tp}\n"
                             "execution: {stragglers: {fixed: [{rank: 5, slowdown: 1.7}, "
                             "{rank: 22, slowdown: 3}], seed: 9") +
                     variability + "}}\n",
                 "test.yaml");
    ASSERT_TRUE(job.ok()) << job.error().message;
    const models::RankLayout layout(job->parallel(), job->config.cluster.rank_order);
    for (int step : {0, 4}) {
      std::vector<double> want(4, 0.0);
      for (int w = 0; w < 24; ++w) {
        double& x = want[static_cast<std::size_t>(layout.Coord(w).pp)];
        x = std::max(x, models::StragglerFactor(job->config.stragglers, w, step));
      }
      EXPECT_EQ(StragglerFactors(*job, step), want) << variability;
    }
  }
}

// With variability every measured step is played with a draw per world rank: steps x ranks
// and steps x schedule actions are bounded before anything runs, naming execution.steps.
TEST(Stragglers, PlaysAreBounded) {
  auto job = [](int steps, const std::string& parallel, int microbatches) {
    return ParseJob("schedule: 1f1b\nmicrobatches: " + std::to_string(microbatches) +
                        "\nparallel: " + parallel +
                        "\ncosts: {forward_ms: 1}\nexecution: {steps: " + std::to_string(steps) +
                        ", stragglers: {variability: {distribution: normal, cv: 0.1}}}\n",
                    "test.yaml");
  };
  // 2^20 ranks: 64 steps are 2^26 draws, the most allowed.
  const std::string wide = "{pp: 1, dp: 65536, tp: 16}";
  EXPECT_TRUE(job(64, wide, 1).ok());
  auto refused = job(65, wide, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().exit_status(), 2);
  EXPECT_NE(refused.error().message.find("test.yaml:5:"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("execution.steps: 65 steps x 1048576 world ranks = "
                                         "68157440;"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("at most 67108864"), std::string::npos);
  // Actions: the most steps the schedule's actions allow, and one more.
  auto fixed_only =
      ParseJob("schedule: 1f1b\nmicrobatches: 128\nparallel: {pp: 4}\ncosts: {forward_ms: 1}\n",
               "test.yaml");
  ASSERT_TRUE(fixed_only.ok()) << fixed_only.error().message;
  const auto actions = static_cast<std::int64_t>(fixed_only->schedule.NumActions());
  const int most = static_cast<int>(models::kMaxStragglerPlayActions / actions);
  ASSERT_LE(most, 100000);  // execution.steps' own limit
  EXPECT_TRUE(job(most, "{pp: 4}", 128).ok());
  auto too_many = job(most + 1, "{pp: 4}", 128);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find(" schedule actions = "), std::string::npos)
      << too_many.error().message;
  // Without variability one play stands for every step: any number of steps.
  EXPECT_TRUE(ParseJob("schedule: 1f1b\nmicrobatches: 64\nparallel: {pp: 4}\n"
                       "costs: {forward_ms: 1}\nexecution: {steps: 100000, "
                       "stragglers: [{rank: 1, slowdown: 2}]}\n",
                       "test.yaml")
                  .ok());
}

TEST(Inflight, PeaksPerRank) {
  for (const Shape& s : kShapes) {
    const SimResult g = Sim("gpipe", s.pp, s.m, 1, {});
    const SimResult a = Sim("1f1b", s.pp, s.m, 1, {});
    const SimResult h1 = Sim("zb-h1", s.pp, s.m, 1, {});
    for (int r = 0; r < s.pp; ++r) {
      EXPECT_EQ(g.report.ranks[static_cast<std::size_t>(r)].peak_inflight_microbatches, s.m);
      EXPECT_EQ(a.report.ranks[static_cast<std::size_t>(r)].peak_inflight_microbatches,
                std::min(s.pp - r, s.m));
      EXPECT_EQ(h1.report.ranks[static_cast<std::size_t>(r)].peak_inflight_microbatches,
                std::min(s.pp - r, s.m));
      // W lags r microbatches behind I, so r + 1 weight gradients wait at the peak.
      EXPECT_EQ(h1.report.ranks[static_cast<std::size_t>(r)].peak_pending_weight_grads,
                std::min(r + 1, s.m));
    }
    if (s.m >= 2 * s.pp - 1) {
      const SimResult h2 = Sim("zb-h2", s.pp, s.m, 1, {});
      for (int r = 0; r < s.pp; ++r) {
        EXPECT_EQ(h2.report.ranks[static_cast<std::size_t>(r)].peak_inflight_microbatches,
                  2 * (s.pp - r) - 1);
      }
    }
  }
}

// pp 2, m 2, 1F1B, F = 1, B = 2 (I = 1.5, W = 0.5), worked by hand:
//   rank 1: F0 [1,2]  B0 [2,4]  F1 [4,5]  B1 [5,7]
//   rank 0: F0 [0,1]  F1 [1,2]  B0 [4,6]  B1 [7,9]
TEST(HandWorked, OneF1BTwoRanks) {
  const SimResult r = Sim("1f1b", 2, 2, 1, {1.0, 1.5, 0.5});
  EXPECT_DOUBLE_EQ(r.report.iteration_time_ms, 9.0);
  const auto& r0 = r.timeline.events[0];
  std::vector<std::pair<std::string, std::int64_t>> compute;
  for (const auto& e : r0) {
    if (e.stream == Stream::kCompute) compute.emplace_back(e.action.ToString(), e.start_ns);
  }
  const std::vector<std::pair<std::string, std::int64_t>> want = {
      {"0F0", 0}, {"0F1", 1'000'000}, {"0B0", 4'000'000}, {"0B1", 7'000'000}, {"0OPT", 9'000'000}};
  EXPECT_EQ(compute, want);
  EXPECT_NEAR(r.report.ranks[0].bubble_fraction, 1.0 - 6.0 / 9.0, kEps);
}

// pp 2, m 1 with p2p d: F0 [0,1], transfer [1,1+d], F [1+d,2+d], B [2+d,4+d], transfer
// back, B [4+2d, 6+2d].
TEST(HandWorked, PointToPointLatency) {
  const SimResult r = Sim("1f1b", 2, 1, 1, {1.0, 1.0, 1.0, 0.25});
  EXPECT_NEAR(r.report.iteration_time_ms, 6.5, kEps);
}

// pp 4, m 8 ZB-H2 with F = I = W = 1 and synchronised optimizer steps: the parallelogram's
// skew shows as the makespan: rank 3 starts at 3 and the last rank ends at 3 + 24.
TEST(HandWorked, ZbH2MakespanVersusIterationTime) {
  const SimResult sync = Sim("zb-h2", 4, 8, 1, {1, 1, 1}, true);
  const SimResult nosync = Sim("zb-h2", 4, 8, 1, {1, 1, 1}, false);
  EXPECT_NEAR(nosync.report.iteration_time_ms, 24.0, kEps);
  EXPECT_NEAR(sync.report.iteration_time_ms, sync.report.makespan_ms, kEps);
  EXPECT_NEAR(sync.report.makespan_ms, 27.0, kEps);
}

TEST(Optimizer, SyncWaitsForTheSlowestRankAndReduction) {
  // 1F1B pp 2 m 2 as above (9 ms), optimizer 0.5 ms, dp reduction 3 ms per chunk: rank 1
  // finishes B1 at 7, its reduction at 10; rank 0 at 9 and 12. With sync, both step at 12.
  const SimResult r = Sim("1f1b", 2, 2, 1, {1.0, 1.5, 0.5, 0, 0.5, 3.0}, true, 2);
  EXPECT_NEAR(r.report.iteration_time_ms, 12.5, kEps);
  const SimResult n = Sim("1f1b", 2, 2, 1, {1.0, 1.5, 0.5, 0, 0.5, 3.0}, false, 2);
  EXPECT_NEAR(n.report.iteration_time_ms, 12.5, kEps);  // rank 0: 0 .. 12.5
  EXPECT_NEAR(n.report.ranks[1].span_ms, 10.5 - 1.0, kEps);
}

// Megatron-LM without --overlap-grad-reduce reduces every chunk after the pipeline flush
// (CostTable::reduce_after_backward): interleaved pp 4, vpp 2, m 8, F = 1, B = 2 per chunk,
// a 3 ms reduction per chunk and a 0.5 ms step. The compute timeline is the same either way;
// with the flag each rank's reductions start when its last backward ends and run back to back
// (2 x 3 ms), and its step follows them, so the rank ends at last backward + 6.5 ms. Without
// it, the chunk whose backward ends first reduces beside the other chunk's last backwards.
TEST(ReduceAfterBackward, ReductionsWaitForTheRanksLastGradient) {
  const GeneratorInfo* g = FindGenerator("interleaved-1f1b");
  ASSERT_NE(g, nullptr);
  auto s = g->generate({.pp = 4, .vpp = 2, .microbatches = 8});
  ASSERT_TRUE(s.ok());
  const Schedule lowered = Lower(*s, {.reduce_grad = true, .optimizer = true});
  AbstractCosts ac;
  ac.forward_ms = 1;
  ac.backward_input_ms = 1;
  ac.backward_weight_ms = 1;
  ac.dp_reduce_ms = 3;
  ac.optimizer_ms = 0.5;
  CostTable table = UniformCosts(ac, lowered.num_stages);
  auto play = [&](bool after) {
    table.reduce_after_backward = after;
    TimelineRecorder rec(lowered.num_ranks);
    RunEngine(lowered, table, {.optimizer_sync = false}, &rec);
    return rec.Take();
  };
  const Timeline overlapped = play(false);
  const Timeline deferred = play(true);
  int ranks_that_overlapped = 0;
  for (int r = 0; r < lowered.num_ranks; ++r) {
    auto compute = [&](const Timeline& t) {
      std::vector<std::pair<std::string, std::int64_t>> out;
      for (const auto& e : t.events[static_cast<std::size_t>(r)]) {
        if (e.stream == Stream::kCompute && e.action.kind != ActionKind::kOptimizer) {
          out.emplace_back(e.action.ToString(), e.start_ns);
        }
      }
      return out;
    };
    EXPECT_EQ(compute(overlapped), compute(deferred)) << "rank " << r;
    std::int64_t last_grad = 0, first_reduce_overlapped = INT64_MAX;
    std::vector<std::pair<std::int64_t, std::int64_t>> reduces;
    std::int64_t opt_start = -1;
    for (const auto& e : deferred.events[static_cast<std::size_t>(r)]) {
      if (e.action.kind == ActionKind::kBackward) last_grad = std::max(last_grad, e.end_ns);
      if (e.action.kind == ActionKind::kReduceGrad) reduces.emplace_back(e.start_ns, e.end_ns);
      if (e.action.kind == ActionKind::kOptimizer && opt_start < 0) opt_start = e.start_ns;
    }
    for (const auto& e : overlapped.events[static_cast<std::size_t>(r)]) {
      if (e.action.kind == ActionKind::kReduceGrad) {
        first_reduce_overlapped = std::min(first_reduce_overlapped, e.start_ns);
      }
    }
    ASSERT_EQ(reduces.size(), 2u) << "rank " << r;
    EXPECT_EQ(reduces[0].first, last_grad) << "rank " << r;
    EXPECT_EQ(reduces[0].second, last_grad + 3'000'000);
    EXPECT_EQ(reduces[1].first, reduces[0].second);
    EXPECT_EQ(opt_start, last_grad + 6'000'000);
    if (first_reduce_overlapped < last_grad) ++ranks_that_overlapped;
  }
  EXPECT_EQ(ranks_that_overlapped, lowered.num_ranks);
}

TEST(Determinism, SameJobSameBytes) {
  for (const char* name : {"1f1b", "zb-h2", "zbv", "dualpipev"}) {
    const int vpp = std::string(name) == "zbv" || std::string(name) == "dualpipev" ? 2 : 1;
    const SimResult a = Sim(name, 4, 16, vpp, {1.0, 1.3, 0.7, 0.1});
    const SimResult b = Sim(name, 4, 16, vpp, {1.0, 1.3, 0.7, 0.1});
    EXPECT_EQ(ReportToJson(a.report), ReportToJson(b.report));
    EXPECT_EQ(TraceJson(a.timeline, "t"), TraceJson(b.timeline, "t"));
  }
}

TEST(Trace, HasOneFlowPerTransfer) {
  const SimResult r = Sim("1f1b", 4, 8, 1, {1, 1, 1, 0.1});
  const std::string t = TraceJson(r.timeline, "t");
  std::size_t sends = 0, starts = 0, finishes = 0;
  for (std::size_t p = 0; (p = t.find("\"ph\":\"s\"", p)) != std::string::npos; ++p) ++starts;
  for (std::size_t p = 0; (p = t.find("\"ph\":\"f\"", p)) != std::string::npos; ++p) ++finishes;
  for (std::size_t p = 0; (p = t.find("SEND_", p)) != std::string::npos; ++p) ++sends;
  // 3 links × 8 microbatches × 2 directions.
  EXPECT_EQ(starts, 48u);
  EXPECT_EQ(finishes, 48u);
  EXPECT_EQ(sends, 48u * 2);  // name and cat of each send slice
}

TEST(Trace, ReadsBackWhatItWrote) {
  const SimResult r = Sim("zb-h1", 4, 8, 1, {1, 1, 1, 0.1});
  const std::string t = TraceJson(r.timeline, "t");
  auto n = CheckTraceJson(t, "t.json", "the trace");
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 4 * (8 + 8 + 8 + 1));  // each rank: 8 F, 8 I, 8 W and its optimizer step
  // Written gzip-compressed, read back (by its magic bytes) as the same text.
  const std::string path =
      (std::filesystem::temp_directory_path() / "pipetwin_trace_read_back.json.gz").string();
  std::int64_t json_bytes = -1;
  ASSERT_TRUE(WriteTraceFile(path, r.timeline, "t", &json_bytes).ok());
  EXPECT_EQ(json_bytes, static_cast<std::int64_t>(t.size()));  // the JSON, not the .gz
  EXPECT_LT(static_cast<std::int64_t>(std::filesystem::file_size(path)), json_bytes);
  auto back = ReadTraceFile(path, "--predicted-trace");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, t);
  std::filesystem::remove(path);
}

TEST(Trace, AWrittenTraceCompareCannotReadIsSaid) {
  // compare reads back at most kMaxTraceBytes (256 MiB) of JSON: a trace at the limit gets no
  // note, one byte more names the file, its size and the limit.
  EXPECT_EQ(TraceTooLargeToReadNote("t.json", kMaxTraceBytes), "");
  EXPECT_EQ(TraceTooLargeToReadNote("t.json", 1000), "");
  const std::string note = TraceTooLargeToReadNote("t.json.gz", 1200LL << 20);
  EXPECT_EQ(note.rfind("t.json.gz holds 1200 MiB of trace events", 0), 0u) << note;
  EXPECT_NE(note.find("up to 256 MiB"), std::string::npos) << note;
  EXPECT_NE(TraceTooLargeToReadNote("t.json", kMaxTraceBytes + 1), "");
}

TEST(RunTimeout, SizedFromThePredictedStepUnlessGiven) {
  // 1F1B, pp 4, m 8, F = I = W = 1 ms: (m + pp - 1) x (F + I + W) = 33 ms per step, so the
  // executor's timeout is 10 x 0.033 s + 15 s = 15.33 s (issue 16; it was always 300 s).
  const std::string base =
      "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\n"
      "costs: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n";
  auto job = ParseJob(base, "t.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->config.execution.timeout_s, 0);  // not given
  auto t = SizeRunTimeout(*job);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_NEAR(*t, 15.33, 1e-9);
  EXPECT_NEAR(job->config.execution.timeout_s, 15.33, 1e-9);
  // A timeout in the job is kept, and written back by WriteJobConfig; a sized one is not.
  auto given = ParseJob(base + "execution: {timeout_s: 7}\n", "t.yaml");
  ASSERT_TRUE(given.ok()) << given.error().message;
  auto g = SizeRunTimeout(*given);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 7);
  EXPECT_NE(WriteJobConfig(given->config).find("timeout_s: 7"), std::string::npos);
  auto fresh = ParseJob(base, "t.yaml");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(WriteJobConfig(fresh->config).find("timeout_s"), std::string::npos);
  // A step the caller predicted already (run simulates once, per world rank) is used as given:
  // 10 x 2 s + 15 s.
  auto t2 = SizeRunTimeout(*fresh, 2000.0);
  ASSERT_TRUE(t2.ok());
  EXPECT_NEAR(*t2, 35.0, 1e-9);
  auto g2 = SizeRunTimeout(*given, 2000.0);  // a given timeout still wins
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(*g2, 7);
}

}  // namespace
}  // namespace pipetwin
