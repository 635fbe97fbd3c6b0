// A better split of the layers over the pipeline stages, where the stages' work is uneven: the
// last stage holds the output layer and the loss, the first the embedding, so with an even split
// their ranks are the busiest and every other rank waits for them each step. Megatron-Core
// splits otherwise when asked (--decoder-first/last-pipeline-num-layers,
// --account-for-embedding/loss-in-pipeline-split, a pipeline layout); here the job says it with
// model.layers_per_stage. Found by moving one layer at a time from the busiest pipeline rank to
// the least busy one, each step re-simulated, while the step gets shorter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "job/job.h"
#include "schedule/report.h"

namespace pipetwin {

struct Rebalance {
  std::vector<int> layers_per_stage;  // the suggested model.layers_per_stage
  std::vector<int> before;            // the job's split
  double iteration_ms = 0;            // the step with the suggested split
  double before_ms = 0;               // the job's step
  int busiest_pp_rank = -1;           // in the job's step
  double busiest_over_median = 0;     // its compute over the median pipeline rank's, minus 1
};

// Where the job's pipeline ranks are uneven (the busiest's compute at least 5% above the
// median's) and moving layers shortens the step by at least 1%. Model-priced jobs only (not
// abstract costs, not a profile: `with_profile`), pp >= 2.
std::optional<Rebalance> SuggestRebalance(const ResolvedJob& job, const Report& r,
                                          bool with_profile);

// A split as the job file writes it: "[2, 2, 3, ..., 1]".
std::string LayersList(const std::vector<int>& layers);

}  // namespace pipetwin
