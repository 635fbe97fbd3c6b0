// Parameter-server sharding and bytes (models/param_server.h), worked by hand.
#include "models/param_server.h"

#include <gtest/gtest.h>

namespace pipetwin::models {
namespace {

TEST(ParamServerTest, ShardsCoverTheStageOnce) {
  // 1000 over 3: ceil = 334, 334, 332.
  EXPECT_EQ(ParameterServerShard(1000, 3, 0).begin, 0);
  EXPECT_EQ(ParameterServerShard(1000, 3, 0).size, 334);
  EXPECT_EQ(ParameterServerShard(1000, 3, 1).begin, 334);
  EXPECT_EQ(ParameterServerShard(1000, 3, 2).begin, 668);
  EXPECT_EQ(ParameterServerShard(1000, 3, 2).size, 332);
  // Fewer elements than servers: the last server holds nothing.
  EXPECT_EQ(ParameterServerShard(2, 3, 2).size, 0);
  EXPECT_EQ(ParameterServerShard(2, 3, 1).size, 1);
}

TEST(ParamServerTest, ServerBytesPerStep) {
  // Stages of 1000 and 2 elements, dp 4, tp 1, 3 servers, float32: server 0 takes 334 + 1
  // elements from each of 4 workers and replies with them and an 8-byte count per shard.
  const auto b = PredictServerBytes({1000, 2}, {.dp = 4, .tp = 1, .servers = 3}, 4);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].received, (334 + 1) * 4 * 4);
  EXPECT_EQ(b[0].sent, (334 + 1) * 4 * 4 + 2 * 4 * 8);
  EXPECT_EQ(b[2].received, 332 * 4 * 4);
  EXPECT_EQ(b[2].sent, 332 * 4 * 4 + 1 * 4 * 8);
}

TEST(ParamServerTest, ServerHostBytes) {
  // The same stages, tp 2, Adam: server 0 holds (334 + 1) elements per tp rank, each with its
  // 2 Adam floats and the 4 workers' pushes: 7 floats; server 2 holds 332 and nothing of the
  // 2-element stage.
  const auto b = PredictServerHostBytes({1000, 2}, {.dp = 4, .tp = 2, .servers = 3}, 2);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (334 + 1) * 2 * 7 * 4);
  EXPECT_EQ(b[2], 332 * 2 * 7 * 4);
  EXPECT_EQ(PredictServerHostBytes({10}, {.dp = 2, .tp = 1, .servers = 1}, 0)[0], 10 * 3 * 4);
}

TEST(ParamServerTest, OnlyWithDataParallelismAndNoZero) {
  ClusterConfig c;
  c.dp_reduction = ClusterConfig::DpReduction::kParameterServer;
  c.parameter_servers = 2;
  EXPECT_EQ(ParameterServerRanks(c, {.dp = 4}), 2);
  EXPECT_EQ(ParameterServerRanks(c, {.dp = 1}), 0);
  EXPECT_EQ(ParameterServerRanks(c, {.dp = 4, .zero = 1}), 0);
  c.dp_reduction = ClusterConfig::DpReduction::kRing;
  EXPECT_EQ(ParameterServerRanks(c, {.dp = 4}), 0);
}

}  // namespace
}  // namespace pipetwin::models
