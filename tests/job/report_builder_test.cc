// The one report builder: the same definitions for a predicted step (pipeline-rank rows from
// the simulator) and a measured one (world-rank rows from the executor), checked against
// hand-worked numbers and the Zero Bubble paper's closed forms.
#include "job/report_builder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/simulate.h"

namespace pipetwin {
namespace {

ResolvedJob Job(const std::string& yaml) {
  auto j = ParseJob(yaml, "job.yaml");
  EXPECT_TRUE(j.ok()) << j.error().message;
  return std::move(*j);
}

StepRecord::Row Row(std::int64_t first, std::int64_t last, std::int64_t busy) {
  StepRecord::Row r;
  r.step.first_start_ns = first;
  r.step.last_end_ns = last;
  r.step.busy_ns = busy;
  return r;
}

TEST(ReportBuilder, IterationTimeFollowsOptimizerSync) {
  // Two ranks: rank 0 runs from 0 to 10 ms, rank 1 from 4 to 12 ms (makespan 12 ms, spans
  // 10 and 8 ms), each busy 6 ms.
  StepRecord rec;
  rec.source = "run";
  rec.world_rows = true;
  rec.makespan_ns = 12'000'000;
  rec.rows = {Row(0, 10'000'000, 6'000'000), Row(4'000'000, 12'000'000, 6'000'000)};
  for (const bool sync : {true, false}) {
    const ResolvedJob job =
        Job(std::string("schedule: zb-h2\nmicrobatches: 4\noptimizer_sync: ") +
            (sync ? "true" : "false") + "\nparallel: {pp: 2}\ncosts: {forward_ms: 1}\n");
    const Report r = BuildReport(job, rec);
    const double iter = sync ? 12.0 : 10.0;  // the makespan, or the longest rank span
    EXPECT_DOUBLE_EQ(r.iteration_time_ms, iter) << sync;
    EXPECT_DOUBLE_EQ(r.makespan_ms, 12.0);
    EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0 - 12.0 / (2 * iter));
    ASSERT_EQ(r.ranks.size(), 2u);
    EXPECT_DOUBLE_EQ(r.ranks[0].span_ms, 10.0);
    EXPECT_DOUBLE_EQ(r.ranks[1].span_ms, 8.0);
    EXPECT_DOUBLE_EQ(r.ranks[1].bubble_fraction, 1.0 - 6.0 / iter);
    // In-flight counts come from the program: ZB-H2 holds 2(p − r) − 1 microbatches.
    EXPECT_EQ(r.ranks[0].peak_inflight_microbatches, 3);
    EXPECT_EQ(r.ranks[1].peak_inflight_microbatches, 1);
    EXPECT_GE(r.ranks[0].peak_pending_weight_grads, 1);
    EXPECT_EQ(r.ranks[1].pp_rank, 1);
    // Samples: 4 microbatches of 1 sequence each per iteration.
    EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 4.0 / (iter * 1e-3));
  }
}

TEST(ReportBuilder, PredictedAndMeasuredAgreeOnTheSameTimeline) {
  // The simulator's timeline, summarised as the executor summarises its own, gives the
  // report the simulator's statistics give: one definition of busy, span and iteration.
  for (const char* sched : {"1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev", "interleaved-1f1b"}) {
    for (const bool sync : {true, false}) {
      const std::string vpp = std::string(sched) == "interleaved-1f1b" ? ", vpp: 2" : "";
      const ResolvedJob job =
          Job(std::string("schedule: ") + sched + "\nmicrobatches: 8\noptimizer_sync: " +
              (sync ? "true" : "false") + "\nparallel: {pp: 4" + vpp +
              "}\ncosts: {forward_ms: 1, backward_input_ms: 1.5, "
              "backward_weight_ms: 0.7, p2p_ms: 0.1, optimizer_ms: 0.3}\n");
      auto sim = Simulate(job);
      ASSERT_TRUE(sim.ok()) << sim.error().message;
      StepRecord measured;
      measured.source = "run";
      measured.world_rows = true;
      for (const auto& events : sim->timeline.events) {
        StepRecord::Row row;
        row.step = SummarizeRank(events);
        measured.makespan_ns = std::max(measured.makespan_ns, row.step.last_end_ns);
        measured.rows.push_back(row);
      }
      const Report m = BuildReport(job, measured);
      const Report& p = sim->report;
      EXPECT_DOUBLE_EQ(m.iteration_time_ms, p.iteration_time_ms) << sched << sync;
      EXPECT_DOUBLE_EQ(m.makespan_ms, p.makespan_ms) << sched;
      EXPECT_DOUBLE_EQ(m.bubble_fraction, p.bubble_fraction) << sched;
      ASSERT_EQ(m.ranks.size(), p.ranks.size());
      for (std::size_t r = 0; r < m.ranks.size(); ++r) {
        EXPECT_DOUBLE_EQ(m.ranks[r].compute_busy_ms, p.ranks[r].compute_busy_ms);
        EXPECT_DOUBLE_EQ(m.ranks[r].span_ms, p.ranks[r].span_ms);
        EXPECT_EQ(m.ranks[r].peak_inflight_microbatches, p.ranks[r].peak_inflight_microbatches);
        EXPECT_EQ(m.ranks[r].peak_pending_weight_grads, p.ranks[r].peak_pending_weight_grads);
      }
    }
  }
}

// The breakdown puts ZeRO-3's exposed per-unit collectives (inside F, I and W's times) under
// DP communication, not compute, and their hidden part under dp_comm_overlapped_ms: its
// compute is the ZeRO-1 step's (same optimizer shard) and its gradient casts, and ZeRO-3 leaves
// nothing else exposed.
TEST(ReportBuilder, Zero3BreakdownSeparatesItsCollectives) {
  auto job = [](const std::string& zero) {
    return Job("schedule: 1f1b\nparallel: {pp: 1, dp: 16, zero: " + zero +
               "}\nmodel: {preset: gpt3-1.3b}\ntraining: {global_batch: 64, micro_batch: 1}\n"
               "cluster: {device: a100-sxm-80gb, nodes: 2}\n");
  };
  const ResolvedJob j3 = job("3");
  const ResolvedJob j1 = job("1");
  auto s3 = Simulate(j3);
  auto s1 = Simulate(j1);
  ASSERT_TRUE(s3.ok() && s1.ok());
  ASSERT_TRUE(s3->report.breakdown && s1->report.breakdown && j3.model_costs);
  const Breakdown& b3 = *s3->report.breakdown;
  const models::StageCost::Zero3& z = j3.model_costs->stages[0].zero3;
  const double m = j3.microbatches;
  const double exposed =
      m * (z.forward_exposed_ms + z.backward_input_exposed_ms + z.backward_weight_exposed_ms);
  const double hidden =
      m * (z.forward_hidden_ms + z.backward_input_hidden_ms + z.backward_weight_hidden_ms);
  EXPECT_GT(exposed, 0);
  EXPECT_GT(hidden, 0);
  // Compute is the ZeRO-1 step's plus ZeRO-3's per-microbatch gradient casts to fp32 (inside W,
  // times the expected slowest rank; models/costs.cc StageZeroGradCast).
  const double casts =
      m * j3.model_costs->stages[0].grad_cast_ms * j3.model_costs->straggler_factor;
  EXPECT_GT(casts, 0);
  // And what the compute loses beside the hidden collectives (models/costs.cc, CommHbmShare):
  // share x min(compute, collectives) in each pass.
  const double slowed =
      m * (z.forward_slowdown_ms + z.backward_input_slowdown_ms + z.backward_weight_slowdown_ms);
  EXPECT_GT(slowed, 0);
  EXPECT_NEAR(b3.compute_ms, s1->report.breakdown->compute_ms + casts + slowed,
              1e-4);                                    // the simulator's nanoseconds
  EXPECT_NEAR(b3.dp_comm_exposed_ms, exposed, 1e-4);    // the simulator's nanoseconds
  EXPECT_NEAR(b3.dp_comm_overlapped_ms, hidden, 1e-4);  // the simulator's nanoseconds
  EXPECT_NEAR(b3.compute_slowed_by_comm_ms, slowed, 1e-9);
  EXPECT_EQ(s1->report.breakdown->compute_slowed_by_comm_ms, 0);  // ZeRO-1, nothing hidden
  EXPECT_NEAR(
      b3.compute_ms + b3.dp_comm_exposed_ms + b3.tp_cp_comm_exposed_ms + b3.pp_comm_and_bubble_ms,
      s3->report.iteration_time_ms, 1e-4);  // the simulator's nanoseconds
}

// Megatron's overlapped reduction: the backward beside its hidden buckets runs longer by the
// buckets' HBM share x their hidden time, once a step (played with the optimizer step): the
// breakdown names it, inside compute, and the step grows by exactly that.
TEST(ReportBuilder, OverlappedReductionSlowsTheComputeBesideIt) {
  auto job = [](const std::string& touches) {
    return Job(
        "schedule: 1f1b\nparallel: {pp: 1, dp: 8}\nmodel: {preset: gpt3-1.3b}\n"
        "training: {global_batch: 64, micro_batch: 1, overlap: {grad_reduce: true}, "
        "grad_bucket_mb: 100}\ncluster: {device: h100-sxm-80gb, nodes: 1, compute: "
        "{comm_hbm_touches: " +
        touches + "}}\n");
  };
  const ResolvedJob with = job("3");
  const ResolvedJob without = job("0");
  auto a = Simulate(with);
  auto b = Simulate(without);
  ASSERT_TRUE(a.ok() && b.ok() && with.model_costs);
  const double slowed = with.model_costs->stages[0].overlap_slowdown_ms;
  EXPECT_GT(slowed, 0);
  EXPECT_NEAR(a->report.breakdown->compute_slowed_by_comm_ms, slowed, 1e-9);
  EXPECT_EQ(b->report.breakdown->compute_slowed_by_comm_ms, 0);
  EXPECT_NEAR(a->report.breakdown->compute_ms - b->report.breakdown->compute_ms, slowed, 1e-4);
  EXPECT_NEAR(a->report.iteration_time_ms - b->report.iteration_time_ms, slowed, 1e-4);
}

TEST(ReportBuilder, ZeroBubbleH2WithoutSyncReachesZeroBubble) {
  // The Zero Bubble paper (Sec. 4-5): with post-validation (optimizer_sync false) and
  // F = I = W, ZB-H2's cost is m(F + I + W) plus the (p − 1)(F + I − 2W) = 0 bubble.
  const ResolvedJob job =
      Job("schedule: zb-h2\nmicrobatches: 8\noptimizer_sync: false\nparallel: {pp: 4}\n"
          "costs: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n");
  auto sim = Simulate(job, false);
  ASSERT_TRUE(sim.ok());
  EXPECT_NEAR(sim->report.iteration_time_ms, 8 * 3.0, 1e-9);
  EXPECT_NEAR(sim->report.bubble_fraction, 0.0, 1e-9);
  double longest = 0;
  for (const RankReport& k : sim->report.ranks) longest = std::max(longest, k.span_ms);
  EXPECT_DOUBLE_EQ(sim->report.iteration_time_ms, longest);
  EXPECT_GT(sim->report.makespan_ms, sim->report.iteration_time_ms);
}

TEST(ReportBuilder, MeasuredMemoryAndBytesAreTakenAsGiven) {
  const ResolvedJob job =
      Job("schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 2, dp: 2}\nmodel: {preset: tiny}\n"
          "cluster: {device: cpu}\n");
  StepRecord rec;
  rec.source = "run";
  rec.world_rows = true;
  rec.makespan_ns = 5'000'000;
  for (int r = 0; r < 4; ++r) {
    StepRecord::Row row = Row(0, 5'000'000, 4'000'000);
    row.bytes = CommBytes{100, 10 * r, 0, 0};
    row.memory = models::RankMemory{MemoryBytes{1, 2, 3, 4, 5}, 15 + r};
    rec.rows.push_back(row);
  }
  const Report rep = BuildReport(job, rec);
  ASSERT_EQ(rep.ranks.size(), 4u);
  EXPECT_EQ(rep.comm.pp, 400);
  EXPECT_EQ(rep.comm.dp, 60);
  EXPECT_EQ(rep.ranks[3].peak_memory_bytes, 18);
  EXPECT_EQ(rep.ranks[3].memory.activations, 4);
  EXPECT_EQ(rep.ranks[3].comm_bytes_sent, 130);
  // Megatron placement (tp, cp, dp, pp innermost first): world rank 3 is pp 1, dp 1.
  EXPECT_EQ(rep.ranks[3].pp_rank, 1);
  EXPECT_EQ(rep.ranks[3].dp_rank, 1);
  ASSERT_TRUE(rep.memory.has_value());
  EXPECT_EQ(rep.memory->worst_rank, 3);
  EXPECT_FALSE(rep.breakdown.has_value());  // the breakdown is the simulator's own
}

TEST(ReportBuilder, JsonRoundTripKeepsTheTypedSections) {
  const ResolvedJob job =
      Job("schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 2}\nmodel: {preset: tiny}\n"
          "cluster: {device: cpu}\n");
  auto sim = Simulate(job, false);
  ASSERT_TRUE(sim.ok());
  Report r = sim->report;
  r.measured = Measured{{1.0, 2.0}, {3.0}, "cpu", true, 1e-7};
  const std::string text = ReportToJson(r);
  auto back = ReportFromJson(text, "r.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(ReportToJson(*back), text);
  ASSERT_TRUE(back->breakdown && back->memory && back->job && back->measured);
  EXPECT_EQ(back->job->layers_per_stage, (std::vector<int>{2, 2}));  // tiny: 4 layers
}

// The report states the layers of each stage: 6 over 4 stages is Megatron-Core's split
// (models::SplitLayers); a report without the key (written before it) reads; a bad entry is
// named.
TEST(ReportBuilder, LayersPerStageAreReported) {
  const ResolvedJob job =
      Job("schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\nmodel: {preset: tiny, layers: "
          "6}\ncluster: {device: cpu}\n");
  auto sim = Simulate(job, false);
  ASSERT_TRUE(sim.ok());
  ASSERT_TRUE(sim->report.job);
  EXPECT_EQ(sim->report.job->layers_per_stage, (std::vector<int>{1, 2, 2, 1}));
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(ReportToJson(sim->report));
  j["job"].erase("layers_per_stage");
  auto old = ReportFromJson(j.dump(), "r.json");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_TRUE(old->job->layers_per_stage.empty());
  j["job"]["layers_per_stage"] = {1, 2.5};
  auto bad = ReportFromJson(j.dump(), "r.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("job.layers_per_stage[1]: must be an integer"),
            std::string::npos)
      << bad.error().message;
}

// Parameter servers: the predicted rows (the cost model's stage sizes; the CPU executor's
// float32), the dp_sync section, and both through JSON and back unchanged.
TEST(ReportBuilder, ParameterServersAndDpSyncRoundTrip) {
  const ResolvedJob job =
      Job("schedule: 1f1b\nmicrobatches: 4\noptimizer_sync: false\nparallel: {pp: 2, dp: 3}\n"
          "model: {preset: tiny}\ntraining: {precision: fp32, dp_sync: stale, staleness: 2}\n"
          "cluster: {device: cpu, dp_reduction: parameter-server, parameter_servers: 2}\n");
  auto sim = Simulate(job, false);
  ASSERT_TRUE(sim.ok());
  const Report& r = sim->report;
  ASSERT_EQ(r.parameter_servers.size(), 2u);
  // Independent truth: the servers take in what the workers push, and each worker pushes its
  // parameters (float32) once per step.
  std::int64_t pushed = 0, received = 0, params = 0;
  for (const RankReport& k : r.ranks) params += k.memory.params;
  for (const ParameterServerReport& p : r.parameter_servers) received += p.bytes_received;
  pushed = r.comm.dp;
  EXPECT_EQ(pushed, params);
  EXPECT_EQ(received, pushed);
  EXPECT_EQ(r.parameter_servers[1].rank, 7);  // after 2 x 3 workers
  ASSERT_TRUE(r.dp_sync);
  EXPECT_EQ(r.dp_sync->mode, "stale");
  EXPECT_EQ(r.dp_sync->staleness_bound, 2);
  EXPECT_EQ(r.dp_sync->worker_steps_per_s.size(), 3u);
  const std::string text = ReportToJson(r);
  auto back = ReportFromJson(text, "r.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(ReportToJson(*back), text);
}

}  // namespace
}  // namespace pipetwin
