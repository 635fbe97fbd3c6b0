// simulate.h — `pipetwin simulate`: job in, predicted timeline and report out.
//
//   Expected<JobSpec> job = LoadJob("job.yaml");
//   Expected<SimResult> r = Simulate(*job);
//   std::cout << ReportToJson(r->report);
#pragma once

#include <string>

#include "schedule/job.h"
#include "schedule/report.h"
#include "schedule/schedule.h"
#include "schedule/timeline.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace pipetwin {

struct SimResult {
  Schedule schedule;  // lowered and validated
  CostTable costs;
  Timeline timeline;
  SimStats stats;
  Report report;
};

struct InflightPeaks {
  int inflight = 0;        // forward done, input-gradient backward (B or I) not yet done
  int pending_weight = 0;  // I done, W not yet done
};
// From one rank's program order (the compute stream runs it in that order).
InflightPeaks ComputeInflightPeaks(const std::vector<Action>& program);

struct SimulateOptions {
  bool record_timeline = true;  // false: no timeline (faster; the report needs only statistics)
  bool per_world_rank = true;   // model-based jobs: a report row per GPU, or per pipeline rank
};
// Builds the schedule, plays it and reports.
Expected<SimResult> Simulate(const JobSpec& job, const SimulateOptions& opts);
inline Expected<SimResult> Simulate(const JobSpec& job, bool record_timeline = true) {
  return Simulate(job, SimulateOptions{.record_timeline = record_timeline});
}

// Report from engine statistics (shared by tests and the benchmark).
Report BuildReport(const JobSpec& job, const Schedule& s, const SimStats& stats);

}  // namespace pipetwin
