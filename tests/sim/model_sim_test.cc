// The simulator driven by the cost model (models/): closed forms through the whole path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/costs.h"
#include "models/program_memory.h"
#include "schedule/report.h"
#include "sim/model_costs.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

SimResult SimFile(const std::string& rel) {
  auto job = LoadJob(std::string(PIPETWIN_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(job.ok()) << job.error().message;
  auto r = Simulate(*job, false);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(*r);
}

SimResult SimText(const std::string& yaml) {
  auto job = ParseJob(yaml, "t.yaml");
  EXPECT_TRUE(job.ok()) << job.error().message;
  auto r = Simulate(*job, false);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(*r);
}

// training.pipeline_engine: deepspeed waits for each send before the next action. Hand-worked
// for 1F1B on 2 stages, 2 microbatches (stage times f0, b0, f1, b1, transfer c; f1 + b1 >= f0
// and >= b0): with sends beside the compute stage 0 ends at f0 + 2c + 2f1 + 2b1 + b0; with
// blocking sends stage 0's F(1) starts after its first send, stage 1's F(1) after its first
// backward send, and the last gradient arrives one transfer later: f0 + 3c + 2f1 + 2b1 + b0.
TEST(ModelSim, DeepSpeedBlockingSendsAddOneTransferOnTwoStages) {
  const std::string job =
      "schedule: 1f1b\nparallel: {pp: 2}\nmodel: {preset: gpt3-1.3b}\n"
      "cluster: {device: a100-sxm-80gb, gpus_per_node: 1, nodes: 2}\n"
      // fp16: with bf16, DeepSpeed's BF16 optimizer also accumulates in fp32 (CostsTest).
      "training: {global_batch: 2, micro_batch: 1, precision: fp16";
  const SimResult mg = SimText(job + "}\n");
  const SimResult ds = SimText(job + ", pipeline_engine: deepspeed}\n");
  auto costs = ParseJob(job + "}\n", "t.yaml");
  ASSERT_TRUE(costs.ok() && costs->model_costs);
  const models::StageCost& s0 = costs->model_costs->stages[0];
  const models::StageCost& s1 = costs->model_costs->stages[1];
  ASSERT_GE(s1.forward_ms + s1.backward_input_ms + s1.backward_weight_ms, s0.forward_ms);
  const double c = s0.p2p_ms;
  ASSERT_GT(c, 0.1);  // over the nodes' NICs: visible
  EXPECT_NEAR(ds.report.iteration_time_ms - mg.report.iteration_time_ms, c, 1e-5);
  // The compute is the same; the waits are not compute.
  EXPECT_NEAR(ds.report.ranks[0].compute_busy_ms, mg.report.ranks[0].compute_busy_ms, 1e-5);
}

// Each pipeline transfer takes its own boundary's link. GPT-3 1.3B, dp 4 and pp 4 on two nodes
// of 8 (Megatron's order): pipeline ranks 0 and 1 on node 0, 2 and 3 on node 1. A transfer of
// S = 2 x 2048 x 2048 bytes takes 2 us + S / (300 GB/s x 0.8) on NVLink and 5 us + S / (25 GB/s
// x 0.9) over the NIC, so the boundaries 0-1 and 2-3 send at NVLink's time and 1-2 (and, with
// interleaving, the wrap 3-0) at the NIC's. Before, every boundary took the NIC's.
TEST(ModelSim, EachPipelineBoundaryTakesItsOwnLink) {
  const double s = 2.0 * 2048 * 2048;
  const double nvlink = 2e-3 + s / (300e9 * 0.8) * 1e3, nic = 5e-3 + s / (25e9 * 0.9) * 1e3;
  for (const std::string schedule : {"1f1b", "interleaved-1f1b"}) {
    auto job = ParseJob("schedule: " + schedule + "\nparallel: {pp: 4, dp: 4" +
                            (schedule == "1f1b" ? "" : ", vpp: 2") +
                            "}\nmodel: {preset: gpt3-1.3b}\n"
                            "training: {global_batch: 64, micro_batch: 1}\n"
                            "cluster: {device: a100-sxm-80gb, gpus_per_node: 8, nodes: 2}\n",
                        "t.yaml");
    ASSERT_TRUE(job.ok()) << job.error().message;
    const models::JobCosts& jc = *job->model_costs;
    ASSERT_EQ(jc.pp_boundary_inter, (std::vector<char>{0, 1, 0, 1}));
    const std::vector<int>& rank = job->schedule.stage_to_rank;
    const CostTable t = CostTableFromModel(jc, rank);
    const CostTable worst = CostTableFromModel(jc);
    for (std::size_t k = 0; k < t.stages.size(); ++k) {
      EXPECT_NEAR(jc.stages[k].p2p_intra_ms, nvlink, 1e-12);
      EXPECT_NEAR(jc.stages[k].p2p_ms, nic, 1e-12);
      EXPECT_EQ(worst.stages[k].send_forward, SimTime::FromMillis(nic));
      const auto expect = [&](SimTime got, std::size_t peer) {
        const int a = rank[k], b = rank[peer];
        const bool crosses =
            (a == 1 && b == 2) || (a == 2 && b == 1) || (a == 3 && b == 0) || (a == 0 && b == 3);
        EXPECT_EQ(got, SimTime::FromMillis(crosses ? nic : nvlink))
            << schedule << " stage " << k << " to " << peer;
      };
      if (k + 1 < t.stages.size()) expect(t.stages[k].send_forward, k + 1);
      if (k > 0) expect(t.stages[k].send_backward, k - 1);
    }
    // Faster links, a shorter step: against the same job with every boundary across nodes.
    ResolvedJob all_nic = *job;
    all_nic.model_costs->pp_boundary_inter.assign(4, 1);
    auto fast = Simulate(*job, false);
    auto slow = Simulate(all_nic, false);
    ASSERT_TRUE(fast.ok() && slow.ok());
    EXPECT_LT(fast->report.makespan_ms, slow->report.makespan_ms) << schedule;
  }
}

TEST(ModelSim, Gpt3ModelFlopsAndMfuFollowNarayanan) {
  const SimResult r = SimFile("examples/models/gpt3-175b.yaml");
  // 72·B·s·l·h²·(1 + s/(6h) + V/(12lh)), B = 1536, s = 2048, l = 96, h = 12288, V = 50257.
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 50257;
  const double flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  const double got = r.report.job->model_flops_per_iteration;
  EXPECT_NEAR(got / flops, 1.0, 1e-9);
  ASSERT_EQ(r.report.ranks.size(), 1024u);
  const double iter_s = r.report.iteration_time_ms * 1e-3;
  EXPECT_NEAR(r.report.throughput.tflops_per_device, flops / iter_s / 1024 * 1e-12, 1e-6);
  EXPECT_NEAR(r.report.throughput.mfu, flops / iter_s / 1024 / 312e12, 1e-9);
  EXPECT_NEAR(r.report.throughput.samples_per_s, 1536 / iter_s, 1e-6);
  EXPECT_TRUE(r.report.memory->fits);
  // Replicas of one pipeline rank report the same numbers.
  EXPECT_EQ(r.report.ranks[0].pp_rank, 0);
  EXPECT_EQ(r.report.ranks[8].tp_rank, 0);
  EXPECT_EQ(r.report.ranks[8].dp_rank, 1);  // TP innermost, then DP (cp = 1)
  EXPECT_EQ(r.report.ranks[128].pp_rank, 1);
  EXPECT_EQ(r.report.ranks[0].peak_memory_bytes, r.report.ranks[127].peak_memory_bytes);
}

// Full recompute: the hardware FLOPs add the recomputed forward, Narayanan et al.'s Eq. 3,
// 96·B·s·l·h²·(1 + s/(6h) + V/(16lh)); the model FLOPs stay at 72·B·s·l·h²·(…/12lh).
TEST(ModelSim, HardwareFlopsCountTheRecomputedForward) {
  const SimResult r = SimFile("examples/models/megatron-1t.yaml");
  const double B = 3072, s = 2048, l = 128, h = 25600, V = 50257;
  const double hw = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(r.report.job->hardware_flops_per_iteration / hw, 1.0, 1e-9);
  EXPECT_NEAR(r.report.job->model_flops_per_iteration / model, 1.0, 1e-9);
  const double iter_s = r.report.iteration_time_ms * 1e-3;
  EXPECT_NEAR(r.report.hardware_flops->tflops_per_device, hw / iter_s / 3072 * 1e-12, 1e-6);
  EXPECT_NEAR(r.report.hardware_flops->hfu, hw / iter_s / 3072 / 312e12, 1e-9);
}

// 1F1B on the tiny model, p2p, DP and sync free: the cost table sets every action's time and
// the step must take the 1F1B closed form (m + p − 1)(F + B) of the uniform middle... here
// the stages differ (embedding, output layer), so check the pieces instead: busy time per
// rank is m × (F + I + W) of its stage plus the optimizer, exactly.
TEST(ModelSim, BusyTimeIsTheCostTable) {
  const SimResult r = SimText(
      "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\nmodel: {preset: gpt3-1.3b}\n"
      "training: {micro_batch: 2}\ncluster: {device: a100-sxm-80gb, nodes: 1}\n");
  for (int q = 0; q < 4; ++q) {
    const StageTimes& t = r.costs.stages[static_cast<std::size_t>(q)];
    const SimTime busy = SimTime::FromNanos(8 * (t.forward + t.backward).nanos()) + t.optimizer;
    EXPECT_EQ(r.stats.ranks[static_cast<std::size_t>(q)].step.busy_ns, busy.nanos()) << q;
  }
}

// Memory over a program, worked by hand from the stage's inventory: 1F1B holds p − r
// microbatches at its peak; ZB-H1 the same plus the pending W of the last I.
TEST(ModelSim, RankMemoryFollowsTheInflightCount) {
  auto job = ParseJob(
      "schedule: zb-h1\nmicrobatches: 8\nparallel: {pp: 4}\nmodel: {preset: gpt3-1.3b}\n"
      "training: {micro_batch: 1, recompute: none}\ncluster: {device: a100-sxm-80gb, nodes: 1}\n",
      "t.yaml");
  ASSERT_TRUE(job.ok()) << job.error().message;
  ASSERT_TRUE(job->model_costs.has_value());
  const auto& jc = job->model_costs;
  auto r = Simulate(*job, false);
  ASSERT_TRUE(r.ok());
  for (int q = 0; q < 4; ++q) {
    const models::StageCost& c = jc->stages[static_cast<std::size_t>(q)];
    const std::int64_t fixed =
        c.param_bytes + c.grad_bytes + c.optimizer_bytes + c.comm_buffer_bytes;
    // At the last warm-up F, 4 − q microbatches are in flight and nothing waits for W yet
    // (each I of ZB-H1 comes after its stage's warm-up). During the first I: one more W part.
    const std::int64_t at_f = (4 - q) * c.activation_bytes_per_microbatch;
    const std::int64_t at_i = at_f + c.activation_transient_bytes + c.activation_bytes_pending_w;
    const models::RankMemory m =
        models::RankMemoryOverProgram(job->schedule.programs[static_cast<std::size_t>(q)], *jc);
    EXPECT_GE(m.peak, fixed + std::max(at_f, at_i)) << q;
    // And never more than every in-flight microbatch plus every pending W at once.
    EXPECT_LE(m.peak, fixed + (4 - q) * c.activation_bytes_per_microbatch +
                          (q + 1) * c.activation_bytes_pending_w + c.activation_transient_bytes)
        << q;
  }
  // 1F1B: exactly p − r full microbatches (no split backward, no transient without recompute).
  auto job1 = ParseJob(
      "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\nmodel: {preset: gpt3-1.3b}\n"
      "training: {micro_batch: 1, recompute: none}\ncluster: {device: a100-sxm-80gb, nodes: 1}\n",
      "t.yaml");
  auto r1 = Simulate(*job1, false);
  ASSERT_TRUE(r1.ok());
  for (int q = 0; q < 4; ++q) {
    const models::StageCost& c = jc->stages[static_cast<std::size_t>(q)];
    const std::int64_t fixed =
        c.param_bytes + c.grad_bytes + c.optimizer_bytes + c.comm_buffer_bytes;
    const models::RankMemory m =
        models::RankMemoryOverProgram(job1->schedule.programs[static_cast<std::size_t>(q)], *jc);
    EXPECT_EQ(m.peak, fixed + std::max<std::int64_t>((4 - q) * c.activation_bytes_per_microbatch,
                                                     (3 - q) * c.activation_bytes_per_microbatch +
                                                         c.activation_transient_bytes))
        << q;
    EXPECT_EQ(r1->report.ranks[static_cast<std::size_t>(q)].peak_memory_bytes, m.peak);
  }
}

// Recompute never raises a rank's peak: full <= selective <= none on every rank. On A100
// (unfused attention) with one layer a stage and s = 4,096, the last rank holds one microbatch:
// selective keeps all but the scores, yet rebuilds one layer's scores in I; full keeps the input
// and rebuilds the whole layer from it. Before, selective's rebuilt scores were not counted and
// full counted its input twice, so full peaked above selective (a random sweep found +117%).
TEST(ModelSim, RecomputeNeverRaisesThePeak) {
  std::vector<std::int64_t> peaks[3];
  const char* modes[] = {"none", "selective", "full"};
  for (int i = 0; i < 3; ++i) {
    const SimResult r = SimText(std::string("schedule: 1f1b\nmicrobatches: 2\nparallel: {pp: 2}\n"
                                            "model: {preset: gpt3-1.3b, layers: 2, seq_len: 4096}\n"
                                            "training: {micro_batch: 1, recompute: ") +
                                modes[i] + "}\ncluster: {device: a100-sxm-80gb, nodes: 1}\n");
    for (const auto& rank : r.report.ranks) peaks[i].push_back(rank.peak_memory_bytes);
  }
  for (std::size_t q = 0; q < 2; ++q) {
    EXPECT_LE(peaks[1][q], peaks[0][q]) << q;
    EXPECT_LE(peaks[2][q], peaks[1][q]) << q;
  }
  // Rank 0 holds two microbatches: selective drops the scores of the one not in I, full all
  // of it but its input. Rank 1 holds one, whose layer every mode has whole during I: the
  // three peak alike (before, full's peak there was above the others by the input).
  EXPECT_LT(peaks[1][0], peaks[0][0]);
  EXPECT_LT(peaks[2][0], peaks[1][0]);
  EXPECT_EQ(peaks[1][1], peaks[0][1]);
  EXPECT_EQ(peaks[2][1], peaks[1][1]);
}

TEST(ModelSim, ReportsWhenAJobDoesNotFit) {
  const SimResult r = SimText(
      "schedule: gpipe\nmicrobatches: 64\nparallel: {pp: 2, tp: 8}\nmodel: {preset: gpt3-13b}\n"
      "training: {micro_batch: 4, recompute: none}\ncluster: {device: a100-sxm-80gb, nodes: 2}\n");
  ASSERT_TRUE(r.report.memory.has_value());
  const MemorySummary& mem = *r.report.memory;
  EXPECT_FALSE(mem.fits);
  EXPECT_EQ(mem.shortfall_bytes, mem.worst_peak_bytes - mem.device_memory_bytes);
  EXPECT_GT(mem.shortfall_bytes, 0);
}

TEST(ModelSim, SameJobSameBytes) {
  const SimResult a = SimFile("examples/models/llama3-70b.yaml");
  const SimResult b = SimFile("examples/models/llama3-70b.yaml");
  EXPECT_EQ(ReportToJson(a.report), ReportToJson(b.report));
}

}  // namespace
}  // namespace pipetwin
