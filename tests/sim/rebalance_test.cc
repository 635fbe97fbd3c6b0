// SuggestRebalance (sim/rebalance.h): where the output layer makes the last pipeline stage the
// busiest, the suggested model.layers_per_stage re-simulates to exactly the step it promises,
// is shorter, and on two stages equals the best of every split (brute force); balanced or
// unpriced jobs get no suggestion.
#include "sim/rebalance.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "sim/simulate.h"

namespace pipetwin {
namespace {

// Llama 3.1 8B (a 128,256-word output layer, about 2.4 layers of GEMMs at tp 1) cut to `layers`
// layers over `pp` stages of 1F1B, `extra` appended to model:.
std::string Job(int pp, int layers, const std::string& extra = "") {
  return "schedule: 1f1b\nparallel: {pp: " + std::to_string(pp) +
         "}\nmodel: {preset: llama3.1-8b, layers: " + std::to_string(layers) + extra +
         "}\ntraining: {global_batch: 16, micro_batch: 1}\n"
         "cluster: {device: h100-sxm-80gb, gpus_per_node: 8, nodes: 1}\n";
}

double StepMs(const std::string& yaml) {
  auto job = ParseJob(yaml, "t.yaml");
  EXPECT_TRUE(job.ok()) << job.error().message;
  auto r = Simulate(*job, SimulateOptions{});
  EXPECT_TRUE(r.ok());
  return r->report.iteration_time_ms;
}

std::string List(const std::vector<int>& v) {
  std::string s;
  for (int n : v) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return ", layers_per_stage: [" + s + "]";
}

TEST(Rebalance, MovesLayersOffTheOutputStageAndKeepsItsPromise) {
  auto job = ParseJob(Job(4, 16), "t.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  auto r = Simulate(*job, SimulateOptions{});
  ASSERT_TRUE(r.ok());
  const std::optional<Rebalance> s = SuggestRebalance(*job, r->report, false);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->before, (std::vector<int>{4, 4, 4, 4}));
  EXPECT_EQ(s->busiest_pp_rank, 3);
  EXPECT_GE(s->busiest_over_median, 0.05);
  EXPECT_EQ(std::accumulate(s->layers_per_stage.begin(), s->layers_per_stage.end(), 0), 16);
  EXPECT_LT(s->layers_per_stage.back(), 4);
  EXPECT_EQ(s->before_ms, r->report.iteration_time_ms);
  EXPECT_LE(s->iteration_ms, 0.99 * s->before_ms);
  // The promise: the job with that split takes exactly that step.
  EXPECT_EQ(StepMs(Job(4, 16, List(s->layers_per_stage))), s->iteration_ms);
  // A profile's costs are measured, not the model's: no suggestion.
  EXPECT_FALSE(SuggestRebalance(*job, r->report, true).has_value());
}

// On two stages the step is unimodal in the split: the greedy's answer is the brute force's best.
TEST(Rebalance, OnTwoStagesFindsTheBestSplit) {
  const int layers = 8;
  double best = 0;
  int best_first = -1;
  for (int a = 0; a <= layers; ++a) {
    const double ms = StepMs(Job(2, layers, List({a, layers - a})));
    if (best_first < 0 || ms < best) best = ms, best_first = a;
  }
  auto job = ParseJob(Job(2, layers), "t.yaml");
  ASSERT_TRUE(job.ok());
  auto r = Simulate(*job, SimulateOptions{});
  ASSERT_TRUE(r.ok());
  const std::optional<Rebalance> s = SuggestRebalance(*job, r->report, false);
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(best_first, layers / 2);  // the output stage gets fewer layers
  EXPECT_EQ(s->layers_per_stage, (std::vector<int>{best_first, layers - best_first}));
  EXPECT_EQ(s->iteration_ms, best);
}

TEST(Rebalance, NothingToSayForAbstractCostsOrOneStage) {
  auto abstract = ParseJob(
      "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\n"
      "costs: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n",
      "t.yaml");
  ASSERT_TRUE(abstract.ok()) << abstract.error().message;
  auto ra = Simulate(*abstract, SimulateOptions{});
  ASSERT_TRUE(ra.ok());
  EXPECT_FALSE(SuggestRebalance(*abstract, ra->report, false).has_value());
  auto one = ParseJob(Job(1, 16), "t.yaml");
  ASSERT_TRUE(one.ok());
  auto r1 = Simulate(*one, SimulateOptions{});
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(SuggestRebalance(*one, r1->report, false).has_value());
}

}  // namespace
}  // namespace pipetwin
