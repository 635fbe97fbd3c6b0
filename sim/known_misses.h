// Where the accuracy suite says predictions of a kind read off, optimistic or pessimistic, and
// no mechanism is modelled (models/README.md, "Known miss", "Known miss, FSDP over many nodes"
// and "Known miss, one microbatch a step"): said beside the prediction, by `simulate` and `plan`
// alike, never folded into it. The figures quoted are the suite's own
// (tests/apps/known_miss_figures_test.py recomputes them).
#pragma once

#include <string>
#include <vector>

#include "job/job.h"
#include "schedule/report.h"

namespace pipetwin {

struct KnownMiss {
  // "fsdp_hidden_collectives" | "sharded_dp_over_many_nodes" | "one_microbatch_a_step"
  std::string id;
  double hidden_dp_pct = 0;   // the share of the step (%) the DP collectives run hidden
  double optimistic_pct = 0;  // how optimistic the suite's runs of this kind read, at most (%;
                              // 0 where they all read pessimistic)
  std::string note;           // the sentence `simulate` prints after "note: "
};

// The known misses a predicted step falls in: from its job (parallel, training) and its report
// (the breakdown's hidden DP time, the microbatches a step). None without the model's breakdown
// (abstract costs or a profile).
std::vector<KnownMiss> KnownMisses(const ResolvedJob& job, const Report& r);

}  // namespace pipetwin
