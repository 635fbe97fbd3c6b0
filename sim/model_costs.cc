#include "sim/model_costs.h"

#include <algorithm>

namespace pipetwin {

CostTable CostTableFromModel(const models::JobCosts& jc) {
  CostTable t;
  t.stages.reserve(jc.stages.size());
  for (const models::StageCost& c : jc.stages) {
    StageTimes st;
    st.forward = SimTime::FromMillis(c.forward_ms);
    st.backward_input = SimTime::FromMillis(c.backward_input_ms);
    st.backward_weight = SimTime::FromMillis(c.backward_weight_ms);
    st.backward = SimTime::FromMillis(c.backward_input_ms + c.backward_weight_ms -
                                      c.fused_backward_tp_hidden_ms);
    st.send_forward = st.send_backward = SimTime::FromMillis(c.p2p_ms);
    st.send_bytes = static_cast<std::int64_t>(c.p2p_send_bytes);
    // The reduction (and, for ZeRO 1/2, the parameter all-gather that follows the step, and
    // the tied-embedding sync) run on the collective stream.
    // Under training.overlap the parts hidden under compute are not played.
    st.dp_reduce =
        SimTime::FromMillis(c.dp_reduce_ms - c.dp_reduce_hidden_ms + c.embedding_sync_ms);
    st.dp_reduce_bytes = static_cast<std::int64_t>(c.dp_reduce_bytes);
    st.optimizer =
        SimTime::FromMillis(c.optimizer_ms + c.param_allgather_ms - c.param_allgather_hidden_ms);
    if (c.unshard.applies) {
      st.unshard_applies = true;
      st.unshard = SimTime::FromMillis(c.unshard.gather_ms);
      st.unshard_bytes = c.unshard.gather_bytes;
      st.unsharded_forward = SimTime::FromMillis(c.unshard.forward_ms);
      st.unsharded_backward_input = SimTime::FromMillis(c.unshard.backward_input_ms);
      st.unsharded_backward_weight = SimTime::FromMillis(c.unshard.backward_weight_ms);
      st.unsharded_dp_reduce = SimTime::FromMillis(c.unshard.reduce_ms + c.embedding_sync_ms);
      st.unsharded_dp_reduce_bytes = c.unshard.reduce_bytes;
    }
    t.stages.push_back(st);
  }
  t.sync = SimTime::FromMillis(jc.sync_ms);
  t.blocking_sends = jc.blocking_sends;
  t.reduce_after_backward = jc.reduce_after_backward;
  return t;
}

}  // namespace pipetwin
