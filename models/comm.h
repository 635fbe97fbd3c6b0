// comm.h — alpha-beta costs of collectives on a two-level topology (NVLink inside a node,
// one InfiniBand NIC per GPU between nodes), in the nccl-tests conventions.
//
// `bytes` is the nccl-tests "size": the buffer each rank passes (all-reduce: the buffer;
// all-gather: the gathered output; reduce-scatter: the input; all-to-all: the send buffer).
//   algbw = bytes / time
//   busbw = algbw * 2(n-1)/n   (all-reduce)
//         = algbw * (n-1)/n    (all-gather, reduce-scatter, all-to-all)
// Costs on one link of bandwidth B and latency a (seconds in, milliseconds out):
//   ring all-reduce   2(n-1) a + 2(n-1)/n * S/B
//   tree all-reduce   2 ceil(log2 n) a + 2 S/B              (pipelined double binary tree)
//   all-gather        (n-1) a + (n-1)/n * S/B,  reduce-scatter the same
//   all-to-all        (n-1) a + (n-1)/n * S/B
//   send/recv         a + S/B
//   parameter server  2 a + 2 max(1, n/servers) * S/B       (push grads, pull params)
// A group that spans nodes runs at the slower of NVLink and its ranks-per-node NICs
// (k ranks of the group on a node drive k NICs in parallel, as NCCL's rings do) with the
// inter-node latency; a group inside one node runs on NVLink. Topology::inter is one GPU's
// share of its node's NICs (cluster.nics_per_node / gpus_per_node of one NIC when fewer).
// Above its cluster.fabric block an oversubscribed fabric gives the group FabricShare of that.
// A tree all-reduce over nodes is hierarchical, as NCCL's: a chain through a node's k ranks
// over NVLink and a tree between the nodes, 2((k-1) a_intra + ceil(log2 nodes) a_inter)
// of latency.
//
//   Topology topo{cluster.intra, cluster.inter};
//   GroupShape g = layout.WorstShape(Dim::kDp, 8);
//   double ms = CollectiveMs(Collective::kAllReduceRing, 1e9, g, topo);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/cluster.h"
#include "models/placement.h"

namespace pipetwin::models {

enum class Collective {
  kAllReduceRing,
  kAllReduceTree,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};
std::string_view ToString(Collective c);

struct Topology {
  Link intra;  // NVLink
  Link inter;  // one NIC per GPU
  // cluster.fabric: nodes under one non-blocking block (0: the whole fabric is one) and the
  // ratio of the block's NIC bandwidth to its uplinks' (1: non-blocking).
  int block_nodes = 0;
  double oversubscription = 1;
};
// The topology a cluster's collectives run on: its links and its fabric.
Topology TopologyOf(const ClusterConfig& c);

// The share of its NICs' bandwidth that a group spanning nodes keeps on an oversubscribed
// cluster.fabric: min(1, 1 / (oversubscription x f)), f the fraction of its ring's hops that
// leave their block. NCCL orders a ring by node, so the group's n nodes over a span of s
// nodes make n - 1 hops of (s - 1) / (n - 1) nodes and one of s - 1 back; a hop of length h
// leaves a block of b nodes with chance min(1, h / b) over the blocks' alignment. Every group
// of the kind communicates at once, so a block's uplinks carry f of its NICs' traffic. 1
// inside a node, on a non-blocking fabric, or where f x oversubscription <= 1. Trees,
// all-gathers and reduce-scatters are charged as the ring; send/recv as the ring of the group.
//   Topology pods{.intra = nvlink, .inter = nic, .block_nodes = 384, .oversubscription = 7};
//   FabricShare({128, 128, 1, 2033}, pods)  // 128 nodes 16 apart: f = 0.049, 1
//   FabricShare({16, 16, 1, 1921}, pods)    // 16 nodes 128 apart: f = 6/16, 1 / (7 f) = 0.38
double FabricShare(const GroupShape& g, const Topology& topo);
// The same for an all-to-all, whose every node sends an equal share to each of the group's
// other n - 1 nodes, not to a ring neighbour: with the nodes h = (span - 1) / (n - 1) apart, a
// pair d places apart is a hop of d h nodes, which leaves a block of b with chance
// min(1, d h / b), so f = 2 / (n (n - 1)) x sum over d = 1..n-1 of (n - d) min(1, d h / b),
// in closed form. 1 inside a node or on a non-blocking fabric.
//   AllToAllFabricShare({32, 8, 4, 8}, {.block_nodes = 4, .oversubscription = 2})
//     // 8 adjacent nodes, blocks of 4: f = 37/56, 1 / (2 f) = 0.757
double AllToAllFabricShare(const GroupShape& g, const Topology& topo);
// The same for parameter servers spread over the workers' blocks as the workers are: of the
// B = ceil(span / block_nodes) blocks the workers span, a worker's traffic stays in its own
// for 1, so f = 1 - 1/B; 1 within one block or on a non-blocking fabric.
//   ParameterServerFabricShare({64, 8, 8, 8}, {.block_nodes = 4, .oversubscription = 4})
//     // 2 blocks: f = 1/2, 1 / (4 x 1/2) = 0.5
double ParameterServerFabricShare(const GroupShape& workers, const Topology& topo);
// The parallel groups of a layout that an oversubscribed fabric slows, innermost first:
// ("tp" | "cp" | "dp x cp" | "pp", share < 1) of each one's worst group: FabricShare, or
// AllToAllFabricShare for a CP group that exchanges by all-to-all (cp_comm: a2a).
std::vector<std::pair<std::string, double>> ThrottledGroups(const RankLayout& layout,
                                                            int gpus_per_node, const Topology& topo,
                                                            bool cp_all_to_all = false);

// Single-link costs (milliseconds).
double RingAllReduceMs(double bytes, int n, const Link& link);
double TreeAllReduceMs(double bytes, int n, const Link& link);
double AllGatherMs(double bytes, int n, const Link& link);
double ReduceScatterMs(double bytes, int n, const Link& link);
double AllToAllMs(double bytes, int n, const Link& link);
double SendRecvMs(double bytes, const Link& link);
// n workers push `bytes` of gradients to `servers` parameter servers (each holding
// bytes/servers, each with its own link) and pull the updated parameters back.
double ParameterServerMs(double bytes, int n, int servers, const Link& link);

// The link a group effectively runs on.
Link GroupLink(const GroupShape& g, const Topology& topo);
// Two-level cost of a collective over group g. All-to-all splits its traffic: the share for
// ranks on the same node goes over NVLink, the rest over the rank's own NIC.
double CollectiveMs(Collective c, double bytes, const GroupShape& g, const Topology& topo);
double ParameterServerMs(double bytes, const GroupShape& workers, int servers,
                         const Topology& topo);

// nccl-tests conventions.
double AlgBandwidth(double bytes, double ms);    // bytes per second
double BusBandwidthFactor(Collective c, int n);  // busbw = algbw * factor
// Bytes one rank puts on the wire for the collective (ring algorithms).
double BytesSentPerRank(Collective c, double bytes, int n);
// The same in whole bytes, as the executors count one call: BytesSentPerRank truncated toward
// zero. A sum of calls is counted call by call, so it can fall short of BytesSentPerRank of
// the summed bytes by under one byte per call; models that predict an executor's counters
// (cpu_inventory, the CPU executor's DP bytes) use this to match them exactly.
//   RingBytesSentPerRank(Collective::kAllReduceRing, 10, 3) == 13   // 2 * 2/3 * 10 = 13.33
std::int64_t RingBytesSentPerRank(Collective c, std::int64_t bytes, int n);

}  // namespace pipetwin::models
