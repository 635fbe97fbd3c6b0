// schedule.h — per-rank programs: the IR that the simulator and the executor both read.
//
// A Schedule is one program (a list of Actions) per pipeline rank, plus the placement of
// stages (model chunks) on ranks. Generators emit compute actions only (F, B, I, W); the
// lowering passes in lower.h add SEND/RECV pairs, REDUCE_GRAD and OPT.
//
//   Schedule s = *FindGenerator("1f1b")->generate({.pp = 4, .vpp = 1, .microbatches = 8});
//   s.programs[0][0].ToString();   // "0F0"
#pragma once

#include <string>
#include <vector>

#include "schedule/action.h"

namespace pipetwin {

struct Schedule {
  int num_ranks = 0;               // pipeline ranks (pp)
  int num_stages = 0;              // model chunks in the pipeline (pp × chunks per rank)
  int num_microbatches = 0;        // m
  std::vector<int> stage_to_rank;  // size num_stages
  std::vector<std::vector<Action>> programs;  // size num_ranks

  int StagesPerRank() const { return num_ranks > 0 ? num_stages / num_ranks : 0; }
  // True where some rank's program holds a send or receive.
  bool HasComms() const;
  std::size_t NumActions() const;
};

// Stage s on rank s % pp: Megatron's interleaved ("loop") placement; vpp = 1 is plain 1F1B.
std::vector<int> LoopPlacement(int pp, int vpp);
// Two chunks per rank in a V: rank r holds stages r and 2·pp − 1 − r (ZB-V, DualPipeV).
std::vector<int> VPlacement(int pp);

// The stages a rank holds, in increasing order.
std::vector<int> StagesOfRank(const Schedule& s, int rank);

// The pipeline rank at the other end of a SEND or RECV (PeerStage's rank); -1 otherwise.
int PeerRank(const Schedule& s, const Action& a);

// In-flight microbatch-chunks over one rank's program, in program order (DESIGN.md,
// "In-flight activations"): `inflight` is the most whose F is done and whose B (or I) is not,
// `pending_weight` the most whose I is done and whose W is not.
struct InflightPeaks {
  int inflight = 0;
  int pending_weight = 0;
};
InflightPeaks ComputeInflightPeaks(const std::vector<Action>& program);

}  // namespace pipetwin
