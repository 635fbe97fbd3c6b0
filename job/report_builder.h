// report_builder.h — the ONE report builder: (resolved job, schedule, step record) → Report,
// for the simulator's predicted step and the executor's measured step alike, so that every
// key means the same on both sides (DESIGN.md, "Report JSON" and "Iteration time").
//
// A side hands over what only it knows, per rank: the step statistics (busy time and span,
// one definition in schedule/timeline.h), the bytes it sent by group, and — measured only —
// the memory its accountant saw. Everything else (iteration time under optimizer_sync true
// and false, bubbles, in-flight and pending-W peaks from the program, throughput, MFU,
// predicted memory, the rank coordinates) is derived here.
//
//   StepRecord rec{.source = "simulate", .makespan_ns = st.makespan.nanos()};
//   for (const RankStats& r : st.ranks) rec.rows.push_back({.step = r.step, ...});
//   Report rep = BuildReport(job, rec);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "job/job.h"
#include "models/param_server.h"
#include "models/program_memory.h"
#include "schedule/report.h"
#include "schedule/timeline.h"

namespace pipetwin {

struct StepRecord {
  std::string source;       // "simulate" or "run"
  bool world_rows = false;  // rows are world ranks (run) or pipeline ranks (simulate)
  std::int64_t makespan_ns = 0;
  struct Row {
    RankStepStats step;
    CommBytes bytes;                           // sent in the step, by group
    std::int64_t dp_exposed_ns = 0;            // predicted: reduction still running at OPT
    std::optional<models::RankMemory> memory;  // measured; predicted rows take the model's
  };
  std::vector<Row> rows;
  // Measured, with parameter servers: the bytes each server moved per step. Empty: the
  // builder predicts them from the cost model (models/param_server.h).
  std::vector<models::PsServerBytes> servers;
  // With parameter servers: the workers' pace under training.dp_sync, played (sim/dp_sync.h)
  // or measured, summarised by models::SummarizeDpSync on both sides.
  std::optional<DpSyncReport> dp_sync;
};

struct ReportOptions {
  // Predicted model jobs: a row per GPU (true) or per pipeline rank (false: sweeps, very
  // large jobs). Measured reports always have a row per process.
  bool per_world_rank = true;
};

// The iteration time of a step (DESIGN.md): the makespan under optimizer_sync, else the
// longest rank span.
std::int64_t IterationNs(bool optimizer_sync, const StepRecord& step);

Report BuildReport(const ResolvedJob& job, const StepRecord& step, const ReportOptions& opts = {});

}  // namespace pipetwin
