// compare.h — predicted against measured: the error table of two reports of the same job.
//
// Rows: the iteration time and bubble; per rank the compute busy time, the bubble, memory by
// category and at the peak, bytes sent; communication bytes by group. Times are compared
// with a relative error, bubble fractions by their difference, bytes must be equal.
//
//   Expected<Comparison> c = CompareReports(*predicted, *measured);
//   WriteFileAtomic("errors.md", ComparisonMarkdown(*c, "1f1b, pp 2"));
//   bool ok = c->iteration_error_abs() <= 0.05 && c->memory_equal && c->bytes_equal;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/action.h"
#include "schedule/expected.h"
#include "schedule/report.h"

namespace pipetwin {

struct ErrorRow {
  std::string metric;  // "iteration_time_ms", "memory.activations", ...
  int rank = -1;       // -1: the whole job
  double predicted = 0;
  double measured = 0;
  enum class Kind { kTime, kBytes, kFraction } kind = Kind::kTime;
  // (predicted − measured) / measured; 0 when both are 0, +inf when only measured is 0.
  double relative_error() const;
  // Bytes: equal. Times: |relative error| ≤ tolerance. Fractions (bubble): |difference| ≤
  // tolerance (the bubble is itself a ratio of times).
  bool ok(double tolerance) const;
};

struct Comparison {
  std::vector<ErrorRow> rows;
  double iteration_error = 0;  // relative, signed
  bool memory_equal = true;    // every rank, every category and the peak
  bool bytes_equal = true;     // every rank's bytes sent and every group's total
  int memory_rows = 0, bytes_rows = 0;
  double iteration_error_abs() const {
    return iteration_error < 0 ? -iteration_error : iteration_error;
  }
};

// The reports must describe the same job: same schedule and microbatches. Ranks are matched
// by index; a predicted report with one row per pipeline rank is matched against a measured
// one with a row per world rank (pipeline outermost in the placement: world rank w belongs
// to pipeline rank w / (world / pp)).
Expected<Comparison> CompareReports(const Report& predicted, const Report& measured);

// Markdown: a summary line and the table (metric, rank, predicted, measured, error, ok).
std::string ComparisonMarkdown(const Comparison& c, const std::string& title, double tolerance);
// CSV with a header: metric,rank,unit,predicted,measured,difference,relative_error,ok.
std::string ComparisonCsv(const Comparison& c, double tolerance);

// "Where time goes" (`pipetwin compare --profile`): a calibration profile's compute actions, one
// row per stage and kind, in stage order.
struct ActionRate {
  int stage = 0;
  ActionKind kind = ActionKind::kForward;  // F, I, W, B or OPT
  double ms = 0;                           // the median of the action
  double gflops = 0;                       // the rate it achieved (GFLOP/s); 0: not known
};
struct WhereTimeGoes {
  std::string profile;         // the profile's path, named in the text
  std::string backend;         // as the profile states it; may be empty
  double roofline_gflops = 0;  // the profile's roofline.gemm_gflops; 0: none
  double roofline_gb_s = 0;    // roofline.memory_gb_s; 0: none
  std::vector<ActionRate> rows;
};
// Markdown: a "Where time goes" section (### heading), a sentence on where the numbers come
// from and a table: stage, action, median ms, GFLOP per microbatch (= GFLOP/s x ms / 1000),
// achieved GFLOP/s and its share of the roofline's GEMM rate ("–" where not known).
std::string WhereTimeGoesMarkdown(const WhereTimeGoes& w);

}  // namespace pipetwin
