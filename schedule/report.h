// report.h — the report of one training step, predicted (sim/) or measured (exec/), with the
// same keys in both (DESIGN.md, "Report JSON"). Keys may be added, never renamed.
//
//   Report r = ...;
//   std::string json = ReportToJson(r);   // deterministic: same report, same bytes
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
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
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // added keys (breakdown, ...)
};

std::string ReportToJson(const Report& r);
Expected<Report> ReportFromJson(const std::string& text, const std::string& path);

}  // namespace pipetwin
