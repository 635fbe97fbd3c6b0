#include "models/placement.h"

#include <algorithm>
#include <cstdlib>

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

namespace {

// Shape of a group given its members' node ids, sorted in place.
GroupShape ShapeOfNodes(std::vector<int>& nodes) {
  // WorstShape lists its members in rank order already; the others may not.
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  GroupShape g;
  g.size = static_cast<int>(nodes.size());
  g.nodes = 0;
  g.ranks_per_node = g.size;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    ++g.nodes;
    g.ranks_per_node = std::min(g.ranks_per_node, static_cast<int>(j - i));
    i = j;
  }
  if (!nodes.empty()) g.node_span = nodes.back() - nodes.front() + 1;
  return g;
}

}  // namespace

GroupShape RankLayout::Shape(Dim d, const RankCoord& c, int gpus_per_node) const {
  std::vector<int> nodes = Group(d, c);
  for (int& r : nodes) r /= gpus_per_node;
  return ShapeOfNodes(nodes);
}

bool RankLayout::SpansNodes(Dim d, const RankCoord& c, int gpus_per_node) const {
  return Shape(d, c, gpus_per_node).spans_nodes();
}

GroupShape RankLayout::WorstShape(Dim d, int gpus_per_node) const {
  return WorstShape(std::initializer_list<Dim>{d}, gpus_per_node);
}

namespace {

// The residues modulo g of the ranks sum_d c_d * stride_d, c_d < count_d. Enough to know a
// group's node pattern: shifting every rank of a group by g moves it to the next node.
std::vector<char> Residues(const std::array<int, 4>& count, const std::array<int, 4>& stride,
                           int g) {
  g = std::max(g, 1);  // (also tells GCC's -Wnull-dereference that set is not empty)
  std::vector<char> set(static_cast<std::size_t>(g), 0), next;
  set.at(0) = 1;
  for (std::size_t d = 0; d < 4; ++d) {
    next.assign(set.size(), 0);
    const int n = std::min(count[d], g);  // c * stride mod g repeats with period <= g
    for (int rho = 0; rho < g; ++rho) {
      if (!set[static_cast<std::size_t>(rho)]) continue;
      for (int c = 0; c < n; ++c) {
        const long long r = (rho + static_cast<long long>(c) * stride[d]) % g;
        next[static_cast<std::size_t>(r)] = 1;
      }
    }
    set.swap(next);
  }
  return set;
}

// Folds group g into the worst seen so far: the most nodes, the fewest ranks per node, the
// widest span.
void Worsen(GroupShape& worst, const GroupShape& g) {
  worst.nodes = std::max(worst.nodes, g.nodes);
  worst.ranks_per_node = std::min(worst.ranks_per_node, g.ranks_per_node);
  worst.node_span = std::max(worst.node_span, g.node_span);
}

}  // namespace

GroupShape RankLayout::WorstShape(Dim a, Dim b, int gpus_per_node) const {
  return WorstShape({a, b}, gpus_per_node);
}

GroupShape RankLayout::WorstShape(std::initializer_list<Dim> dims, int gpus_per_node) const {
  std::array<bool, 4> in{};
  for (Dim d : dims) in[Index(d)] = true;
  GroupShape worst;
  std::array<int, 4> count = size_;
  // The members' rank offsets from the group's first rank: sum of c_d * stride_d over its
  // dimensions (c_d < size_d).
  std::vector<long long> offsets{0}, next;
  // The outermost dimension first: each dimension's stride is the product of the sizes inside
  // it, so the offsets come out in increasing order, and so do their nodes (no sort needed).
  std::array<std::size_t, 4> outer_first = {0, 1, 2, 3};
  std::sort(outer_first.begin(), outer_first.end(),
            [&](std::size_t a, std::size_t b) { return stride_[a] > stride_[b]; });
  for (std::size_t d : outer_first) {
    if (!in[d]) continue;
    count[d] = 1;
    next.clear();
    for (long long o : offsets) {
      for (int c = 0; c < size_[d]; ++c) next.push_back(o + static_cast<long long>(c) * stride_[d]);
    }
    offsets.swap(next);
  }
  worst.size = static_cast<int>(offsets.size());
  worst.ranks_per_node = worst.size;
  const std::vector<char> bases = Residues(count, stride_, gpus_per_node);
  std::vector<int> nodes(offsets.size());
  for (int base = 0; base < gpus_per_node; ++base) {
    if (!bases[static_cast<std::size_t>(base)]) continue;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      nodes[i] = static_cast<int>((base + offsets[i]) / gpus_per_node);
    }
    Worsen(worst, ShapeOfNodes(nodes));
  }
  return worst;
}

GroupShape RankLayout::WorstSubShape(Dim d, int size, int step, int gpus_per_node) const {
  GroupShape worst;
  worst.size = size;
  worst.ranks_per_node = size;
  std::array<int, 4> count = size_;
  count[Index(d)] = 1;
  const std::vector<char> bases = Residues(count, stride_, gpus_per_node);
  std::vector<int> nodes;
  nodes.reserve(static_cast<std::size_t>(size));
  // The groups start at the coordinates c0 whose block index (c0 / step) is a multiple of size.
  for (int c0 = 0; c0 < Size(d); ++c0) {
    if ((c0 / step) % size != 0) continue;
    for (int base = 0; base < gpus_per_node; ++base) {
      if (!bases[static_cast<std::size_t>(base)]) continue;
      nodes.clear();
      for (int i = 0; i < size; ++i) {
        nodes.push_back((base + (c0 + i * step) * Stride(d)) / gpus_per_node);
      }
      Worsen(worst, ShapeOfNodes(nodes));
    }
  }
  return worst;
}

bool RankLayout::NeighboursSpanNodes(Dim d, int gpus_per_node) const {
  if (Size(d) < 2) return false;
  std::array<int, 4> count = size_;
  count[Index(d)] = Size(d) - 1;  // ranks that have a next neighbour along d
  const std::vector<char> residues = Residues(count, stride_, gpus_per_node);
  for (int rho = 0; rho < gpus_per_node; ++rho) {
    if (residues[static_cast<std::size_t>(rho)] && rho + Stride(d) >= gpus_per_node) return true;
  }
  return false;
}

bool RankLayout::PairSpansNodes(Dim d, int a, int b, int gpus_per_node) const {
  if (a == b) return false;
  const int g = std::max(gpus_per_node, 1);
  std::array<int, 4> count = size_;
  count[Index(d)] = 1;  // the other coordinates: the rank is lo * stride + rest
  const std::vector<char> rest = Residues(count, stride_, g);
  const long long lo = std::min(a, b), dist = static_cast<long long>(std::abs(a - b)) * Stride(d);
  for (int rho = 0; rho < g; ++rho) {
    if (!rest[static_cast<std::size_t>(rho)]) continue;
    // Two ranks dist apart share a node iff the lower one's offset in its node leaves room.
    if ((lo * Stride(d) + rho) % g + dist >= g) return true;
  }
  return false;
}

}  // namespace pipetwin::models
