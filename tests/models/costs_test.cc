#include "models/costs.h"

#include <gtest/gtest.h>

#include "job/job.h"

#include <numeric>

namespace pipetwin::models {
namespace {

// The cost model of a job file's text, for `num_stages` stages (job/ resolves the file).
Expected<JobCosts> Costs(const std::string& yaml, int num_stages) {
  Expected<JobConfig> c = ParseJobConfig(yaml, "job.yaml");
  if (!c) return c.error();
  Expected<ResolvedJob> job = ResolveJob(*c);
  if (!job) return job.error();
  return BuildJobCosts(CostInputsOf(job->config, job->microbatches), num_stages);
}

// GPT-3 175B, tp 8, pp 8, dp 4 on A100s (Narayanan et al. 2021's setting, smaller dp).
std::string Gpt3Job(const std::string& recompute, const std::string& extra_parallel = "") {
  return "schedule: 1f1b\n"
         "parallel: {pp: 8, tp: 8, dp: 4" +
         extra_parallel +
         "}\n"
         "model: {preset: gpt3-175b}\n"
         "training: {global_batch: 256, micro_batch: 2, recompute: " +
         recompute +
         "}\n"
         "cluster: {device: a100-sxm-80gb}\n";
}

double Sum(const JobCosts& c, double StageCost::*field) {
  double s = 0;
  for (const StageCost& st : c.stages) s += st.*field;
  return s;
}

// Narayanan et al. 2021, Sec. 5.1: FLOPs per iteration of batch B.
TEST(CostsTest, FlopsPerIterationMatchNarayanan) {
  const double B = 256, s = 2048, l = 96, h = 12288, V = 50257;
  Expected<JobCosts> none = Costs(Gpt3Job("none"), 8);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->microbatches, 32);                      // 256 / (2 x 4)
  const double per_iteration = none->microbatches * 4.0;  // microbatches x dp
  const double model = Sum(*none, &StageCost::model_flops_per_microbatch) * per_iteration;
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(model, expected, expected * 1e-12);
  EXPECT_NEAR(Sum(*none, &StageCost::hardware_flops_per_microbatch) * per_iteration, expected,
              expected * 1e-12);

  Expected<JobCosts> full = Costs(Gpt3Job("full"), 8);
  ASSERT_TRUE(full) << full.error().message;
  const double hw = Sum(*full, &StageCost::hardware_flops_per_microbatch) * per_iteration;
  const double expected_full = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(hw, expected_full, expected_full * 1e-12);
  // Model FLOPs do not count recompute.
  EXPECT_NEAR(Sum(*full, &StageCost::model_flops_per_microbatch) * per_iteration, expected,
              expected * 1e-12);
}

TEST(CostsTest, StagesAndMemory) {
  Expected<JobCosts> c = Costs(Gpt3Job("selective", ", sp: true"), 8);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->stages.size(), 8u);
  EXPECT_EQ(c->world_size, 256);
  EXPECT_EQ(c->cluster.nodes, 32);
  EXPECT_EQ(c->tokens_per_microbatch, 4096);
  EXPECT_TRUE(c->stages.front().has_embedding);
  EXPECT_TRUE(c->stages.back().has_output);
  const StageCost& mid = c->stages[3];
  EXPECT_EQ(mid.layers, 12);
  EXPECT_EQ(mid.first_layer, 36);
  // 12 layers of 34 s b h / t (selective, tp 8 + sp), 16-bit.
  const double sbh = 2048.0 * 2 * 12288;
  EXPECT_EQ(mid.activation_bytes_per_microbatch, static_cast<std::int64_t>(12 * 34 * sbh / 8));
  EXPECT_EQ(mid.param_bytes, 2 * mid.params);
  EXPECT_EQ(mid.optimizer_bytes, 12 * mid.params);
  // The output stage does more work than a middle stage; all stages do positive work.
  EXPECT_GT(c->stages.back().forward_ms, mid.forward_ms);
  for (const StageCost& st : c->stages) {
    EXPECT_GT(st.forward_ms, 0);
    EXPECT_GT(st.backward_input_ms, st.backward_weight_ms);  // I also does attention backward
    EXPECT_GT(st.backward_weight_ms, 0);
    EXPECT_GT(st.forward_tp_comm_ms, 0);
    EXPECT_GT(st.dp_reduce_ms, 0);
    EXPECT_GT(st.optimizer_ms, 0);
    EXPECT_LT(st.forward_tp_comm_ms, st.forward_ms);
  }
  EXPECT_DOUBLE_EQ(mid.p2p_bytes, sbh * 2 / 8);  // bf16, sequence-sharded
  // Stage memory fits an 80 GB A100 with room for activations.
  EXPECT_LT(mid.param_bytes + mid.grad_bytes + mid.optimizer_bytes, c->hbm_bytes);
}

TEST(CostsTest, ZeroShardsOverDataParallel) {
  Expected<JobCosts> z0 = Costs(Gpt3Job("full", ", zero: 0"), 8);
  Expected<JobCosts> z3 = Costs(Gpt3Job("full", ", zero: 3"), 8);
  ASSERT_TRUE(z0 && z3);
  const StageCost& a = z0->stages[2];
  const StageCost& b = z3->stages[2];
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(b.param_bytes + b.grad_bytes + b.optimizer_bytes, 16 * a.params / 4);
  EXPECT_GT(b.zero3_gather_bytes_per_microbatch, 0);
  EXPECT_LT(b.optimizer_ms, a.optimizer_ms);
}

TEST(CostsTest, RealisticThroughputOnA100) {
  // Narayanan et al. 2021 Table 1 report ~140-160 TFLOP/s per A100 for GPT-3 175B with
  // tp 8, pp 8 and full recompute. A 1F1B step of m microbatches takes about
  // (m + p - 1) (F + I + W) of the slowest stage.
  Expected<JobCosts> c = Costs(Gpt3Job("full"), 8);
  ASSERT_TRUE(c) << c.error().message;
  double slowest = 0;
  for (const StageCost& st : c->stages) {
    slowest = std::max(slowest, st.forward_ms + st.backward_input_ms + st.backward_weight_ms);
  }
  const double step_ms = (c->microbatches + 8 - 1) * slowest;
  const double hw_flops_per_device =
      Sum(*c, &StageCost::hardware_flops_per_microbatch) * c->microbatches * 4 / c->world_size;
  const double tflops = hw_flops_per_device / (step_ms * 1e-3) / 1e12;
  EXPECT_GT(tflops, 100);
  EXPECT_LT(tflops, 200);
  RecordProperty("predicted_tflops_per_a100", std::to_string(tflops));
}

// The DP reduction algorithm is the job's choice. One node of 8 GPUs, dp 8, latency 0: the
// ring sends 2(n−1)/n·S, the tree 2·S, and 2 parameter servers take 2·max(1, n/p)·S = 8·S
// through one worker's link, all at the same bandwidth.
TEST(CostsTest, DpReductionRingTreeParameterServer) {
  auto job = [](const std::string& how) {
    return "schedule: 1f1b\nparallel: {pp: 1, dp: 8}\nmodel: {preset: gpt3-1.3b}\n"
           "training: {global_batch: 64, micro_batch: 1}\n"
           "cluster: {device: a100-sxm-80gb, nodes: 1, intra_node: {latency_us: 0}, "
           "dp_reduction: " +
           how + ", parameter_servers: 2}\n";
  };
  Expected<JobCosts> ring = Costs(job("ring"), 1);
  Expected<JobCosts> tree = Costs(job("tree"), 1);
  Expected<JobCosts> ps = Costs(job("parameter-server"), 1);
  ASSERT_TRUE(ring.ok()) << ring.error().message;
  ASSERT_TRUE(tree.ok() && ps.ok());
  const double r = ring->stages[0].dp_reduce_ms;
  EXPECT_NEAR(tree->stages[0].dp_reduce_ms / r, 2.0 / (2.0 * 7 / 8), 1e-9);
  EXPECT_NEAR(ps->stages[0].dp_reduce_ms / r, 8.0 / (2.0 * 7 / 8), 1e-9);
  EXPECT_NEAR(ring->stages[0].dp_reduce_bytes, 2.0 * 7 / 8 * ps->stages[0].dp_reduce_bytes, 1);
  auto bad = Costs(job("butterfly"), 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("cluster.dp_reduction: must be one of ring, tree, "
                                     "parameter-server"),
            std::string::npos)
      << bad.error().message;
}

TEST(CostsTest, UnevenSplit) {
  const std::string yaml =
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 4}\n"
      "model: {preset: tiny, layers: 6, layers_per_stage: [1, 2, 2, 1]}\n";
  Expected<JobCosts> c = Costs(yaml, 4);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->stages[1].layers, 2);
  EXPECT_EQ(c->stages[3].first_layer, 5);
  EXPECT_DOUBLE_EQ(c->stages[1].backward_weight_ms, c->stages[2].backward_weight_ms);
  EXPECT_GT(c->stages[1].backward_weight_ms, c->stages[0].backward_weight_ms);  // 2 layers vs 1

  Expected<JobCosts> wrong_len = Costs(yaml, 8);
  ASSERT_FALSE(wrong_len);
  EXPECT_NE(wrong_len.error().message.find("layers_per_stage"), std::string::npos);

  Expected<JobCosts> uneven = Costs(
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 4}\nmodel: {preset: tiny, layers: "
      "6}\n",
      4);
  ASSERT_FALSE(uneven);
  EXPECT_NE(uneven.error().message.find("job.yaml"), std::string::npos);
  EXPECT_NE(uneven.error().message.find("layers_per_stage"), std::string::npos);
}

TEST(CostsTest, ClusterErrors) {
  const std::string head =
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 4, tp: 4}\n"
      "model: {preset: tiny}\n";
  Expected<JobCosts> device = Costs(head + "cluster: {device: v100}\n", 4);
  ASSERT_FALSE(device);
  EXPECT_NE(device.error().message.find("job.yaml:"), std::string::npos);
  EXPECT_NE(device.error().message.find("cluster.device"), std::string::npos);
  EXPECT_NE(device.error().message.find("h200-sxm-141gb"), std::string::npos);
  EXPECT_EQ(device.error().exit_status(), 2);

  Expected<JobCosts> key = Costs(head + "cluster: {gpus: 8}\n", 4);
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find("'gpus'"), std::string::npos);
  EXPECT_NE(key.error().message.find("gpus_per_node"), std::string::npos);

  Expected<JobCosts> link = Costs(head + "cluster: {intra_node: {bandwidth: 3}}\n", 4);
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("bandwidth_gb_s"), std::string::npos);

  Expected<JobCosts> small = Costs(head + "cluster: {gpus_per_node: 4, nodes: 2}\n", 4);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message.find("cluster.nodes"), std::string::npos);

  Expected<JobCosts> heads = Costs(
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 4, tp: 8}\nmodel: {preset: tiny}\n", 4);
  ASSERT_FALSE(heads);
  EXPECT_NE(heads.error().message.find("parallel.tp"), std::string::npos);
  EXPECT_NE(heads.error().message.find("model.heads"), std::string::npos);
}

TEST(CostsTest, OverridesAndPlacement) {
  const std::string head =
      "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 2, dp: 8}\n"
      "model: {preset: gpt3-1.3b}\n";
  Expected<JobCosts> base = Costs(head + "cluster: {device: h100-sxm-80gb, nodes: 2}\n", 2);
  Expected<JobCosts> slow =
      Costs(head +
                "cluster: {device: h100-sxm-80gb, nodes: 2,\n"
                "          intra_node: {bandwidth_gb_s: 45, latency_us: 20}}\n",
            2);
  ASSERT_TRUE(base) << base.error().message;
  ASSERT_TRUE(slow) << slow.error().message;
  // DP groups stay inside a node (tp-cp-dp-pp: dp 8 fills a node): NVLink matters, the
  // pipeline crosses nodes.
  EXPECT_GT(slow->stages[0].dp_reduce_ms, base->stages[0].dp_reduce_ms);
  EXPECT_DOUBLE_EQ(base->p2p_latency_ms, 5e-3);
  // Put pp innermost instead: the DP groups now span both nodes and pay for the NICs.
  Expected<JobCosts> pp_inner =
      Costs(head + "cluster: {device: h100-sxm-80gb, nodes: 2, rank_order: pp-tp-cp-dp}\n", 2);
  ASSERT_TRUE(pp_inner) << pp_inner.error().message;
  EXPECT_GT(pp_inner->stages[0].dp_reduce_ms, base->stages[0].dp_reduce_ms);
  EXPECT_DOUBLE_EQ(pp_inner->p2p_latency_ms, 2e-3);
}

}  // namespace
}  // namespace pipetwin::models
