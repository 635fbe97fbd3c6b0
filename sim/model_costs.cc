#include "sim/model_costs.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace pipetwin {

namespace {

// The transfer of stage c between pipeline ranks a and b: NVLink's time where the boundary's
// ranks share a node in every replica, else the worst link's; pairs that are not neighbours
// on the ring of pipeline ranks (a schedule file may place stages anywhere) take the worst.
double TransferMs(const models::JobCosts& jc, const models::StageCost& c, int a, int b) {
  const int pp = static_cast<int>(jc.pp_boundary_inter.size());
  if (pp < 2 || a < 0 || b < 0 || a >= pp || b >= pp) return c.p2p_ms;
  int boundary = -1;
  if (b == (a + 1) % pp)
    boundary = a;
  else if (a == (b + 1) % pp)
    boundary = b;
  if (boundary < 0) return c.p2p_ms;
  return jc.pp_boundary_inter[static_cast<std::size_t>(boundary)] ? c.p2p_ms : c.p2p_intra_ms;
}

}  // namespace

CostTable CostTableFromModel(const models::JobCosts& jc, const std::vector<int>& stage_to_rank) {
  CostTable t;
  t.stages.reserve(jc.stages.size());
  const bool placed = stage_to_rank.size() == jc.stages.size();
  const auto rank = [&](std::size_t stage) { return stage_to_rank[stage]; };
  for (std::size_t k = 0; k < jc.stages.size(); ++k) {
    const models::StageCost& c = jc.stages[k];
    StageTimes st;
    st.forward = SimTime::FromMillis(c.forward_ms);
    st.backward_input = SimTime::FromMillis(c.backward_input_ms);
    st.backward_weight = SimTime::FromMillis(c.backward_weight_ms);
    st.backward = SimTime::FromMillis(c.backward_input_ms + c.backward_weight_ms -
                                      c.fused_backward_tp_hidden_ms);
    st.send_forward = st.send_backward = SimTime::FromMillis(c.p2p_ms);
    if (placed && k + 1 < jc.stages.size()) {
      st.send_forward = SimTime::FromMillis(TransferMs(jc, c, rank(k), rank(k + 1)));
    }
    if (placed && k > 0) {
      st.send_backward = SimTime::FromMillis(TransferMs(jc, c, rank(k), rank(k - 1)));
    }
    st.send_bytes = static_cast<std::int64_t>(c.p2p_send_bytes);
    // The reduction (and, for ZeRO 1/2, the parameter all-gather that follows the step) run on
    // the collective stream. Under training.overlap the parts hidden under compute are not
    // played. Tied embeddings: the first and last stages' gradient sum comes after every
    // reduction, just before the step (Megatron-LM's finalize_model_grads; the CPU executor's
    // OPT), so OPT plays it, with or without data parallelism; it is local (free) where one
    // rank holds both stages.
    const bool sync_local = placed && rank(0) == rank(jc.stages.size() - 1);
    const double sync_ms = sync_local ? 0 : c.embedding_sync_ms;
    st.embedding_sync_bytes = sync_local ? 0 : static_cast<std::int64_t>(c.embedding_sync_bytes);
    st.dp_reduce = SimTime::FromMillis(c.dp_reduce_ms - c.dp_reduce_hidden_ms);
    st.dp_reduce_bytes = static_cast<std::int64_t>(c.dp_reduce_bytes);
    st.optimizer =
        SimTime::FromMillis(c.optimizer_ms + c.param_allgather_ms - c.param_allgather_hidden_ms +
                            c.overlap_slowdown_ms + sync_ms);
    if (c.unshard.applies) {
      st.unshard_applies = true;
      st.unshard = SimTime::FromMillis(c.unshard.gather_ms);
      st.unshard_bytes = c.unshard.gather_bytes;
      st.unsharded_forward = SimTime::FromMillis(c.unshard.forward_ms);
      st.unsharded_backward_input = SimTime::FromMillis(c.unshard.backward_input_ms);
      st.unsharded_backward_weight = SimTime::FromMillis(c.unshard.backward_weight_ms);
      st.unsharded_dp_reduce = SimTime::FromMillis(c.unshard.reduce_ms);
      st.unsharded_dp_reduce_bytes = c.unshard.reduce_bytes;
    }
    // Every time the engine plays must be >= 0 (a negative one would run its clock backwards).
    for (const auto& [name, v] : {std::pair{"F", st.forward},
                                  {"I", st.backward_input},
                                  {"W", st.backward_weight},
                                  {"B", st.backward},
                                  {"the forward send", st.send_forward},
                                  {"the backward send", st.send_backward},
                                  {"the DP reduction", st.dp_reduce},
                                  {"the optimizer step", st.optimizer}}) {
      if (v.nanos() < 0) {
        throw std::logic_error("the cost model priced " + std::string(name) + " of stage " +
                               std::to_string(k) + " at " + std::to_string(v.nanos()) + " ns");
      }
    }
    t.stages.push_back(st);
  }
  t.sync = SimTime::FromMillis(jc.sync_ms);
  t.blocking_sends = jc.blocking_sends;
  t.reduce_after_backward = jc.reduce_after_backward;
  return t;
}

}  // namespace pipetwin
