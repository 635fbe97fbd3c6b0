// placement.h — where each (pp, dp, tp, cp) coordinate lives: global rank, node, and whether
// a parallel group's ranks span nodes (and so cross the slow inter-node links).
//
// Megatron-LM's default order puts TP innermost (consecutive ranks, same node), then CP,
// then DP, then PP outermost:  rank = tp + TP*(cp + CP*(dp + DP*pp)).
//
//   RankLayout l(job.parallel);                       // order "tp-cp-dp-pp"
//   int r = l.GlobalRank({.pp = 1, .dp = 0, .tp = 3, .cp = 0});   // 1*TP*CP*DP + 3
//   RankCoord c = l.Coord(r);                          // back again
//   bool slow = l.SpansNodes(Dim::kDp, c, 8);          // DP group of c spans nodes?
//   GroupShape g = l.WorstShape(Dim::kTp, 8);          // size, nodes spanned, ranks per node
#pragma once

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/config.h"
#include "schedule/expected.h"

namespace pipetwin::models {

enum class Dim { kTp, kCp, kDp, kPp };
using DimOrder = std::array<Dim, 4>;  // innermost first
inline constexpr DimOrder kMegatronOrder = {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp};

// "tp-cp-dp-pp" (innermost first, each dimension once).
Expected<DimOrder> ParseDimOrder(std::string_view text);
std::string ToString(const DimOrder& order);
std::string_view ToString(Dim d);

struct RankCoord {
  int pp = 0, dp = 0, tp = 0, cp = 0;
  int Get(Dim d) const;
  void Set(Dim d, int v);
  bool operator==(const RankCoord&) const = default;
};

// A parallel group as the network sees it. The worst-case queries cost O(gpus_per_node^2 +
// group size), not O(world size).
struct GroupShape {
  int size = 1;
  int nodes = 1;           // distinct nodes its ranks occupy
  int ranks_per_node = 1;  // fewest of its ranks on any one of those nodes
  int node_span = 1;       // last node - first node + 1 (cluster.fabric's blocks it crosses)
  bool spans_nodes() const { return nodes > 1; }
};

class RankLayout {
 public:
  explicit RankLayout(const ParallelConfig& p, DimOrder order = kMegatronOrder);

  int world_size() const { return world_; }
  int Size(Dim d) const;
  int Stride(Dim d) const;  // rank distance between neighbours along d

  int GlobalRank(const RankCoord& c) const;
  RankCoord Coord(int rank) const;
  // The ranks that share every coordinate with `c` but `d`, in order of d.
  std::vector<int> Group(Dim d, const RankCoord& c) const;
  GroupShape Shape(Dim d, const RankCoord& c, int gpus_per_node) const;
  bool SpansNodes(Dim d, const RankCoord& c, int gpus_per_node) const;
  // The worst group along d over all groups: the most nodes, the fewest ranks per node.
  GroupShape WorstShape(Dim d, int gpus_per_node) const;
  // The same for the group along two dimensions at once (e.g. dp x cp, which reduce
  // gradients together).
  GroupShape WorstShape(Dim a, Dim b, int gpus_per_node) const;
  // ... and along any set of dimensions (e.g. tp x cp x dp: a pipeline stage's ranks).
  GroupShape WorstShape(std::initializer_list<Dim> dims, int gpus_per_node) const;
  // The worst of the groups that split d into groups of `size` coordinates `step` apart
  // ({c0 + i * step}, i < size): step 1, the consecutive blocks; step = Size(d) / size, the
  // ranks one from each block. size * step must divide Size(d).
  GroupShape WorstSubShape(Dim d, int size, int step, int gpus_per_node) const;
  // Whether any rank and its next neighbour along d (e.g. adjacent pipeline stages) sit on
  // different nodes.
  bool NeighboursSpanNodes(Dim d, int gpus_per_node) const;
  // Whether any rank at coordinate a along d and its counterpart at b (every other coordinate
  // the same) sit on different nodes: one pipeline boundary, over all replicas.
  bool PairSpansNodes(Dim d, int a, int b, int gpus_per_node) const;

 private:
  std::array<int, 4> size_{};    // by Dim
  std::array<int, 4> stride_{};  // by Dim
  DimOrder order_;
  int world_ = 1;
};

}  // namespace pipetwin::models
