// dp_sync.h — the simulator's prediction of training.dp_sync (models/dp_sync.h) with
// parameter servers: every data-parallel worker (replica of the pipeline) plays each step on
// its own, with the execution.stragglers factors of its own ranks in that step (its pipeline's
// makespan, its push and pull included); the protocol then decides when each step starts.
//
//   std::optional<DpSyncReport> d = PredictDpSync(job, JobCostTable(job));
#pragma once

#include <optional>

#include "job/job.h"
#include "schedule/report.h"
#include "sim/costs.h"

namespace pipetwin {

// Nothing where the job has no parameter servers (models/param_server.h).
std::optional<DpSyncReport> PredictDpSync(const ResolvedJob& job, const CostTable& costs);

}  // namespace pipetwin
