// config.h — the plain, typed parts of a job that the schedule layer and everything above
// share: the parallel layout, abstract per-action costs and how `run` executes the step.
// The job file is read and resolved once, in job/ (job/job.h); these are its values.
//
//   ParallelConfig par{.pp = 4, .dp = 2};
//   int ranks = par.WorldSize();   // 8
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pipetwin {

struct ParallelConfig {
  int pp = 1;
  int vpp = 1;  // chunks per rank: interleaved-1f1b; zbv and dualpipev always use 2
  int dp = 1;
  int tp = 1;
  bool sp = false;
  int cp = 1;
  // How attention exchanges K and V under cp > 1 (Megatron-Core's --cp-comm-type):
  // kP2P, ring attention, each block's transfer beside the previous block's attention;
  // kAllGather, K and V all-gathered before the attention and dK, dV reduce-scattered after
  // it, in series (Llama 3's CP, TransformerEngine's all_gather); kAllToAll, DeepSpeed-Ulysses
  // (TransformerEngine's a2a): Q, K and V all-to-all'd from a sequence shard to a head shard
  // before the attention and its output back after it, in series; kAllToAllP2P, the two
  // levels of Megatron-Core's --hierarchical-context-parallel-sizes (TransformerEngine's
  // a2a+p2p): an all-to-all over the innermost cp_a2a ranks, then ring attention over the
  // cp / cp_a2a groups that it leaves.
  enum class CpComm { kP2P, kAllGather, kAllToAll, kAllToAllP2P };
  CpComm cp_comm = CpComm::kP2P;
  int cp_a2a = 0;  // a2a+p2p: the all-to-all level's size (2 <= cp_a2a < cp, dividing cp)
  int zero = 0;    // ZeRO stage 0..3
  int WorldSize() const { return pp * dp * tp * cp; }
};

// parallel.cp_comm's names, in CpComm's order, and the two ways between name and value.
inline constexpr std::array<std::string_view, 4> kCpCommNames = {"p2p", "all_gather", "a2a",
                                                                 "a2a+p2p"};
constexpr std::string_view ToString(ParallelConfig::CpComm c) {
  return kCpCommNames[static_cast<std::size_t>(c)];
}
constexpr std::optional<ParallelConfig::CpComm> ParseCpComm(std::string_view name) {
  for (std::size_t i = 0; i < kCpCommNames.size(); ++i) {
    if (kCpCommNames[i] == name) return static_cast<ParallelConfig::CpComm>(i);
  }
  return std::nullopt;
}

// Abstract costs of ONE action of ONE model chunk (job file `costs:`).
struct AbstractCosts {
  double forward_ms = 1.0;
  double backward_input_ms = 1.0;   // I; a full backward B = I + W
  double backward_weight_ms = 1.0;  // W
  double p2p_ms = 0.0;              // one activation or gradient transfer between stages
  double optimizer_ms = 0.0;        // optimizer step of one chunk
  double dp_reduce_ms = 0.0;        // data-parallel gradient reduction of one chunk (dp > 1)
  double sync_ms = 0.0;             // the all-rank synchronisation before the optimizer step
};

// The job file's `execution:` section: how `pipetwin run` executes the step.
struct ExecutionConfig {
  int steps = 3;   // measured steps
  int warmup = 1;  // steps run before measuring
  // A receive or collective that stalls longer fails the run. 0: not given; `run` and
  // `calibrate` size it from the predicted step (SizeRunTimeout, sim/simulate.h).
  double timeout_s = 0;
  std::uint64_t seed = 1;  // synthetic data
  double learning_rate = 1e-3;
  int recv_window = 8;  // receives posted ahead, in program order
  int threads = 1;      // compute threads per rank (the CPU backend's BLAS): ranks share cores
};

}  // namespace pipetwin
