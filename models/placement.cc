#include "models/placement.h"

#include <algorithm>
#include <map>

namespace pipetwin::models {
namespace {
std::size_t Index(Dim d) { return static_cast<std::size_t>(d); }
}  // namespace

std::string_view ToString(Dim d) {
  switch (d) {
    case Dim::kTp:
      return "tp";
    case Dim::kCp:
      return "cp";
    case Dim::kDp:
      return "dp";
    case Dim::kPp:
      return "pp";
  }
  return "?";
}

std::string ToString(const DimOrder& order) {
  std::string s;
  for (Dim d : order) s += (s.empty() ? "" : "-") + std::string(ToString(d));
  return s;
}

Expected<DimOrder> ParseDimOrder(std::string_view text) {
  DimOrder order{};
  std::array<bool, 4> seen{};
  std::size_t n = 0;
  std::size_t start = 0;
  const auto bad = [&] {
    return Error::BadInput("rank order '" + std::string(text) +
                           "': must name tp, cp, dp and pp once each, innermost first, "
                           "separated by '-' (Megatron: tp-cp-dp-pp)");
  };
  while (start <= text.size()) {
    std::size_t end = text.find('-', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(start, end - start);
    Dim d;
    if (part == "tp")
      d = Dim::kTp;
    else if (part == "cp")
      d = Dim::kCp;
    else if (part == "dp")
      d = Dim::kDp;
    else if (part == "pp")
      d = Dim::kPp;
    else
      return bad();
    if (n == 4 || seen[Index(d)]) return bad();
    seen[Index(d)] = true;
    order[n++] = d;
    start = end + 1;
  }
  if (n != 4) return bad();
  return order;
}

int RankCoord::Get(Dim d) const {
  switch (d) {
    case Dim::kTp:
      return tp;
    case Dim::kCp:
      return cp;
    case Dim::kDp:
      return dp;
    case Dim::kPp:
      return pp;
  }
  return 0;
}

void RankCoord::Set(Dim d, int v) {
  switch (d) {
    case Dim::kTp:
      tp = v;
      break;
    case Dim::kCp:
      cp = v;
      break;
    case Dim::kDp:
      dp = v;
      break;
    case Dim::kPp:
      pp = v;
      break;
  }
}

RankLayout::RankLayout(const ParallelConfig& p, DimOrder order) : order_(order) {
  size_[Index(Dim::kTp)] = p.tp;
  size_[Index(Dim::kCp)] = p.cp;
  size_[Index(Dim::kDp)] = p.dp;
  size_[Index(Dim::kPp)] = p.pp;
  int stride = 1;
  for (Dim d : order_) {
    stride_[Index(d)] = stride;
    stride *= size_[Index(d)];
  }
  world_ = stride;
}

int RankLayout::Size(Dim d) const { return size_[Index(d)]; }
int RankLayout::Stride(Dim d) const { return stride_[Index(d)]; }

int RankLayout::GlobalRank(const RankCoord& c) const {
  int r = 0;
  for (Dim d : order_) r += c.Get(d) * stride_[Index(d)];
  return r;
}

RankCoord RankLayout::Coord(int rank) const {
  RankCoord c;
  for (Dim d : order_) {
    c.Set(d, rank % size_[Index(d)]);
    rank /= size_[Index(d)];
  }
  return c;
}

std::vector<int> RankLayout::Group(Dim d, const RankCoord& c) const {
  std::vector<int> ranks;
  ranks.reserve(static_cast<std::size_t>(Size(d)));
  RankCoord x = c;
  for (int i = 0; i < Size(d); ++i) {
    x.Set(d, i);
    ranks.push_back(GlobalRank(x));
  }
  return ranks;
}

GroupShape RankLayout::Shape(Dim d, const RankCoord& c, int gpus_per_node) const {
  std::map<int, int> per_node;
  for (int r : Group(d, c)) ++per_node[r / gpus_per_node];
  GroupShape g;
  g.size = Size(d);
  g.nodes = static_cast<int>(per_node.size());
  g.ranks_per_node = g.size;
  for (const auto& [node, count] : per_node) g.ranks_per_node = std::min(g.ranks_per_node, count);
  return g;
}

bool RankLayout::SpansNodes(Dim d, const RankCoord& c, int gpus_per_node) const {
  return Shape(d, c, gpus_per_node).spans_nodes();
}

GroupShape RankLayout::WorstShape(Dim d, int gpus_per_node) const {
  return WorstShape(d, d, gpus_per_node);
}

GroupShape RankLayout::WorstShape(Dim a, Dim b, int gpus_per_node) const {
  const int size = a == b ? Size(a) : Size(a) * Size(b);
  GroupShape worst;
  worst.size = size;
  worst.ranks_per_node = size;
  std::map<int, int> per_node;
  // Visit every group once, through its member with coordinates a == b == 0.
  for (int r = 0; r < world_; ++r) {
    const RankCoord c = Coord(r);
    if (c.Get(a) != 0 || c.Get(b) != 0) continue;
    per_node.clear();
    RankCoord x = c;
    for (int i = 0; i < Size(a); ++i) {
      x.Set(a, i);
      for (int j = 0; j < (a == b ? 1 : Size(b)); ++j) {
        if (a != b) x.Set(b, j);
        ++per_node[GlobalRank(x) / gpus_per_node];
      }
    }
    worst.nodes = std::max(worst.nodes, static_cast<int>(per_node.size()));
    for (const auto& [node, count] : per_node) {
      worst.ranks_per_node = std::min(worst.ranks_per_node, count);
    }
  }
  return worst;
}

}  // namespace pipetwin::models
