// model_costs.h — from the cost model (models/) to the simulator's per-stage cost table.
//
//   models::JobCosts jc = *models::BuildJobCosts(inputs, s.num_stages);
//   CostTable t = CostTableFromModel(jc, s.stage_to_rank);
//   SimStats st = RunEngine(s, t, {...}, nullptr);
#pragma once

#include <vector>

#include "models/costs.h"
#include "sim/costs.h"

namespace pipetwin {

// With the schedule's stage_to_rank, each send takes the link of its two pipeline ranks
// (JobCosts::pp_boundary_inter: NVLink where they share a node); without, the worst link.
CostTable CostTableFromModel(const models::JobCosts& jc,
                             const std::vector<int>& stage_to_rank = {});

}  // namespace pipetwin
