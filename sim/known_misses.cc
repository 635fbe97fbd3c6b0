#include "sim/known_misses.h"

#include <cstdio>

namespace pipetwin {
namespace {

// The slope of MosaicML's FSDP errors on the share of the step the model hides under compute
// (14 checkpointed H100 runs, R^2 0.23, once the compute beside hidden collectives is charged,
// models/README.md "Compute beside hidden collectives"; 0.52 (R^2 0.80) before that, 0.54
// before the attention presets of 2026-11-28, 0.49 before the runs' kernels, 0.72 before the
// casts; scripts/overlap_regression.py). Said, not modelled.
constexpr double kFsdpHiddenSharePaid = 0.17;
// The most optimistic of MLPerf's Llama 3.1 8B runs at one microbatch a step (Cisco, 128 H100,
// tp 2: +50.3%; results/published.md).
constexpr double kOneMicrobatchWorstPct = 50.3;

}  // namespace

std::vector<KnownMiss> KnownMisses(const ResolvedJob& job, const Report& r) {
  std::vector<KnownMiss> out;
  if (!job.model_costs || !r.breakdown || r.iteration_time_ms <= 0) return out;
  const double hidden = 100.0 * r.breakdown->dp_comm_overlapped_ms / r.iteration_time_ms;
  const ParallelConfig& par = job.config.parallel;
  char buf[640];
  // FSDP's hidden collectives: the one cost source whose published runs say they are not
  // hidden (models/README.md, "Known miss"; scripts/overlap_regression.py).
  if (par.zero == 3 && job.config.training.zero3_unit == models::Zero3Unit::kLayer &&
      hidden >= 1.0) {
    std::snprintf(buf, sizeof buf,
                  "FSDP's collectives run hidden under compute for %.0f%% of this step; "
                  "MosaicML's published FSDP runs were slower than predicted by about 0.2 x that "
                  "share (14 checkpointed H100 runs; not modelled: models/README.md, Known miss), "
                  "so read this prediction as up to %.0f%% optimistic",
                  hidden, kFsdpHiddenSharePaid * hidden);
    out.push_back({"fsdp_hidden_collectives", hidden, kFsdpHiddenSharePaid * hidden, buf});
  }
  // One microbatch a step under Megatron-style data parallelism (ZeRO 0 to 2): the reduce-scatter
  // and gather have only that microbatch's backward and forward to hide under, and MLPerf's
  // Llama 3.1 8B runs of that kind read far optimistic (models/README.md, "Known miss, one
  // microbatch a step"). No mechanism was found that also fits the suite's other such rows.
  if (par.zero < 3 && par.dp > 1 && r.microbatches == 1 && hidden >= 10.0) {
    std::snprintf(buf, sizeof buf,
                  "one microbatch a step, and data-parallel collectives run hidden under its "
                  "compute for %.0f%% of this step; MLPerf's Llama 3.1 8B runs of this kind "
                  "(Megatron-Core, 3 runs on H100 and H200, 17%% to 37%% hidden) were slower than "
                  "predicted by 17%% to 48%%, while Megatron-Core's 2024 H100 table "
                  "(micro-batches assumed) reads +4%% to +6%% (not modelled: models/README.md, "
                  "Known miss, one microbatch a step)",
                  hidden);
    out.push_back({"one_microbatch_a_step", hidden, kOneMicrobatchWorstPct, buf});
  }
  return out;
}

}  // namespace pipetwin
