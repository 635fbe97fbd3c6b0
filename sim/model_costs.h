// model_costs.h — from the cost model (models/) to the simulator's per-stage cost table.
//
//   models::JobCosts jc = *models::BuildJobCosts(inputs, s.num_stages);
//   CostTable t = CostTableFromModel(jc);
//   SimStats st = RunEngine(s, t, {...}, nullptr);
#pragma once

#include "models/costs.h"
#include "sim/costs.h"

namespace pipetwin {

CostTable CostTableFromModel(const models::JobCosts& jc);

}  // namespace pipetwin
