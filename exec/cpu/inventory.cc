#include "exec/cpu/inventory.h"

#include "models/cpu_inventory.h"

namespace pipetwin::cpu {

namespace {
models::Recompute ToModels(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return models::Recompute::kNone;
    case Recompute::kSelective:
      return models::Recompute::kSelective;
    case Recompute::kFull:
      return models::Recompute::kFull;
  }
  return models::Recompute::kNone;
}
}  // namespace

// One formula, in models/ (the simulator uses it for `cluster.device: cpu`): the executor's
// tests check it against the Accountant, the simulator's memory report is built from it.
ChunkInventory PredictChunkMemory(const ModelConfig& model, const ChunkSpec& spec,
                                  const TpConfig& tp, const CpConfig& cp) {
  const models::CpuChunkMemory m =
      models::PredictCpuChunkMemory({.micro_batch = model.micro_batch,
                                     .seq_len = model.seq_len,
                                     .hidden = model.hidden,
                                     .ffn_hidden = model.ffn_hidden,
                                     .heads = model.heads,
                                     .vocab = model.vocab,
                                     .layers = spec.num_layers,
                                     .first = spec.first,
                                     .last = spec.last,
                                     .tp = tp.size,
                                     .sp = tp.sequence_parallel,
                                     .cp = cp.size,
                                     .cp_a2a = cp.AllToAllRanks(),
                                     .recompute = ToModels(spec.recompute),
                                     .tied = model.tied_embeddings,
                                     .bias = model.bias,
                                     .rms_norm = model.rms_norm,
                                     .rope = model.rope,
                                     .swiglu = model.swiglu,
                                     .kv_heads = model.KvHeads()});
  ChunkInventory inv;
  inv.params = static_cast<std::size_t>(m.params);
  inv.param_bytes = static_cast<std::size_t>(m.param_bytes);
  inv.grad_bytes = static_cast<std::size_t>(m.grad_bytes);
  inv.activations_full = static_cast<std::size_t>(m.activations_full);
  inv.activations_pending_w = static_cast<std::size_t>(m.activations_pending_w);
  inv.activations_i_transient = static_cast<std::size_t>(m.activations_i_transient);
  return inv;
}

}  // namespace pipetwin::cpu
