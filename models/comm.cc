#include "models/comm.h"

#include <algorithm>
#include <cmath>

namespace pipetwin::models {
namespace {

double Ms(double seconds) { return 1e3 * seconds; }
double Frac(int n) { return n <= 1 ? 0.0 : static_cast<double>(n - 1) / n; }

// A ring over nodes, as NCCL orders it (by node): of the n - 1 hops a step's data takes to go
// round, nodes - 1 leave a node (inter-node latency) and the rest stay on NVLink.
double RingLatencyS(const GroupShape& g, const Topology& topo) {
  const int inter = g.nodes - 1;
  return inter * topo.inter.latency_s + (g.size - 1 - inter) * topo.intra.latency_s;
}

}  // namespace

std::string_view ToString(Collective c) {
  switch (c) {
    case Collective::kAllReduceRing:
      return "all-reduce (ring)";
    case Collective::kAllReduceTree:
      return "all-reduce (tree)";
    case Collective::kAllGather:
      return "all-gather";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kSendRecv:
      return "send/recv";
  }
  return "?";
}

double RingAllReduceMs(double bytes, int n, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  return Ms(2.0 * (n - 1) * link.latency_s + 2 * Frac(n) * bytes / link.bandwidth_bytes_per_s);
}

double TreeAllReduceMs(double bytes, int n, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  const double depth = std::ceil(std::log2(static_cast<double>(n)));
  return Ms(2 * depth * link.latency_s + 2 * bytes / link.bandwidth_bytes_per_s);
}

double AllGatherMs(double bytes, int n, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  return Ms((n - 1) * link.latency_s + Frac(n) * bytes / link.bandwidth_bytes_per_s);
}

double ReduceScatterMs(double bytes, int n, const Link& link) {
  return AllGatherMs(bytes, n, link);
}

double AllToAllMs(double bytes, int n, const Link& link) { return AllGatherMs(bytes, n, link); }

double SendRecvMs(double bytes, const Link& link) {
  if (bytes <= 0) return 0;
  return Ms(link.latency_s + bytes / link.bandwidth_bytes_per_s);
}

double ParameterServerMs(double bytes, int n, int servers, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  const double fan_in = std::max(1.0, static_cast<double>(n) / std::max(1, servers));
  return Ms(2 * link.latency_s + 2 * fan_in * bytes / link.bandwidth_bytes_per_s);
}

Topology TopologyOf(const ClusterConfig& c) {
  return {c.intra, c.inter, c.fabric.block_nodes, c.fabric.oversubscription};
}

double FabricShare(const GroupShape& g, const Topology& topo) {
  if (!g.spans_nodes() || topo.block_nodes <= 0 || topo.oversubscription <= 1) return 1;
  const double n = g.nodes;
  const double span = std::max(g.node_span, g.nodes);
  const double block = topo.block_nodes;
  // The ring's n hops: n - 1 of (span - 1) / (n - 1) nodes and the one back, each leaving its
  // block with the chance its length gives it over the blocks' alignment.
  const double hop = (span - 1) / (n - 1);
  const double leaving =
      ((n - 1) * std::min(1.0, hop / block) + std::min(1.0, (span - 1) / block)) / n;
  return std::min(1.0, 1 / (topo.oversubscription * leaving));
}

double AllToAllFabricShare(const GroupShape& g, const Topology& topo) {
  if (!g.spans_nodes() || topo.block_nodes <= 0 || topo.oversubscription <= 1) return 1;
  const double n = g.nodes;
  const double span = std::max(g.node_span, g.nodes);
  const double h = (span - 1) / (n - 1);  // nodes between neighbours of the group
  const double b = topo.block_nodes;
  // Pairs d places apart with d h < b leave with chance d h / b, the rest always; D is the
  // last d of the first kind, at most n - 1.
  const double D = std::min(n - 1, std::floor(b / h));
  const double inside = h / b * (n * D * (D + 1) / 2 - D * (D + 1) * (2 * D + 1) / 6);
  const double always = (n - D - 1) * (n - D) / 2;  // sum of (n - d) over d = D+1..n-1
  const double leaving = 2 * (inside + always) / (n * (n - 1));
  return std::min(1.0, 1 / (topo.oversubscription * leaving));
}

double ParameterServerFabricShare(const GroupShape& workers, const Topology& topo) {
  if (!workers.spans_nodes() || topo.block_nodes <= 0 || topo.oversubscription <= 1) return 1;
  const double span = std::max(workers.node_span, workers.nodes);
  const double blocks = std::ceil(span / topo.block_nodes);
  if (blocks <= 1) return 1;
  return std::min(1.0, 1 / (topo.oversubscription * (1 - 1 / blocks)));
}

std::vector<std::pair<std::string, double>> ThrottledGroups(const RankLayout& layout,
                                                            int gpus_per_node, const Topology& topo,
                                                            bool cp_all_to_all) {
  const std::pair<std::string, GroupShape> groups[] = {
      {"tp", layout.WorstShape(Dim::kTp, gpus_per_node)},
      {"cp", layout.WorstShape(Dim::kCp, gpus_per_node)},
      {"dp x cp", layout.WorstShape(Dim::kDp, Dim::kCp, gpus_per_node)},
      {"pp", layout.WorstShape(Dim::kPp, gpus_per_node)}};
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, shape] : groups) {
    const double share =
        name == "cp" && cp_all_to_all ? AllToAllFabricShare(shape, topo) : FabricShare(shape, topo);
    if (share < 1) out.emplace_back(name, share);
  }
  return out;
}

Link GroupLink(const GroupShape& g, const Topology& topo) {
  if (!g.spans_nodes()) return topo.intra;
  const double nics =
      std::max(1, g.ranks_per_node) * topo.inter.bandwidth_bytes_per_s * FabricShare(g, topo);
  return {std::min(topo.intra.bandwidth_bytes_per_s, nics), topo.inter.latency_s};
}

double CollectiveMs(Collective c, double bytes, const GroupShape& g, const Topology& topo) {
  const Link link = GroupLink(g, topo);
  // Rings over nodes: the bandwidth term of the group's link, the latency hop by hop.
  const Link bandwidth_only{link.bandwidth_bytes_per_s, 0};
  const bool ring_over_nodes = g.spans_nodes() && g.size > 1 && bytes > 0;
  switch (c) {
    case Collective::kAllReduceRing:
      if (ring_over_nodes) {
        return RingAllReduceMs(bytes, g.size, bandwidth_only) + Ms(2 * RingLatencyS(g, topo));
      }
      return RingAllReduceMs(bytes, g.size, link);
    case Collective::kAllReduceTree: {
      if (!g.spans_nodes() || g.size <= 1 || bytes <= 0) {
        return TreeAllReduceMs(bytes, g.size, link);
      }
      // NCCL's tree is hierarchical: a chain through the k ranks of a node over NVLink, a
      // double binary tree between the nodes (NCCL 2.4), up and down: 2((k-1) a_intra +
      // ceil(log2 nodes) a_inter) of latency instead of 2 ceil(log2 n) a_inter.
      const int k = std::max(1, g.ranks_per_node);
      const double depth = std::ceil(std::log2(static_cast<double>(g.nodes)));
      return Ms(2 * ((k - 1) * topo.intra.latency_s + depth * topo.inter.latency_s) +
                2 * bytes / link.bandwidth_bytes_per_s);
    }
    case Collective::kAllGather:
      if (ring_over_nodes) {
        return AllGatherMs(bytes, g.size, bandwidth_only) + Ms(RingLatencyS(g, topo));
      }
      return AllGatherMs(bytes, g.size, link);
    case Collective::kReduceScatter:
      if (ring_over_nodes) {
        return ReduceScatterMs(bytes, g.size, bandwidth_only) + Ms(RingLatencyS(g, topo));
      }
      return ReduceScatterMs(bytes, g.size, link);
    case Collective::kSendRecv:
      return SendRecvMs(bytes, link);
    case Collective::kAllToAll: {
      if (g.size <= 1 || bytes <= 0) return 0;
      if (!g.spans_nodes()) return AllToAllMs(bytes, g.size, link);
      const int k = std::max(1, g.ranks_per_node);
      const double local = static_cast<double>(k - 1) / g.size * bytes;
      const double remote = static_cast<double>(g.size - k) / g.size * bytes;
      return Ms(
          (g.size - 1) * topo.inter.latency_s +
          std::max(local / topo.intra.bandwidth_bytes_per_s,
                   remote / (topo.inter.bandwidth_bytes_per_s * AllToAllFabricShare(g, topo))));
    }
  }
  return 0;
}

double ParameterServerMs(double bytes, const GroupShape& workers, int servers,
                         const Topology& topo) {
  // Servers sit on other nodes than most workers once the job spans nodes; each worker and
  // each server has its own NIC. On an oversubscribed fabric the servers are spread over the
  // workers' blocks like the workers, so a worker's traffic (S/p to each server) stays in its
  // block for 1 of the B blocks its group spans: f = 1 - 1/B leaves, at 1 / (oversubscription
  // x f) of the NIC (every block sends and receives the same, as in FabricShare).
  Link link = workers.spans_nodes() ? topo.inter : topo.intra;
  link.bandwidth_bytes_per_s *= ParameterServerFabricShare(workers, topo);
  return ParameterServerMs(bytes, workers.size, servers, link);
}

double AlgBandwidth(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) : 0; }

double BusBandwidthFactor(Collective c, int n) {
  switch (c) {
    case Collective::kAllReduceRing:
    case Collective::kAllReduceTree:
      return 2 * Frac(n);
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return Frac(n);
    case Collective::kSendRecv:
      return 1;
  }
  return 1;
}

double BytesSentPerRank(Collective c, double bytes, int n) {
  if (n <= 1 && c != Collective::kSendRecv) return 0;
  switch (c) {
    case Collective::kAllReduceRing:
      return 2 * Frac(n) * bytes;
    case Collective::kAllReduceTree:
      return 2 * bytes;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return Frac(n) * bytes;
    case Collective::kSendRecv:
      return bytes;
  }
  return 0;
}

std::int64_t RingBytesSentPerRank(Collective c, std::int64_t bytes, int n) {
  return static_cast<std::int64_t>(BytesSentPerRank(c, static_cast<double>(bytes), n));
}

}  // namespace pipetwin::models
