// comm_group.h — the communication groups of a parallel layout, as the executor's backends
// count their traffic (Backend::BytesSent) and the report splits it (comm.by_group).
#pragma once

#include <cstddef>

namespace pipetwin::exec {

enum class CommGroup : int {
  kPp,  // pipeline: activations and gradients between adjacent stages
  kDp,  // data parallel: the gradient reduction over dp × cp (and ZeRO's parameter gather)
  kTp,  // tensor parallel: the collectives inside a layer
  kCp,  // context parallel: ring attention's K/V and dK/dV blocks (CPU backend)
};
inline constexpr std::size_t kNumCommGroups = 4;
inline constexpr CommGroup kAllCommGroups[kNumCommGroups] = {CommGroup::kPp, CommGroup::kDp,
                                                             CommGroup::kTp, CommGroup::kCp};

}  // namespace pipetwin::exec
