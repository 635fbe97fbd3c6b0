// simulate.h — `pipetwin simulate`: a resolved job in, predicted timeline and report out.
//
//   Expected<ResolvedJob> job = LoadJob("job.yaml");
//   Expected<SimResult> r = Simulate(*job);
//   std::cout << ReportToJson(r->report);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "job/job.h"
#include "job/report_builder.h"
#include "schedule/report.h"
#include "schedule/schedule.h"
#include "schedule/timeline.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace pipetwin {

struct SimResult {
  CostTable costs;
  Timeline timeline;
  SimStats stats;
  Report report;
};

struct SimulateOptions {
  bool record_timeline = true;  // false: no timeline (faster; the report needs only statistics)
  bool per_world_rank = true;   // model-based jobs: a report row per GPU, or per pipeline rank
};

// The job's cost table: its abstract `costs:` or the cost model's per-stage costs (with both,
// the costs' times and the model's bytes).
CostTable JobCostTable(const ResolvedJob& job);

// Plays the job's schedule against its costs and reports.
Expected<SimResult> Simulate(const ResolvedJob& job, const SimulateOptions& opts);
inline Expected<SimResult> Simulate(const ResolvedJob& job, bool record_timeline = true) {
  return Simulate(job, SimulateOptions{.record_timeline = record_timeline});
}
// execution.stragglers in step `step`: per pipeline rank, the largest factor of its world
// ranks (its DP, TP and CP replicas; exact when the slow ranks are in one replica, an upper
// bound otherwise, as the simulator plays one pipeline for all replicas).
std::vector<double> StragglerFactors(const ResolvedJob& job, std::int64_t step);
// The same per data-parallel replica: [dp][pipeline rank], the largest factor of its TP and CP
// ranks (parameter servers play each worker on its own: sim/dp_sync.h).
std::vector<std::vector<double>> ReplicaStragglerFactors(const ResolvedJob& job, std::int64_t step);
// Plays a given cost table (a calibration profile's, scaled, ...); with execution.stragglers,
// scaled by their factors (with a random part: once per measured step, the median play kept,
// as run reports the median measured step).
SimResult SimulateWithCosts(const ResolvedJob& job, CostTable costs, const SimulateOptions& opts);

// The executor's wait limit when the job gives no execution.timeout_s: kTimeoutStepFactor ×
// the predicted step + kTimeoutMarginS (start-up, first use of the links, a loaded machine),
// at most 86400 s. A stopped rank is then noticed seconds after a short step would have ended,
// not after minutes. Sets execution.timeout_s in `job` and returns it; a given one is kept.
// `predicted_step_ms`: the step where the caller has simulated the job already.
inline constexpr double kTimeoutStepFactor = 10;
inline constexpr double kTimeoutMarginS = 15;
Expected<double> SizeRunTimeout(ResolvedJob& job, std::optional<double> predicted_step_ms = {});

// What the engine's statistics hand the report builder (job/report_builder.h).
StepRecord StepRecordOf(const SimStats& stats);

}  // namespace pipetwin
