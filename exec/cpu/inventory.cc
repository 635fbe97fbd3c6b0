#include "exec/cpu/inventory.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pipetwin::cpu {

namespace {

constexpr std::int64_t kF = 4;  // bytes per float32 / int32

}  // namespace

ChunkInventory PredictChunkMemory(const ModelConfig& model, const ChunkSpec& spec,
                                  const TpConfig& tp) {
  const LocalDims d = MakeLocalDims(model, tp);
  const std::int64_t n = d.tokens;
  const std::int64_t r = d.rows;
  const std::int64_t h = d.hidden;
  const std::int64_t hl = d.hidden_local;
  const std::int64_t fl = d.ffn_local;
  const std::int64_t v = d.vocab;
  const std::int64_t probs = d.batch * d.heads_local * d.seq * d.seq;
  const std::int64_t layers = spec.num_layers;

  // Parameters.
  std::int64_t params = 0;
  if (spec.first) params += v * h + d.seq * h;
  params += layers *
            (2 * h + (h * 3 * hl + 3 * hl) + (hl * h + h) + 2 * h + (h * fl + fl) + (fl * h + h));
  if (spec.last) params += 2 * h + h * v;

  // Activations saved by F, in elements (the tokens are int32, also 4 bytes).
  std::int64_t full = 0;
  std::int64_t pending = 0;
  const std::int64_t block_full =
      (r * h + r) + n * h + (3 * n * hl + probs) + n * hl + (r * h + r) + n * h + n * fl + n * fl;
  const std::int64_t block_pending =
      (n * h + 3 * n * hl) + (n * hl + n * h) + (n * h + n * fl) + (n * fl + n * h);
  full += layers * block_full;
  pending += layers * block_pending;
  if (spec.first) {
    full += r;
    pending += r + r * h;
  }
  if (spec.last) {
    full += (r * h + r) + r * h + r * v;
    pending += r * h + r * v;
  }

  // The order in which I keeps (+) and frees (-) saved tensors, to find its transient peak.
  std::vector<std::int64_t> events;
  if (spec.last) events.push_back(-(r * h + r));
  for (std::int64_t l = 0; l < layers; ++l) {
    events.insert(events.end(), {+n * h, -n * fl, +n * fl, -(r * h + r), +n * h,
                                 -(3 * n * hl + probs), +3 * n * hl, -(r * h + r)});
  }
  if (spec.first) events.push_back(+r * h);
  std::int64_t level = 0;
  std::int64_t peak = 0;
  for (std::int64_t e : events) {
    level += e;
    peak = std::max(peak, level);
  }

  ChunkInventory inv;
  inv.params = static_cast<std::size_t>(params);
  inv.param_bytes = static_cast<std::size_t>(params * kF);
  inv.grad_bytes = inv.param_bytes;
  inv.activations_full = static_cast<std::size_t>(full * kF);
  inv.activations_pending_w = static_cast<std::size_t>(pending * kF);
  inv.activations_i_transient = static_cast<std::size_t>(peak * kF);
  return inv;
}

}  // namespace pipetwin::cpu
