#include "models/comm.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pipetwin::models {
namespace {

constexpr double kB = 100e9;  // bytes/s
constexpr double kA = 5e-6;   // s

TEST(CommTest, RingAllReduceIsTwoNMinusOneOverN) {
  const Link link{kB, kA};
  const double S = 1e9;
  for (int n : {2, 4, 8, 64}) {
    const double expected_s = 2.0 * (n - 1) / n * S / kB + 2.0 * (n - 1) * kA;
    EXPECT_DOUBLE_EQ(RingAllReduceMs(S, n, link), 1e3 * expected_s) << n;
  }
  EXPECT_EQ(RingAllReduceMs(S, 1, link), 0);
}

TEST(CommTest, OtherCollectives) {
  const Link link{kB, kA};
  const double S = 1e9;
  const int n = 8;
  EXPECT_DOUBLE_EQ(AllGatherMs(S, n, link), 1e3 * (7.0 / 8 * S / kB + 7 * kA));
  EXPECT_DOUBLE_EQ(ReduceScatterMs(S, n, link), AllGatherMs(S, n, link));
  // A ring all-reduce is a reduce-scatter followed by an all-gather.
  EXPECT_DOUBLE_EQ(RingAllReduceMs(S, n, link), 2 * ReduceScatterMs(S, n, link));
  EXPECT_DOUBLE_EQ(TreeAllReduceMs(S, n, link), 1e3 * (2 * S / kB + 2 * 3 * kA));
  EXPECT_DOUBLE_EQ(SendRecvMs(S, link), 1e3 * (S / kB + kA));
  EXPECT_DOUBLE_EQ(AllToAllMs(S, n, link), 1e3 * (7.0 / 8 * S / kB + 7 * kA));
  // Tree wins on latency for small messages over many ranks, ring on bandwidth.
  EXPECT_LT(TreeAllReduceMs(1e3, 1024, link), RingAllReduceMs(1e3, 1024, link));
  EXPECT_LT(RingAllReduceMs(1e9, 8, link), TreeAllReduceMs(1e9, 8, link));
}

TEST(CommTest, NcclTestsBusBandwidth) {
  const Link link{kB, 0};
  const double S = 1e9;
  const int n = 8;
  // With no latency, busbw of a ring collective equals the link bandwidth.
  const double ar = RingAllReduceMs(S, n, link);
  EXPECT_DOUBLE_EQ(AlgBandwidth(S, ar) * BusBandwidthFactor(Collective::kAllReduceRing, n), kB);
  const double ag = AllGatherMs(S, n, link);
  EXPECT_DOUBLE_EQ(AlgBandwidth(S, ag) * BusBandwidthFactor(Collective::kAllGather, n), kB);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduceRing, n), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kReduceScatter, n), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BytesSentPerRank(Collective::kAllReduceRing, S, n), 2.0 * 7 / 8 * S);
}

TEST(CommTest, RingBytesSentPerRankTruncatesCallByCall) {
  // Whole bytes, truncated toward zero, as the executors count one call.
  EXPECT_EQ(RingBytesSentPerRank(Collective::kAllReduceRing, 10, 3), 13);  // 13.33
  EXPECT_EQ(RingBytesSentPerRank(Collective::kAllGather, 10, 3), 6);       // 6.67
  EXPECT_EQ(RingBytesSentPerRank(Collective::kReduceScatter, 4096, 4), 3072);
  EXPECT_EQ(RingBytesSentPerRank(Collective::kAllReduceRing, 4096, 1), 0);
  EXPECT_EQ(RingBytesSentPerRank(Collective::kSendRecv, 7, 1), 7);
  // The same numbers as the executors' own count, factor (n - 1) / n * bytes in that order
  // (2 for an all-reduce, 1 for the others).
  for (int n : {2, 3, 5, 6, 7, 8, 12}) {
    for (std::int64_t b : {1, 4, 1000, 123457, 40'000'004}) {
      for (Collective c :
           {Collective::kAllReduceRing, Collective::kAllGather, Collective::kReduceScatter}) {
        const double factor = c == Collective::kAllReduceRing ? 2.0 : 1.0;
        EXPECT_EQ(RingBytesSentPerRank(c, b, n),
                  static_cast<std::int64_t>(factor * static_cast<double>(n - 1) /
                                            static_cast<double>(n) * static_cast<double>(b)))
            << ToString(c) << " n=" << n << " bytes=" << b;
      }
    }
  }
}

TEST(CommTest, GroupsSpanningNodesCostMore) {
  const Topology topo{{240e9, 2e-6}, {22.5e9, 5e-6}};
  const GroupShape inside{8, 1, 8};
  const GroupShape across{8, 8, 1};     // one rank per node: one NIC each
  const GroupShape two_nodes{8, 2, 4};  // four NICs per node carry the ring
  for (Collective c :
       {Collective::kAllReduceRing, Collective::kAllReduceTree, Collective::kAllGather,
        Collective::kReduceScatter, Collective::kAllToAll, Collective::kSendRecv}) {
    EXPECT_GT(CollectiveMs(c, 1e8, across, topo), CollectiveMs(c, 1e8, inside, topo))
        << ToString(c);
    EXPECT_GT(CollectiveMs(c, 1e8, across, topo), CollectiveMs(c, 1e8, two_nodes, topo))
        << ToString(c);
  }
  EXPECT_DOUBLE_EQ(GroupLink(across, topo).bandwidth_bytes_per_s, 22.5e9);
  EXPECT_DOUBLE_EQ(GroupLink(two_nodes, topo).bandwidth_bytes_per_s, 4 * 22.5e9);
  EXPECT_DOUBLE_EQ(GroupLink(inside, topo).bandwidth_bytes_per_s, 240e9);
}

// A tree over nodes is hierarchical (NCCL): a chain through a node's ranks over NVLink, a
// tree between nodes. 4,096 ranks on 512 nodes: 2(7 x 2 us + 9 x 5 us) of latency, not
// 2 x 12 x 5 us; the ring pays 2 x 4,095 x 5 us.
TEST(CommTest, TreeOverNodesIsHierarchical) {
  const Topology topo{{240e9, 2e-6}, {22.5e9, 5e-6}};
  const GroupShape world{4096, 512, 8};
  const double bw = 2 * 1e6 / (8 * 22.5e9);
  EXPECT_NEAR(CollectiveMs(Collective::kAllReduceTree, 1e6, world, topo),
              1e3 * (2 * (7 * 2e-6 + 9 * 5e-6) + bw), 1e-12);
  // The ring, hop by hop (below), still pays 2 x 4,095 latencies: the tree wins at 1 MB.
  EXPECT_LT(CollectiveMs(Collective::kAllReduceTree, 1e6, world, topo),
            CollectiveMs(Collective::kAllReduceRing, 1e6, world, topo));
  // One rank per node: only the tree between nodes.
  const GroupShape spread{512, 512, 1};
  EXPECT_NEAR(CollectiveMs(Collective::kAllReduceTree, 1e6, spread, topo),
              1e3 * (2 * 9 * 5e-6 + 2 * 1e6 / 22.5e9), 1e-12);
}

// A ring over nodes (NCCL orders it by node) goes round through nodes - 1 inter-node hops
// and n - nodes NVLink hops: its latency is theirs, not n - 1 inter-node latencies.
TEST(CommTest, RingOverNodesPaysEachHopsOwnLatency) {
  const Topology topo{{240e9, 2e-6}, {22.5e9, 5e-6}};
  const GroupShape world{4096, 512, 8};
  const double S = 1e6, B = 8 * 22.5e9;  // 8 ranks per node drive 8 NICs (< NVLink's 240)
  const double hops = 511 * 5e-6 + 3584 * 2e-6;
  EXPECT_NEAR(CollectiveMs(Collective::kAllReduceRing, S, world, topo),
              1e3 * (2 * hops + 2 * 4095.0 / 4096 * S / B), 1e-12);
  EXPECT_NEAR(CollectiveMs(Collective::kAllGather, S, world, topo),
              1e3 * (hops + 4095.0 / 4096 * S / B), 1e-12);
  EXPECT_NEAR(CollectiveMs(Collective::kReduceScatter, S, world, topo),
              1e3 * (hops + 4095.0 / 4096 * S / B), 1e-12);
  // One rank per node: every hop leaves its node, as before.
  const GroupShape spread{512, 512, 1};
  EXPECT_NEAR(CollectiveMs(Collective::kAllGather, S, spread, topo),
              1e3 * (511 * 5e-6 + 511.0 / 512 * S / 22.5e9), 1e-12);
  // Inside a node: NVLink's latency and bandwidth.
  EXPECT_NEAR(CollectiveMs(Collective::kAllReduceRing, S, {8, 1, 8}, topo),
              1e3 * (2 * 7 * 2e-6 + 2 * 7.0 / 8 * S / 240e9), 1e-12);
}

// cluster.fabric: a block's uplinks carry the fraction f of its NICs' traffic that leaves it,
// so a group keeps min(1, 1 / (oversubscription x f)) of its NICs. Hand-worked on Llama 3's
// cluster (pods of 384 nodes, 1:7 above them; Llama Team 2024, Sec. 3.3.1) with t 8, p 16,
// dp 128 on 2,048 nodes.
TEST(CommTest, OversubscribedFabricChargesTheRingHopsThatLeaveABlock) {
  const Topology flat{{240e9, 2e-6}, {50e9, 5e-6}};
  Topology pods = flat;
  pods.block_nodes = 384;
  pods.oversubscription = 7;
  // The DP group in Meta's order (tp-cp-pp-dp): 128 nodes 16 apart. 127 hops of 16 nodes
  // leave a pod with chance 16 / 384, the one back always: f = 6.29 / 128, 7f < 1.
  const GroupShape dp{128, 128, 1, 2033};
  EXPECT_DOUBLE_EQ(FabricShare(dp, pods), 1);
  // The pipeline in Megatron's order (tp-cp-dp-pp): 16 nodes 128 apart: 15 hops leave with
  // chance 1/3 and the one back always, f = 6 / 16: 1 / (7 x 0.375) of the NIC.
  const GroupShape pp{16, 16, 1, 1921};
  EXPECT_NEAR(FabricShare(pp, pods), 1 / (7 * 0.375), 1e-12);
  EXPECT_NEAR(GroupLink(pp, pods).bandwidth_bytes_per_s, 50e9 / (7 * 0.375), 1e-3);
  EXPECT_NEAR(CollectiveMs(Collective::kSendRecv, 1e8, pp, pods),
              1e3 * (5e-6 + 1e8 * 7 * 0.375 / 50e9), 1e-12);
  // Every hop leaves (4 nodes 64 apart, blocks of 32): 1 / oversubscription, k NICs each.
  pods.block_nodes = 32;
  pods.oversubscription = 2;
  const GroupShape strided{16, 4, 4, 193};
  EXPECT_DOUBLE_EQ(FabricShare(strided, pods), 0.5);
  EXPECT_DOUBLE_EQ(GroupLink(strided, pods).bandwidth_bytes_per_s, 4 * 50e9 / 2);
  // Non-blocking, inside a node, or without a span: unchanged.
  EXPECT_DOUBLE_EQ(FabricShare(strided, flat), 1);
  EXPECT_DOUBLE_EQ(FabricShare({8, 1, 8, 1}, pods), 1);
  EXPECT_DOUBLE_EQ(GroupLink({8, 1, 8, 1}, pods).bandwidth_bytes_per_s, 240e9);
  // A shape without its span counts its nodes as contiguous: 2 neighbours, f = 1/32.
  EXPECT_DOUBLE_EQ(FabricShare({2, 2, 1}, pods), 1);
}

// An all-to-all sends an equal share from every node to each other node of the group, so the
// share of its traffic that leaves a block is the mean over ordered pairs of min(1, hop / b),
// counted here pair by pair (the definition) against the closed form, and hand-worked.
TEST(CommTest, OversubscribedFabricChargesTheAllToAllPairsThatLeaveABlock) {
  const Topology flat{{240e9, 2e-6}, {50e9, 5e-6}};
  Topology pods = flat;
  pods.block_nodes = 4;
  pods.oversubscription = 2;
  // 8 adjacent nodes (4 ranks each), blocks of 4: pairs 1..4 apart leave with chance d / 4,
  // farther ones always: f = 2 (7 + 12 + 15 + 16) / 4 + 2 (3 + 2 + 1) over 56 = 37 / 56.
  const GroupShape adjacent{32, 8, 4, 8};
  EXPECT_NEAR(AllToAllFabricShare(adjacent, pods), 1 / (2 * 37.0 / 56), 1e-12);
  // The alltoall's off-node bytes go at that share of the rank's NIC.
  const double S = 1e9;
  EXPECT_NEAR(CollectiveMs(Collective::kAllToAll, S, adjacent, pods),
              1e3 * (31 * 5e-6 + (28.0 / 32 * S) / (50e9 / (2 * 37.0 / 56))), 1e-9);
  // 4 nodes 64 apart, blocks of 32: every pair leaves, f = 1: half the NIC.
  pods.block_nodes = 32;
  const GroupShape strided{16, 4, 4, 193};
  EXPECT_DOUBLE_EQ(AllToAllFabricShare(strided, pods), 0.5);
  // Against the definition, pair by pair, over spans, strides and blocks.
  for (const GroupShape g : {GroupShape{64, 16, 4, 16}, GroupShape{128, 128, 1, 2033},
                             GroupShape{16, 16, 1, 1921}, GroupShape{24, 3, 8, 11}}) {
    for (const int block : {2, 5, 64, 384}) {
      pods.block_nodes = block;
      pods.oversubscription = 7;
      const double h = static_cast<double>(g.node_span - 1) / (g.nodes - 1);
      double sum = 0;
      for (int i = 0; i < g.nodes; ++i) {
        for (int j = 0; j < g.nodes; ++j) {
          if (i != j) sum += std::min(1.0, std::abs(i - j) * h / block);
        }
      }
      const double f = sum / (static_cast<double>(g.nodes) * (g.nodes - 1));
      EXPECT_NEAR(AllToAllFabricShare(g, pods), std::min(1.0, 1 / (7 * f)), 1e-12)
          << g.nodes << " nodes over " << g.node_span << ", blocks of " << block;
    }
  }
  // Non-blocking or inside a node: the whole NIC; the ring's share is not the all-to-all's.
  EXPECT_DOUBLE_EQ(AllToAllFabricShare(adjacent, flat), 1);
  EXPECT_DOUBLE_EQ(AllToAllFabricShare({8, 1, 8, 1}, pods), 1);
  pods.block_nodes = 4;
  pods.oversubscription = 2;
  EXPECT_DOUBLE_EQ(FabricShare(adjacent, pods), 1);  // ring: f = (7/4 + 1) / 8 = 11/32
}

TEST(CommTest, ParameterServer) {
  const Link link{kB, kA};
  const double S = 1e9;
  // One server: its link carries n pushes and n pulls.
  EXPECT_DOUBLE_EQ(ParameterServerMs(S, 8, 1, link), 1e3 * (2 * kA + 2 * 8 * S / kB));
  // As many servers as workers: each worker's own link is the bottleneck.
  EXPECT_DOUBLE_EQ(ParameterServerMs(S, 8, 8, link), 1e3 * (2 * kA + 2 * S / kB));
  EXPECT_GT(ParameterServerMs(S, 8, 1, link), RingAllReduceMs(S, 8, link));
}

// Parameter servers spread over the workers' blocks: a worker's traffic leaves its block for
// all but 1 of the B blocks, f = 1 - 1/B, at 1 / (oversubscription x f) of its NIC.
TEST(CommTest, OversubscribedFabricChargesTheParameterServersAcrossBlocks) {
  const Topology flat{{240e9, 2e-6}, {50e9, 5e-6}};
  Topology pods = flat;
  pods.block_nodes = 4;
  pods.oversubscription = 4;
  const double S = 1e9;
  // 64 workers on 8 nodes: 2 blocks, f = 1/2, half the NIC.
  const GroupShape workers{64, 8, 8, 8};
  EXPECT_DOUBLE_EQ(ParameterServerFabricShare(workers, pods), 0.5);
  EXPECT_NEAR(ParameterServerMs(S, workers, 8, pods), 1e3 * (2 * 5e-6 + 2 * 8 * S / 25e9), 1e-9);
  EXPECT_NEAR(ParameterServerMs(S, workers, 8, flat), 1e3 * (2 * 5e-6 + 2 * 8 * S / 50e9), 1e-9);
  // 16 nodes 4 apart (span 61, 16 blocks): f = 15/16, 1 / (4 x 15/16) = 4/15.
  EXPECT_NEAR(ParameterServerFabricShare({16, 16, 1, 61}, pods), 4.0 / 15, 1e-12);
  // 1:1.5 over 2 blocks: 1.5 x 1/2 < 1, the whole NIC; one block, or one node, the same.
  pods.oversubscription = 1.5;
  EXPECT_DOUBLE_EQ(ParameterServerFabricShare(workers, pods), 1);
  pods.oversubscription = 4;
  EXPECT_DOUBLE_EQ(ParameterServerFabricShare({32, 4, 8, 4}, pods), 1);
  EXPECT_DOUBLE_EQ(ParameterServerFabricShare({8, 1, 8, 1}, pods), 1);
}

// The span a fabric sees: Llama 3 405B's layout (t 8, p 16, dp 128) in Megatron's order puts
// a pipeline's 16 nodes 128 apart; in Meta's (tp-cp-pp-dp) they are consecutive and the DP
// group's 128 nodes are 16 apart.
// One pipeline boundary at a time (PairSpansNodes), checked against the ranks themselves.
// Megatron's order, dp 4, pp 4 on nodes of 8: pipeline ranks 0 and 1 share node 0 (ranks 0-7),
// 2 and 3 node 1; the boundaries 1-2 and 3-0 (the interleaved wrap) cross. With dp 3 the
// replicas straddle nodes: pipeline rank 0 holds ranks 0-2, rank 1 3-5, rank 2 6-8, so 1-2
// crosses in one replica (rank 5 on node 0, 8 on node 1) and 0-1 in none.
TEST(PlacementTest, PairSpansNodesOneBoundaryAtATime) {
  ParallelConfig p;
  p.pp = 4;
  p.dp = 4;
  const RankLayout l(p);
  EXPECT_FALSE(l.PairSpansNodes(Dim::kPp, 0, 1, 8));
  EXPECT_TRUE(l.PairSpansNodes(Dim::kPp, 1, 2, 8));
  EXPECT_FALSE(l.PairSpansNodes(Dim::kPp, 2, 3, 8));
  EXPECT_TRUE(l.PairSpansNodes(Dim::kPp, 3, 0, 8));
  EXPECT_TRUE(l.PairSpansNodes(Dim::kPp, 0, 3, 8));  // either order
  EXPECT_FALSE(l.PairSpansNodes(Dim::kPp, 2, 2, 8));
  EXPECT_FALSE(l.PairSpansNodes(Dim::kPp, 0, 3, 16));  // one node holds all
  p.dp = 3;
  const RankLayout odd(p);
  for (int a = 0; a < 4; ++a) {
    const int b = (a + 1) % 4;
    bool brute = false;
    for (int d = 0; d < 3; ++d) {
      const int ra = odd.GlobalRank({.pp = a, .dp = d}), rb = odd.GlobalRank({.pp = b, .dp = d});
      brute = brute || ra / 8 != rb / 8;
    }
    EXPECT_EQ(odd.PairSpansNodes(Dim::kPp, a, b, 8), brute) << a << "-" << b;
  }
  EXPECT_FALSE(odd.PairSpansNodes(Dim::kPp, 0, 1, 8));
  EXPECT_TRUE(odd.PairSpansNodes(Dim::kPp, 1, 2, 8));
}

TEST(PlacementTest, WorstShapeGivesTheNodeSpan) {
  ParallelConfig p;
  p.pp = 16;
  p.dp = 128;
  p.tp = 8;
  const RankLayout megatron(p);
  EXPECT_EQ(megatron.WorstShape(Dim::kPp, 8).nodes, 16);
  EXPECT_EQ(megatron.WorstShape(Dim::kPp, 8).node_span, 1921);
  EXPECT_EQ(megatron.WorstShape(Dim::kDp, 8).node_span, 128);
  const RankLayout meta(p, {Dim::kTp, Dim::kCp, Dim::kPp, Dim::kDp});
  EXPECT_EQ(meta.WorstShape(Dim::kPp, 8).node_span, 16);
  EXPECT_EQ(meta.WorstShape(Dim::kDp, 8).nodes, 128);
  EXPECT_EQ(meta.WorstShape(Dim::kDp, 8).node_span, 2033);
  EXPECT_EQ(meta.WorstShape(Dim::kTp, 8).node_span, 1);
}

// A pipeline stage's tp x cp x dp ranks (fp8's amax reduction group), tp 2, cp 2, dp 2, pp 2
// on nodes of 4. Megatron's order (tp-cp-dp-pp): ranks 0-7, two whole nodes. Meta's
// (tp-cp-pp-dp): {0, 1, 2, 3} and {8, 9, 10, 11}, nodes 0 and 2, a span of 3.
TEST(PlacementTest, WorstShapeOverThreeDimensions) {
  ParallelConfig p;
  p.tp = 2;
  p.cp = 2;
  p.dp = 2;
  p.pp = 2;
  const RankLayout megatron(p);
  const GroupShape m = megatron.WorstShape({Dim::kTp, Dim::kCp, Dim::kDp}, 4);
  EXPECT_EQ(m.size, 8);
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(m.ranks_per_node, 4);
  EXPECT_EQ(m.node_span, 2);
  const RankLayout meta(p, {Dim::kTp, Dim::kCp, Dim::kPp, Dim::kDp});
  const GroupShape t = meta.WorstShape({Dim::kTp, Dim::kCp, Dim::kDp}, 4);
  EXPECT_EQ(t.size, 8);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.ranks_per_node, 4);
  EXPECT_EQ(t.node_span, 3);
  // The one- and two-dimension queries are the same query; a repeated dimension counts once.
  const GroupShape dp = meta.WorstShape(Dim::kDp, 4), dd = meta.WorstShape({Dim::kDp, Dim::kDp}, 4);
  EXPECT_EQ(dp.size, 2);
  EXPECT_EQ(dd.size, 2);
  EXPECT_EQ(dp.nodes, dd.nodes);
  EXPECT_EQ(dp.node_span, dd.node_span);
  EXPECT_EQ(meta.WorstShape(Dim::kDp, 4).node_span, 3);  // ranks 0 and 8
}

// a2a+p2p's two levels of a CP group of 8 at tp 2 (CP ranks 2 apart) on nodes of 8: the
// all-to-all pairs {0, 2}, {4, 6}, ... stay on a node; the rings {0, 4, 8, 12} and
// {2, 6, 10, 14} take two ranks on each of two nodes. Checked against the ranks themselves.
TEST(PlacementTest, WorstSubShapeSplitsAGroupIntoBlocksAndStrides) {
  ParallelConfig p;
  p.tp = 2;
  p.cp = 8;
  p.dp = 2;
  const RankLayout l(p);
  const GroupShape inner = l.WorstSubShape(Dim::kCp, 2, 1, 8);
  EXPECT_EQ(inner.size, 2);
  EXPECT_EQ(inner.nodes, 1);
  EXPECT_EQ(inner.ranks_per_node, 2);
  const GroupShape outer = l.WorstSubShape(Dim::kCp, 4, 2, 8);
  EXPECT_EQ(outer.size, 4);
  EXPECT_EQ(outer.nodes, 2);
  EXPECT_EQ(outer.ranks_per_node, 2);
  EXPECT_EQ(outer.node_span, 2);
  const std::vector<int> cp0 = l.Group(Dim::kCp, {});
  ASSERT_EQ(cp0.size(), 8u);
  EXPECT_EQ(cp0[0] / 8, cp0[1] / 8);  // an all-to-all pair on one node
  EXPECT_EQ(cp0[0] / 8, cp0[2] / 8);  // ring: 0 and 4 on node 0, 8 and 12 on node 1
  EXPECT_NE(cp0[0] / 8, cp0[4] / 8);
  // The whole group of 8 spans the same two nodes, four ranks on each.
  EXPECT_EQ(l.WorstShape(Dim::kCp, 8).nodes, 2);
  EXPECT_EQ(l.WorstShape(Dim::kCp, 8).ranks_per_node, 4);
}

TEST(PlacementTest, MegatronOrderRoundTrip) {
  ParallelConfig p;
  p.pp = 4;
  p.dp = 3;
  p.tp = 8;
  p.cp = 2;
  const RankLayout l(p);
  EXPECT_EQ(l.world_size(), 192);
  EXPECT_EQ(l.GlobalRank({.pp = 0, .dp = 0, .tp = 3, .cp = 0}), 3);
  EXPECT_EQ(l.GlobalRank({.pp = 0, .dp = 0, .tp = 0, .cp = 1}), 8);
  EXPECT_EQ(l.GlobalRank({.pp = 0, .dp = 1, .tp = 0, .cp = 0}), 16);
  EXPECT_EQ(l.GlobalRank({.pp = 1, .dp = 0, .tp = 0, .cp = 0}), 48);
  for (int r = 0; r < l.world_size(); ++r) EXPECT_EQ(l.GlobalRank(l.Coord(r)), r);
  EXPECT_EQ(l.Group(Dim::kDp, {.pp = 1, .dp = 2, .tp = 5, .cp = 1}),
            (std::vector<int>{48 + 8 + 5, 48 + 16 + 8 + 5, 48 + 32 + 8 + 5}));
  // 8 GPUs per node: TP stays inside a node, CP and DP groups span nodes.
  EXPECT_FALSE(l.SpansNodes(Dim::kTp, {}, 8));
  EXPECT_TRUE(l.SpansNodes(Dim::kCp, {}, 8));
  EXPECT_TRUE(l.SpansNodes(Dim::kDp, {}, 8));
  EXPECT_FALSE(l.SpansNodes(Dim::kCp, {}, 16));
  const GroupShape dp = l.WorstShape(Dim::kDp, Dim::kCp, 8);
  EXPECT_EQ(dp.size, 6);
  EXPECT_EQ(dp.nodes, 6);
  EXPECT_EQ(dp.ranks_per_node, 1);
}

TEST(PlacementTest, CustomOrder) {
  Expected<DimOrder> o = ParseDimOrder("dp-tp-cp-pp");
  ASSERT_TRUE(o);
  EXPECT_EQ(ToString(*o), "dp-tp-cp-pp");
  ParallelConfig p;
  p.dp = 2;
  p.tp = 4;
  const RankLayout l(p, *o);
  EXPECT_EQ(l.GlobalRank({.pp = 0, .dp = 1, .tp = 0, .cp = 0}), 1);
  EXPECT_EQ(l.GlobalRank({.pp = 0, .dp = 0, .tp = 1, .cp = 0}), 2);
  EXPECT_FALSE(ParseDimOrder("tp-dp-pp"));
  EXPECT_FALSE(ParseDimOrder("tp-tp-dp-pp"));
  EXPECT_FALSE(ParseDimOrder("tp-cp-dp-xx"));
}

}  // namespace
}  // namespace pipetwin::models

#include <yaml-cpp/yaml.h>

#include "models/cluster.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {
namespace {

// cluster.compute replaces the efficiency model's constants; a new gemm_efficiency keeps the
// per-kernel overhead t0, so t = 2mnk / (e·peak) + t0 holds for both.
TEST(ClusterTest, ComputeOverridesKeepTheKernelOverhead) {
  const YamlFields f{"job.yaml"};
  auto base = ParseClusterConfig(YAML::Load("{device: a100-sxm-80gb}"), f, 8);
  auto tuned = ParseClusterConfig(
      YAML::Load("{device: a100-sxm-80gb, compute: {gemm_efficiency: 0.6, hbm_efficiency: 0.5, "
                 "attention_forward_efficiency: 0.4, attention_backward_efficiency: 0.3}}"),
      f, 8);
  ASSERT_TRUE(base.ok() && tuned.ok());
  const DeviceSpec& a = base->device;
  const DeviceSpec& b = tuned->device;
  EXPECT_DOUBLE_EQ(b.gemm_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(b.hbm_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(b.attn_fwd_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(b.attn_bwd_efficiency, 0.3);
  const double peak = a.peak_bf16_flops, mnk = 4096.0 * 4096 * 4096;
  auto t0 = [&](const DeviceSpec& d) {
    return GemmMs(d, Precision::kBf16, 4096, 4096, 4096) * 1e-3 -
           2 * mnk / (d.gemm_efficiency * peak);
  };
  EXPECT_NEAR(t0(a), 5e-6, 1e-12);
  EXPECT_NEAR(t0(b), 5e-6, 1e-12);
  // Bad values name the key and exit with status 2.
  for (const char* bad : {"{compute: {gemm_efficiency: 1.5}}", "{compute: {gemm_eff: 0.5}}",
                          "{compute: {hbm_efficiency: fast}}", "{compute: {fp8_gemm_factor: 0}}",
                          "{compute: {fp8_gemm_factor: 1.2}}"}) {
    auto e = ParseClusterConfig(YAML::Load(bad), f, 8);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().exit_status(), 2);
    EXPECT_NE(e.error().message.find("cluster.compute"), std::string::npos) << e.error().message;
  }
}

}  // namespace
}  // namespace pipetwin::models
