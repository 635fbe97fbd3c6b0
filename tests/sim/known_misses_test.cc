// known_misses_test.cc — where the accuracy suite says a prediction reads optimistic
// (sim/known_misses.h): each note fires on exactly the jobs its condition names, with the
// figures of the suite's runs it quotes.
#include "sim/known_misses.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/simulate.h"

namespace pipetwin {
namespace {

// MPT-7B as MosaicML's 2024 table runs it (FSDP, one microbatch of 6 a step), with the data
// parallelism, node count, recompute, ZeRO stage and rank order in the arguments.
std::string MptJob(int pp, int dp, int nodes, const std::string& recompute, int zero,
                   const std::string& rank_order = "tp-cp-dp-pp",
                   const std::string& device = "h100-sxm-80gb") {
  return "schedule: 1f1b\n"
         "parallel: {pp: " +
         std::to_string(pp) + ", tp: 1, dp: " + std::to_string(dp) +
         ", zero: " + std::to_string(zero) +
         "}\n"
         "model: {preset: gpt3-1.3b, layers: 32, hidden: 4096, heads: 32, vocab: 50368, "
         "seq_len: 2048, " +
         // The cpu device is the executor's machine: its decoder (biases, untied), in float32.
         (device == "cpu" ? "bias: true, tied_embeddings: false" : "bias: false") +
         ", dropout: false}\n"
         "training: {global_batch: " +
         std::to_string(6 * dp) +
         ", micro_batch: 6, precision: " + (device == "cpu" ? "fp32" : "bf16") +
         ", recompute: " + recompute + ", flash_attention: true, grad_reduce_dtype: fp32" +
         (zero == 3 ? ", zero3_unit: layer" : "") +
         "}\n"
         "cluster: {device: " +
         device + ", gpus_per_node: 8, nodes: " + std::to_string(nodes) +
         ", rank_order: " + rank_order + "}\n";
}

std::vector<KnownMiss> MissesOf(const std::string& yaml) {
  auto job = ParseJob(yaml, "job.yaml");
  if (!job) {
    ADD_FAILURE() << job.error().message;
    return {};
  }
  auto sim = Simulate(*job, SimulateOptions{});
  if (!sim) {
    ADD_FAILURE() << sim.error().message;
    return {};
  }
  return KnownMisses(*job, sim->report);
}

const KnownMiss* Find(const std::vector<KnownMiss>& misses, const std::string& id) {
  for (const KnownMiss& m : misses) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

// Without checkpointing, ZeRO-2 or 3 over 16, 32 and 64 nodes quotes the worst of MosaicML's
// runs over as many nodes (+7.7%, +10.2%, +16.2%: results/published.md); over 8 nodes, with
// full recompute, or under ZeRO-1 it says nothing.
TEST(KnownMissesTest, ShardedDataParallelismOverManyNodesQuotesTheRunsOfItsNodeCount) {
  struct Case {
    int dp, nodes;
    std::string recompute;
    int zero;
    double want_pct;  // 0: no note
  };
  const Case cases[] = {
      {512, 64, "none", 3, 16.2}, {1024, 128, "none", 3, 16.2}, {256, 32, "none", 3, 10.2},
      {384, 48, "none", 2, 10.2}, {128, 16, "none", 3, 7.7},    {64, 8, "none", 3, 0},
      {512, 64, "full", 3, 0},    {512, 64, "none", 1, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("dp " + std::to_string(c.dp) + ", zero " + std::to_string(c.zero) + ", " +
                 c.recompute);
    const auto misses = MissesOf(MptJob(1, c.dp, c.nodes, c.recompute, c.zero));
    const KnownMiss* m = Find(misses, "sharded_dp_over_many_nodes");
    if (c.want_pct == 0) {
      EXPECT_EQ(m, nullptr);
      continue;
    }
    ASSERT_NE(m, nullptr);
    EXPECT_DOUBLE_EQ(m->optimistic_pct, c.want_pct);
    EXPECT_NE(m->note.find("ZeRO-" + std::to_string(c.zero) + " over " + std::to_string(c.nodes) +
                           " nodes"),
              std::string::npos)
        << m->note;
    char tail[64];
    std::snprintf(tail, sizeof tail, "up to %.1f%% optimistic", c.want_pct);
    EXPECT_NE(m->note.find(tail), std::string::npos) << m->note;
  }
}

// The nodes are the data-parallel group's, not the job's: 16 nodes of pp 8 x dp 16 with DP
// innermost put each DP group on 2 nodes (no note); with the pipeline innermost
// (rank_order tp-cp-pp-dp) each DP group takes one rank from each of the 16 nodes.
TEST(KnownMissesTest, ShardedDataParallelismCountsTheNodesOfItsOwnGroup) {
  EXPECT_EQ(Find(MissesOf(MptJob(8, 16, 16, "none", 2)), "sharded_dp_over_many_nodes"), nullptr);
  const auto misses = MissesOf(MptJob(8, 16, 16, "none", 2, "tp-cp-pp-dp"));
  const KnownMiss* m = Find(misses, "sharded_dp_over_many_nodes");
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->note.find("ZeRO-2 over 16 nodes"), std::string::npos) << m->note;
}

// FSDP's hidden collectives quote the suite's FSDP runs of the job's device (H100's for H200)
// and checkpointing, either way: checkpointed on H100 they read -6.9% to +1.3%, on A100 80GB
// -17.5% to -4.1% (nothing optimistic to add in `plan`); without checkpointing over 64 nodes the
// many-nodes note speaks instead; a device without FSDP runs in the suite gets no note.
TEST(KnownMissesTest, FsdpHiddenCollectivesQuoteTheRunsOfTheirDeviceAndCheckpointing) {
  struct Case {
    std::string device, recompute;
    int dp, nodes;
    std::string want;  // empty: no note
    double want_pct;
  };
  const Case cases[] = {
      {"h100-sxm-80gb", "full", 8, 1,
       "the suite's 14 FSDP runs on h100-sxm-80gb with activation checkpointing (4.5% to 29.5% "
       "hidden) read -6.9% to +1.3% against their published speed (not modelled: "
       "models/README.md, Known miss), so read this prediction as between 6.9% pessimistic and "
       "1.3% optimistic",
       1.3},
      {"h200-sxm-141gb", "full", 8, 1, "the suite's 14 FSDP runs on h100-sxm-80gb with", 1.3},
      {"a100-sxm-80gb", "full", 8, 1,
       "5 FSDP runs on a100-sxm-80gb with activation checkpointing (4.9% to 18.3% hidden) read "
       "-17.5% to -4.1% against their published speed (not modelled: models/README.md, Known "
       "miss), so read this prediction as up to 17.5% pessimistic",
       0},
      {"h100-sxm-80gb", "none", 64, 8, "7 FSDP runs on h100-sxm-80gb without", 3.8},
      {"h100-sxm-80gb", "none", 512, 64, "", 0},
      {"a100-sxm-40gb", "none", 8, 1, "", 0},
      {"cpu", "full", 8, 1, "", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.device + ", recompute " + c.recompute + ", dp " + std::to_string(c.dp));
    const auto misses = MissesOf(MptJob(1, c.dp, c.nodes, c.recompute, 3, "tp-cp-dp-pp", c.device));
    const KnownMiss* m = Find(misses, "fsdp_hidden_collectives");
    if (c.want.empty()) {
      EXPECT_EQ(m, nullptr) << m->note;
      continue;
    }
    ASSERT_NE(m, nullptr);
    EXPECT_GE(m->hidden_dp_pct, 1.0);
    EXPECT_NE(m->note.find(c.want), std::string::npos) << m->note;
    EXPECT_DOUBLE_EQ(m->optimistic_pct, c.want_pct);
  }
}

}  // namespace
}  // namespace pipetwin
