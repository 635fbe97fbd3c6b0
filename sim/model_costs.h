// model_costs.h — from the cost model (models/) to what the simulator and its report need:
// the per-stage cost table, each rank's memory over the step, and the report's throughput,
// breakdown, communication bytes and whether the job fits.
//
//   models::JobCosts jc = *models::BuildJobCosts(job, s.num_stages);
//   CostTable t = CostTableFromModel(jc);
//   SimStats st = RunEngine(s, t, {...}, nullptr);
//   Report r = BuildReport(job, s, st);
//   AddModelReport(r, job.parallel, s, st, jc);
#pragma once

#include <vector>

#include "models/costs.h"
#include "schedule/report.h"
#include "schedule/schedule.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace pipetwin {

CostTable CostTableFromModel(const models::JobCosts& jc);

struct RankMemory {
  MemoryBytes at_peak;  // by category when the total peaks
  std::int64_t peak = 0;
};
// Memory of one pipeline rank over its program: model state of its stages, plus the
// activations of every microbatch-chunk in flight (full from F until I or B, the W part from
// I until W, the transient working set inside I or B), plus communication buffers.
RankMemory RankMemoryOverProgram(const std::vector<Action>& program, const models::JobCosts& jc);

// The CPU executor's memory on one pipeline rank (`cluster.device: cpu`), replayed over its
// program exactly as exec/ allocates it: chunk state from models/cpu_inventory.h; a buffer
// per activation or gradient between chunks, from the action that produces it (or the
// posting of its receive: the engine posts the next `recv_window` receives in program order)
// until the action that consumes it or the send that takes it over. at_peak holds each
// category's own peak (as the executor's accountant measures them) and peak the peak of
// their sum.
RankMemory CpuExecutorRankMemory(const Schedule& s, int pp_rank, const models::JobCosts& jc,
                                 int recv_window);

// Replaces the report's per-pipeline-rank rows by one row per world rank (Megatron placement)
// and adds memory, `fits`, throughput, MFU, the step breakdown and communication bytes.
// per_world_rank = false keeps one row per pipeline rank (parameter sweeps).
void AddModelReport(Report& r, const ParallelConfig& par, const Schedule& s, const SimStats& st,
                    const models::JobCosts& jc, bool per_world_rank = true, int recv_window = 8);

}  // namespace pipetwin
