// costs.h — what each action costs the simulator, per stage (model chunk).
//
// Costs do not depend on the microbatch, so a table per stage is enough. With the job's
// abstract `costs:` every stage costs the same; the model-based cost model (models/) fills
// the table per stage (embedding on the first, output layer and loss on the last, uneven
// splits).
//
//   CostTable t = UniformCosts(job.costs.value(), schedule.num_stages);
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/config.h"
#include "sim/sim_time.h"

namespace pipetwin {

struct StageTimes {
  SimTime forward, backward_input, backward_weight, backward;  // backward: a fused B
  SimTime send_forward;   // activation transfer to the next stage (link occupancy)
  SimTime send_backward;  // gradient transfer to the previous stage
  SimTime dp_reduce;      // gradient reduction over data parallelism
  SimTime optimizer;
  std::int64_t send_bytes = 0;       // bytes of one activation (or gradient) transfer
  std::int64_t dp_reduce_bytes = 0;  // bytes one rank sends in its gradient reduction
  // Tied embeddings: what the rank sends in the first/last stages' gradient sum, which
  // optimizer's time includes; counted as pipeline traffic at OPT.
  std::int64_t embedding_sync_bytes = 0;
  // UNSHARD/RESHARD (FSDP over whole stages, models::StageCost::Unshard): the all-gather at
  // UNSHARD on the collective stream, and, while the stage is unsharded, the compute times and
  // the gradient reduction at REDUCE_GRAD that replace the ones above. Without FSDP
  // (`unshard_applies` false) UNSHARD and RESHARD cost nothing and change nothing.
  bool unshard_applies = false;
  SimTime unshard;
  std::int64_t unshard_bytes = 0;
  SimTime unsharded_forward, unsharded_backward_input, unsharded_backward_weight;
  SimTime unsharded_dp_reduce;
  std::int64_t unsharded_dp_reduce_bytes = 0;
};

struct CostTable {
  std::vector<StageTimes> stages;
  SimTime sync;  // the all-rank synchronisation before the optimizer step (optimizer_sync)
  // A rank's next action waits for each of its sends to finish (DeepSpeed's pipeline engine,
  // training.pipeline_engine); otherwise sends run beside the compute.
  bool blocking_sends = false;
  // The gradient reductions wait until the rank has computed its last gradient (Megatron-LM
  // without --overlap-grad-reduce reduces every chunk's gradients after the pipeline flush);
  // otherwise each REDUCE_GRAD starts where the schedule puts it, after its stage's last
  // gradient, beside the compute that follows (an interleaved rank's other chunks). FSDP
  // stages (UNSHARD) always reduce where they are.
  bool reduce_after_backward = false;
};

CostTable UniformCosts(const AbstractCosts& c, int num_stages);

}  // namespace pipetwin
