// `pipetwin simulate`, `schedule`, `schedules`, `presets`: the commands without MPI.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/cli.h"
#include "apps/commands.h"
#include "job/job.h"
#include "models/cluster.h"
#include "models/comm.h"
#include "models/model.h"
#include "models/training.h"
#include "schedule/build.h"
#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/quote.h"
#include "schedule/report.h"
#include "schedule/suggest.h"
#include "schedule/trace.h"
#include "schedule/trace_read.h"
#include "sim/ascii.h"
#include "sim/known_misses.h"
#include "sim/profile.h"
#include "sim/rebalance.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// ZeRO-3 with training.zero3_unit unstated is priced as DeepSpeed's stage 3 (module units,
// one NIC per rank). Published FSDP runs priced that way read up to 63.5% pessimistic
// (results/published-defaults.md), so the summary also says what the same job takes as FSDP
// (zero3_unit: layer): the iteration time and fit of the job re-resolved with that one key, or
// nothing where the model does not price it (a profile, or ZeRO-3 over a single rank).
struct FsdpAlternative {
  double iteration_ms = 0;
  bool fits = true;
};
std::optional<FsdpAlternative> PriceAsFsdp(const ResolvedJob& job, bool with_profile) {
  const models::TrainingConfig& t = job.config.training;
  if (with_profile || !job.model_costs || job.config.parallel.zero != 3 || t.zero3_unit_stated) {
    return std::nullopt;
  }
  JobConfig fsdp = job.config;
  fsdp.training.zero3_unit = models::Zero3Unit::kLayer;
  fsdp.training.zero3_unit_stated = true;
  auto resolved = ResolveJob(std::move(fsdp));
  if (!resolved) return std::nullopt;
  auto res = Simulate(*resolved, {.record_timeline = false, .per_world_rank = false});
  if (!res) return std::nullopt;
  return FsdpAlternative{.iteration_ms = res->report.iteration_time_ms,
                         .fits = !res->report.memory || res->report.memory->fits};
}

// The human summary of a prediction: the headline, throughput and memory, one row per
// pipeline rank (data-, tensor- and context-parallel replicas are identical).
void PrintSummary(const ResolvedJob& job, const SimResult& res,
                  const std::optional<FsdpAlternative>& fsdp,
                  const std::optional<Rebalance>& rebalance) {
  const Report& r = res.report;
  std::printf("%s: %s, pp %d, %d microbatches, %zu actions\n", job.path().c_str(),
              r.schedule.c_str(), r.pp, r.microbatches, job.schedule.NumActions());
  if (job.config.schedule == "interleaved-1f1b" && job.config.parallel.vpp == 1 && r.pp > 1) {
    std::printf(
        "note: parallel.vpp is 1, so interleaved-1f1b runs one chunk per rank (1F1B); "
        "vpp >= 2 interleaves\n");
  }
  if (job.config.training.precision == models::Precision::kFp8 && job.model_costs) {
    std::printf(
        "note: fp8 GEMMs run at %.2f of bf16's efficiency (cluster.compute.fp8_gemm_factor; "
        "H100's fitted 0.87 on NVIDIA's FP8 recipes of 2024-25, held out NeMo 24.07's FP8 table "
        "reads -13%% to +9%%, 4.5%% on average; H200's 0.89 is that times the two GPUs' measured "
        "FP8 GEMM ratios: models/README.md, FP8)\n",
        job.model_costs->cluster.device.fp8_gemm_factor);
  }
  // Where the suite says such a step reads optimistic (sim/known_misses.h).
  for (const KnownMiss& m : KnownMisses(job, r)) std::printf("note: %s\n", m.note.c_str());
  if (rebalance) {
    const Schedule& s = job.schedule;
    const int last_rank = s.stage_to_rank.back();
    const int first_rank = s.stage_to_rank.front();
    const bool last = rebalance->busiest_pp_rank == last_rank;
    const bool first = rebalance->busiest_pp_rank == first_rank;
    const char* why = last && first
                          ? " (it holds the first and the last stage: the embedding, the output "
                            "layer and the loss)"
                      : last  ? " (it holds the last stage: the output layer and the loss)"
                      : first ? " (it holds the first stage: the embedding)"
                              : "";
    std::printf(
        "note: pipeline rank %d computes %.1f%% more than the median rank%s; with "
        "model.layers_per_stage: %s the step takes %.3f ms (%+.1f%%) (Megatron-Core splits so "
        "with --decoder-first/last-pipeline-num-layers or a pipeline layout)\n",
        rebalance->busiest_pp_rank, 100 * rebalance->busiest_over_median, why,
        LayersList(rebalance->layers_per_stage).c_str(), rebalance->iteration_ms,
        100 * (rebalance->iteration_ms / r.iteration_time_ms - 1));
  }
  if (fsdp && r.iteration_time_ms > 0) {
    std::printf(
        "note: training.zero3_unit is not stated, so this is DeepSpeed's ZeRO stage 3 (each "
        "weight matrix gathered on its own, a rank's gathers on one NIC); as PyTorch FSDP "
        "(zero3_unit: layer, a unit per block) the step takes %.3f ms (%+.1f%%)%s\n",
        fsdp->iteration_ms, 100.0 * (fsdp->iteration_ms / r.iteration_time_ms - 1),
        fsdp->fits ? "" : " and does not fit in memory");
  }
  // cluster.variability: say what the order statistic did to the compute.
  if (job.model_costs && job.model_costs->straggler_factor != 1) {
    const models::Variability& v = job.model_costs->cluster.variability;
    const std::string what(models::ToString(v.distribution));
    char buf[128];
    if (v.distribution == models::Variability::Distribution::kSlowFraction) {
      std::snprintf(buf, sizeof buf, " (%.3g%% of the ranks %.3gx slower, cv %.3g)",
                    100 * v.fraction, v.slowdown, v.cv);
    } else {
      std::snprintf(buf, sizeof buf, " (cv %.3g)", v.cv);
    }
    std::printf(
        "stragglers: cluster.variability %s%s: each step waits for the slowest of %lld ranks, "
        "compute x %.4f\n",
        what.c_str(), buf, job.model_costs->straggler_ranks, job.model_costs->straggler_factor);
  }
  // The compute that the hidden DP/ZeRO collectives slowed (models/README.md, "Compute beside
  // hidden collectives"): said where it is at least 0.1% of the step.
  if (r.breakdown && r.iteration_time_ms > 0 &&
      r.breakdown->compute_slowed_by_comm_ms >= 1e-3 * r.iteration_time_ms) {
    std::printf(
        "overlap: DP/ZeRO collectives run hidden under compute for %.3f ms of the busiest "
        "pipeline rank's step; the compute beside them runs %.3f ms (%.1f%% of the step) longer "
        "for the HBM they take (cluster.compute.comm_hbm_touches %.3g)\n",
        r.breakdown->dp_comm_overlapped_ms, r.breakdown->compute_slowed_by_comm_ms,
        100 * r.breakdown->compute_slowed_by_comm_ms / r.iteration_time_ms,
        job.config.cluster.device.comm_hbm_touches);
  }
  // The training defaults that moved this prediction without the file saying so: a user (or
  // someone writing a published run's job) sees what was assumed and which key states it.
  if (job.model_costs && job.config.cluster.device.name != "cpu") {
    const JobConfig& c = job.config;
    const models::TrainingConfig& t = c.training;
    const ParallelConfig& par = c.parallel;
    std::vector<std::string> assumed;
    auto add = [&](const std::string& key, const std::string& what) {
      if (!c.source.Has("training." + key)) assumed.push_back(key + " " + what);
    };
    const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
    add("flash_attention", b(t.flash_attention) + " (" + c.cluster.device.name + "'s default)");
    if (par.tp > 1) {
      add("overlap.tp_comm", b(t.overlap.tp_comm));
      add("overlap.tp_dgrad_reduce", b(t.tp_dgrad_overlap(par.sp)) + " (follows parallel.sp)");
    }
    if (par.dp * par.cp > 1) {
      add("overlap.grad_reduce", b(t.overlap.grad_reduce));
      if (par.zero == 1 || par.zero == 2) add("overlap.param_gather", b(t.overlap.param_gather));
    }
    // The element type of the gradients held (memory, the optimizer's reads) and reduced.
    if (t.mixed_precision()) {
      add("grad_reduce_dtype", std::string(t.grad_reduce_name()));
    }
    if (par.pp > 1) {
      add("pipeline_engine", std::string(models::ToString(t.pipeline_engine)));
      if (t.pipeline_engine == models::PipelineEngine::kMegatron && par.tp > 1 && !par.sp) {
        add("pp_scatter_gather", b(t.pp_scatter_gather_applies(par.tp, par.sp)) +
                                     " (Megatron-LM's from 2021 to 2023, without sp)");
      }
    }
    add("cross_entropy", std::string(models::ToString(t.cross_entropy)));
    if (t.mixed_precision() && t.optimizer == models::Optimizer::kAdam) {
      add("master_weights", std::string(models::ToString(t.master_weights)));
    }
    if (!assumed.empty()) {
      std::string line;
      for (const std::string& a : assumed) line += (line.empty() ? "" : ", ") + a;
      std::printf("assumed (training: keys the job leaves out; docs/job-file.md): %s\n",
                  line.c_str());
    }
  }
  // An unstated uneven split (models::SplitLayers): say which one the step was priced with.
  if (const models::ModelConfig& m = job.config.model;
      job.model_costs && m.layers_per_stage.empty() && job.schedule.num_stages > 0 &&
      m.layers % job.schedule.num_stages != 0) {
    const std::vector<models::StageCost>& st = job.model_costs->stages;
    std::printf(
        "layers: %d do not split evenly over %d stages: the first and the last hold %d, the "
        "others %d (Megatron-Core's split that counts the embedding and the loss as layers); "
        "model.layers_per_stage states another\n",
        m.layers, job.schedule.num_stages, st.front().layers, st.size() > 2 ? st[1].layers : 0);
  }
  std::printf("iteration time %.3f ms (%s), makespan %.3f ms, bubble %.2f%%\n", r.iteration_time_ms,
              r.optimizer_sync ? "optimizer_sync" : "no optimizer sync", r.makespan_ms,
              100.0 * r.bubble_fraction);
  if (r.job && r.memory) {
    const JobSummary& j = *r.job;
    const MemorySummary& m = *r.memory;
    std::printf("%s on %d × %s: %.1f TFLOP/s per device, MFU %.1f%%, %.0f tokens/s\n",
                j.model.c_str(), j.world_size, j.device.c_str(), r.throughput.tflops_per_device,
                100.0 * r.throughput.mfu, r.throughput.tokens_per_s);
    if (r.hardware_flops && j.hardware_flops_per_iteration > j.model_flops_per_iteration) {
      std::printf("with the recomputed forward: %.1f TFLOP/s per device (HFU %.1f%%)\n",
                  r.hardware_flops->tflops_per_device, 100.0 * r.hardware_flops->hfu);
    }
    const auto gib = [](std::int64_t b) { return static_cast<double>(b) / kGiB; };
    if (m.fits) {
      std::printf("memory: fits; the fullest rank (%d) peaks at %.1f GiB of %.1f GiB\n",
                  m.worst_rank, gib(m.worst_peak_bytes), gib(m.device_memory_bytes));
      // A GPU's own runtime takes memory the model does not count; the cpu executor's
      // inventory is its whole footprint.
      const std::int64_t left = m.device_memory_bytes - m.worst_peak_bytes;
      if (j.device != "cpu" && left < m.device_memory_bytes / 20) {
        std::printf(
            "memory: only %.1f GiB left for what the model does not count (the CUDA context, "
            "NCCL's buffers, the allocator's fragmentation: a few GiB on a real run)\n",
            gib(left));
      }
    } else {
      std::printf("memory: DOES NOT FIT; rank %d needs %.1f GiB of %.1f GiB (%.1f GiB short)\n",
                  m.worst_rank, gib(m.worst_peak_bytes), gib(m.device_memory_bytes),
                  gib(m.shortfall_bytes));
    }
    // Where memory is short or tight under fp8, say what the count holds and the way out.
    const models::TrainingConfig& t = job.config.training;
    const bool tight =
        !m.fits || m.device_memory_bytes - m.worst_peak_bytes < m.device_memory_bytes / 20;
    if (tight && t.precision == models::Precision::kFp8 && !t.fp8_params) {
      std::printf(
          "memory: counts TransformerEngine's cached FP8 copy and transpose of every bf16 GEMM "
          "weight (2 bytes each); training.fp8_params: true holds those weights in FP8 (1 byte) "
          "instead\n");
    }
  }
  if (job.model_costs && job.model_costs->cluster.device.name != "cpu") {
    const models::ClusterConfig& c = job.model_costs->cluster;
    const models::Topology topo = models::TopologyOf(c);
    const models::RankLayout layout(job.parallel(), c.rank_order);
    for (const auto& [group, share] :
         models::ThrottledGroups(layout, c.gpus_per_node, topo,
                                 job.parallel().cp_comm == ParallelConfig::CpComm::kAllToAll)) {
      std::printf(
          "fabric: the %s groups keep %.2f of their NICs' bandwidth above the %d-node blocks "
          "(1:%g); cluster.rank_order (now %s) decides which groups leave a block\n",
          group.c_str(), share, c.fabric.block_nodes, c.fabric.oversubscription,
          models::ToString(c.rank_order).c_str());
    }
  }
  std::printf("%6s %12s %8s %10s %10s %12s\n", "pp", "busy ms", "bubble", "in-flight", "pending W",
              "peak GiB");
  for (const RankReport& k : r.ranks) {
    if (k.dp_rank != 0 || k.tp_rank != 0 || k.cp_rank != 0) continue;
    std::printf("%6d %12.3f %7.2f%% %10d %10d %12.2f\n", k.pp_rank >= 0 ? k.pp_rank : k.rank,
                k.compute_busy_ms, 100.0 * k.bubble_fraction, k.peak_inflight_microbatches,
                k.peak_pending_weight_grads, static_cast<double>(k.peak_memory_bytes) / kGiB);
  }
}

}  // namespace

int CmdSimulate(int argc, char** argv) {
  po::options_description o("options");
  o.add_options()("report", Text(), "write the report (JSON) to this file")(
      "trace", Text(), "write a Chrome trace (.gz: compressed)")("ascii", po::bool_switch(),
                                                                 "print the timeline as text")(
      "profile", Text(), "measured costs (pipetwin calibrate) instead of the model")(
      "per-pipeline-rank", po::bool_switch(), "one report row per pipeline rank, not per GPU");
  auto a = ParseArgs(argc, argv,
                     {"simulate", "pipetwin simulate JOB.yaml [options]",
                      "Predict one training step: iteration time, bubbles, in-flight "
                      "microbatches, memory per rank, throughput and MFU.",
                      "exactly one job file", 1, 1},
                     o);
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  const std::vector<std::pair<std::string, std::string>> outputs = {{"--report", a->Get("report")},
                                                                    {"--trace", a->Get("trace")}};
  if (Status s = CheckOutputs(outputs, {a->positional[0], a->Get("profile")}); !s) {
    return Fail(s.error());
  }
  auto job = LoadJob(a->positional[0]);
  if (!job) return Fail(job.error());
  if (job->config.IsCsvSchedule()) {
    if (Status s = CheckOutputs(outputs, {job->config.CsvPath()}); !s) return Fail(s.error());
  }
  const SimulateOptions so{.record_timeline = a->Has("trace") || a->Has("ascii"),
                           .per_world_rank = !a->Has("per-pipeline-rank")};
  auto res =
      a->Has("profile") ? SimulateWithProfile(*job, a->Get("profile"), so) : Simulate(*job, so);
  if (!res) return Fail(res.error());
  // What the summary adds (each re-simulates the job), before any file is written: a stop from
  // here on finds the outputs complete or untouched.
  const std::optional<FsdpAlternative> fsdp = PriceAsFsdp(*job, a->Has("profile"));
  const std::optional<Rebalance> rebalance = SuggestRebalance(*job, res->report, a->Has("profile"));
  // Paths were checked before any work; the report's text is built first, the trace (possibly
  // large, streamed) is written next, the report last.
  const std::string report = a->Has("report") ? ReportToJson(res->report) : "";
  std::int64_t trace_bytes = 0;
  if (a->Has("trace")) {
    if (Status s = WriteTraceFile(a->Get("trace"), res->timeline, job->path(), &trace_bytes); !s) {
      return Fail(s.error());
    }
  }
  if (a->Has("report")) {
    if (Status s = WriteFileAtomic(a->Get("report"), report); !s) return Fail(s.error());
  }
  PrintSummary(*job, *res, fsdp, rebalance);
  if (const std::string note = TraceTooLargeToReadNote(a->Get("trace"), trace_bytes);
      !note.empty()) {
    std::printf("note: %s\n", note.c_str());
  }
  if (a->Has("ascii")) {
    std::printf("\n%s", AsciiTimeline(res->timeline, job->schedule.StagesPerRank()).c_str());
  }
  return 0;
}

int CmdSchedule(int argc, char** argv) {
  po::options_description o("options");
  o.add_options()("csv", Text(), "write the CSV to this file (default: stdout)")(
      "format", Text(),
      "compute_only (default: F, B, I, W) | compute_comms (what torch's "
      "_PipelineScheduleRuntime runs: sends, receives in send order, WAIT_SEND_*, "
      "REDUCE_GRAD, WAIT_REDUCE_GRAD; no OPT) | pipetwin (every action of pipetwin's IR, OPT too)")(
      "idle-cells", po::bool_switch(),
      "compute_only only: step-aligned rows with empty idle cells, as torch's "
      "PipelineScheduleMulti needs them");
  auto a = ParseArgs(argc, argv,
                     {"schedule", "pipetwin schedule JOB.yaml [options]",
                      "Write the per-rank programs (PyTorch action syntax, one row per rank).",
                      "exactly one job file", 1, 1},
                     o);
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  const std::string fmt = a->Get("format", "compute_only");
  if (fmt != "compute_only" && fmt != "compute_comms" && fmt != "pipetwin") {
    const std::string guess = DidYouMean(fmt, {"compute_only", "compute_comms", "pipetwin"});
    return Fail(Error::BadInput("--format: must be compute_only, compute_comms or pipetwin, got " +
                                Quoted(fmt) + (guess.empty() ? "" : "; " + guess)));
  }
  const CsvFormat format = fmt == "compute_comms" ? CsvFormat::kComputeComms
                           : fmt == "pipetwin"    ? CsvFormat::kPipetwin
                                                  : CsvFormat::kComputeOnly;
  const bool idle_cells = a->Has("idle-cells");
  if (idle_cells && format != CsvFormat::kComputeOnly) {
    return Fail(Error::BadInput("--idle-cells: only with --format compute_only (got " + fmt + ")"));
  }
  if (Status s = CheckOutputs({{"--csv", a->Get("csv")}}, {a->positional[0]}); !s) {
    return Fail(s.error());
  }
  auto job = LoadJob(a->positional[0]);
  if (!job) return Fail(job.error());
  if (job->config.IsCsvSchedule()) {
    if (Status s = CheckOutputs({{"--csv", a->Get("csv")}}, {job->config.CsvPath()}); !s) {
      return Fail(s.error());
    }
  }
  const std::string text =
      idle_cells ? WriteStepAlignedCsv(job->schedule) : WriteScheduleCsv(job->schedule, format);
  if (!a->Has("csv")) {
    std::fputs(text.c_str(), stdout);
  } else if (Status st = WriteFileAtomic(a->Get("csv"), text); !st) {
    return Fail(st.error());
  }
  return 0;
}

int CmdSchedules(int argc, char** argv) {
  auto a = ParseArgs(
      argc, argv,
      {"schedules", "pipetwin schedules", "List the schedule generators.", "no arguments", 0, 0},
      po::options_description("options"));
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  for (const GeneratorInfo& g : AllGenerators()) {
    std::printf("%-18s %s\n", std::string(g.name).c_str(), std::string(g.description).c_str());
  }
  return 0;
}

int CmdPresets(int argc, char** argv) {
  auto a = ParseArgs(argc, argv,
                     {"presets", "pipetwin presets",
                      "List the model presets (any field can be overridden in `model:`) and the "
                      "devices.",
                      "no arguments", 0, 0},
                     po::options_description("options"));
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  std::printf("%-14s %7s %7s %7s %6s %6s %7s %6s %11s  %s\n", "model", "layers", "hidden", "ffn",
              "heads", "kv", "vocab", "seq", "parameters", "style (model: keys)");
  for (const std::string& name : models::PresetNames()) {
    const models::ModelConfig m = *models::FindPreset(name);
    std::string style = std::string(models::ToString(m.mlp)) + " " +
                        std::string(models::ToString(m.norm)) + " " +
                        std::string(models::ToString(m.position));
    style += m.bias ? " bias" : " no-bias";
    style += m.dropout ? " dropout" : " no-dropout";
    style += m.tied_embeddings ? " tied" : " untied";
    std::printf("%-14s %7d %7d %7d %6d %6d %7d %6d %11.3g  %s\n", name.c_str(), m.layers, m.hidden,
                m.ffn_hidden, m.heads, m.kv_heads, m.vocab, m.seq_len,
                static_cast<double>(models::TotalParameters(m)), style.c_str());
  }
  std::printf("\n%-16s %12s %12s %10s\n", "device", "bf16 TFLOP/s", "fp32 TFLOP/s", "memory GiB");
  for (const std::string& name : models::DeviceNames()) {
    const models::DeviceSpec d = *models::FindDevice(name);
    std::printf("%-16s %12.4g %12.4g %10.1f\n", name.c_str(), d.peak_bf16_flops * 1e-12,
                d.peak_fp32_flops * 1e-12, static_cast<double>(d.hbm_bytes) / kGiB);
  }
  return 0;
}

}  // namespace pipetwin
