// report.h — the report of one training step, predicted (sim/) or measured (exec/), with the
// same keys in both (DESIGN.md, "Report JSON"). Keys may be added, never renamed. The type
// and its JSON live here, beside the Timeline; job/report_builder.h is the ONE place that
// fills it, for both sides.
//
//   Report r = ...;
//   std::string json = ReportToJson(r);   // deterministic: same report, same bytes
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule/expected.h"

namespace pipetwin {

struct MemoryBytes {
  std::int64_t params = 0;
  std::int64_t grads = 0;
  std::int64_t optimizer = 0;
  std::int64_t activations = 0;
  std::int64_t comm_buffers = 0;
};

struct RankReport {
  int rank = 0;
  double compute_busy_ms = 0;
  double bubble_fraction = 0;
  double span_ms = 0;  // first action's start to last action's end
  std::int64_t peak_memory_bytes = 0;
  MemoryBytes memory;  // at the peak
  std::int64_t comm_bytes_sent = 0;
  int peak_inflight_microbatches = 0;
  int peak_pending_weight_grads = 0;
  // Coordinates in the parallel layout (written when pp_rank >= 0).
  int pp_rank = -1, dp_rank = 0, tp_rank = 0, cp_rank = 0;
};

struct CommBytes {
  std::int64_t pp = 0, dp = 0, tp = 0, cp = 0;
  std::int64_t total() const { return pp + dp + tp + cp; }
};

struct Throughput {
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double tflops_per_device = 0;
  double mfu = 0;
};

// Typed sections (written as their own JSON keys, in this order, where present).
struct HardwareFlops {  // what runs, recompute included (Narayanan et al. 2021, Eq. 3)
  double tflops_per_device = 0;
  double hfu = 0;
};
struct Breakdown {  // the step of the busiest pipeline rank (predicted)
  int pipeline_rank = 0;
  double compute_ms = 0;
  double tp_cp_comm_exposed_ms = 0;
  double dp_comm_exposed_ms = 0;
  double pp_comm_and_bubble_ms = 0;
  // Communication hidden under compute (training.overlap), in none of the above: TP/SP
  // collectives under the GEMMs, DP gradient buckets under the backward and ZeRO's parameter
  // all-gather under the next forward.
  double tp_cp_comm_overlapped_ms = 0;
  double dp_comm_overlapped_ms = 0;
  // Of compute_ms, what the compute lost running beside the hidden DP and ZeRO collectives
  // (their share of HBM; cluster.compute.comm_hbm_touches).
  double compute_slowed_by_comm_ms = 0;
};
struct MemorySummary {
  bool fits = true;
  std::int64_t device_memory_bytes = 0;
  int worst_rank = 0;
  std::int64_t worst_peak_bytes = 0;
  std::int64_t shortfall_bytes = 0;
};
struct JobSummary {
  std::string model;
  int world_size = 0;
  int pipeline_replicas = 0;
  std::int64_t parameters = 0;
  double model_flops_per_iteration = 0;
  double hardware_flops_per_iteration = 0;
  std::string device;
  // The decoder layers of each pipeline stage as priced and run (models::SplitLayers); empty
  // in a report written before the key existed.
  std::vector<int> layers_per_stage;
};
struct ProfileUse {  // simulate --profile
  std::string path;
  bool has_jitter = false;
  int jitter_samples = 0;
  double nominal_iteration_time_ms = 0;  // at median speeds
  double jitter_min_ms = 0, jitter_max_ms = 0;
};
struct Measured {  // run: keys measured_steps_ms, losses, backend, reference_max_relative_error
  std::vector<double> steps_ms;  // every measured step's iteration time
  std::vector<double> losses;    // every step's mean loss, warm-up included
  std::string backend;
  bool has_reference = false;
  double reference_max_relative_error = 0;
};

// `cluster.dp_reduction: parameter-server` (models/param_server.h): one row per server rank
// (world ranks after the workers), the bytes it moves in one step.
struct ParameterServerReport {
  int server = 0;
  int rank = 0;  // world rank: pp × dp × tp × cp + server
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

// training.dp_sync (models/dp_sync.h): how the data-parallel workers (replicas of the
// pipeline) progressed over the measured steps, each at its own pace under async and stale.
struct DpSyncReport {
  std::string mode;         // sync | async | stale
  int staleness_bound = 0;  // stale: s; sync: 0; async: -1 (none)
  int steps = 0;            // measured steps per worker
  std::vector<double> worker_steps_per_s;
  double steps_per_s = 0;     // mean over the workers
  double samples_per_s = 0;   // all workers: sum of steps_per_s x sequences per worker step
  double staleness_mean = 0;  // updates missing from the parameters a gradient was computed on
  int staleness_max = 0;
};

struct Report {
  std::string source;  // "simulate" or "run"
  std::string schedule;
  int pp = 0;
  int microbatches = 0;
  bool optimizer_sync = true;
  double iteration_time_ms = 0;
  double makespan_ms = 0;
  double bubble_fraction = 0;
  std::vector<RankReport> ranks;
  CommBytes comm;
  Throughput throughput;
  std::optional<HardwareFlops> hardware_flops;
  std::optional<Breakdown> breakdown;
  std::optional<MemorySummary> memory;
  std::optional<JobSummary> job;
  std::optional<ProfileUse> profile;
  std::optional<Measured> measured;
  std::vector<ParameterServerReport> parameter_servers;  // key written only when not empty
  std::optional<DpSyncReport> dp_sync;
};

std::string ReportToJson(const Report& r);
// The breakdown section as the report writes it (also inside `pipetwin plan --report`).
nlohmann::ordered_json BreakdownJson(const Breakdown& b);
Expected<Report> ReportFromJson(const std::string& text, const std::string& path);

}  // namespace pipetwin
