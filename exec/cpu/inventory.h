// inventory.h — the exact bytes a CPU chunk allocates, predicted from the configuration alone,
// so the simulator's CPU memory inventory (in models/) can be checked byte for byte against
// what the Accountant measures.
//
//   ChunkInventory inv = PredictChunkMemory(model, spec, tp);
//   // after F of k microbatches and I of j of them (none W'd yet):
//   //   activations == (k - j) * inv.activations_full + j * inv.activations_pending_w
//
// The formulas live in models/cpu_inventory.h (one source for the executor and the
// simulator); this is the same prediction in exec/cpu's types.
#pragma once

#include <cstddef>

#include "exec/cpu/model.h"

namespace pipetwin::cpu {

struct ChunkInventory {
  std::size_t params = 0;                   // elements
  std::size_t param_bytes = 0;              // params * 4
  std::size_t grad_bytes = 0;               // same as param_bytes
  std::size_t activations_full = 0;         // bytes saved by F of one microbatch
  std::size_t activations_pending_w = 0;    // bytes one microbatch keeps between its I and W
  std::size_t activations_i_transient = 0;  // peak rise during I above its starting level
};

ChunkInventory PredictChunkMemory(const ModelConfig& model, const ChunkSpec& spec,
                                  const TpConfig& tp, const CpConfig& cp = {});

}  // namespace pipetwin::cpu
