// param_server.h — data-parallel reduction through parameter servers
// (`cluster.dp_reduction: parameter-server`, `cluster.parameter_servers: N`): the one place
// that says when servers are used, how a stage's parameters are sharded over them, and how
// many bytes every server moves in a step, for the simulator's report and the executor alike.
//
// Each of the N servers holds shard i of every stage's flat parameter vector (and its
// optimizer state), for every tensor-parallel rank: ceil(E / N) elements, the last shards
// shorter (empty where E < N). In a step every worker pushes its shard i of the stage's
// gradients to server i (E elements per worker and stage in all), the server sums the dp
// pushes, applies the optimizer and sends its shard of the parameters back to each worker.
//
//   if (UsesParameterServers(cluster, parallel)) { ... world = pp*dp*tp*cp + servers ... }
//   PsShard s = ParameterServerShard(1000, 3, 2);            // {668, 332}
//   auto b = PredictServerBytes({1000, 600}, {.dp = 4, .tp = 1, .servers = 3}, 4);
#pragma once

#include <cstdint>
#include <vector>

#include "models/cluster.h"
#include "schedule/config.h"

namespace pipetwin::models {

// Servers take part: dp_reduction is parameter-server, dp > 1 and no ZeRO (ZeRO shards the
// optimizer state over the workers instead; the simulator then reduce-scatters).
bool UsesParameterServers(const ClusterConfig& cluster, const ParallelConfig& par);
// The extra ranks a run starts for the servers (0 where UsesParameterServers is false).
int ParameterServerRanks(const ClusterConfig& cluster, const ParallelConfig& par);

struct PsShard {
  std::int64_t begin = 0;
  std::int64_t size = 0;
};
// Shard `server` of `elements` parameters over `servers` servers.
PsShard ParameterServerShard(std::int64_t elements, int servers, int server);

struct PsShape {
  int dp = 1;  // workers that push to each server for each (stage, tp rank)
  int tp = 1;
  int servers = 1;
};
// Each reply to a push carries, besides the parameters, the server's update count (an int64;
// the staleness of training.dp_sync is measured by it).
inline constexpr std::int64_t kUpdateCountBytes = 8;
struct PsServerBytes {
  std::int64_t sent = 0;      // parameters to the workers, per step
  std::int64_t received = 0;  // gradients from the workers, per step
};
// Per server, the bytes of one step: for every stage (its parameters per tp rank in
// `stage_elements`) and tp rank, dp pushes of the server's gradient shard in, dp replies of its
// parameter shard (`element_bytes` per element) and update count out.
std::vector<PsServerBytes> PredictServerBytes(const std::vector<std::int64_t>& stage_elements,
                                              const PsShape& shape, int element_bytes);

// Per server, the bytes it holds at least, in float32 (the executor's servers): for every
// stage and tp rank its shard of the parameters, `state_floats` optimizer floats per element
// (Adam 2, SGD with momentum 1, SGD 0) and one step's pushes from the dp workers, whose
// receives are posted up front. Replies in flight and the pushes of further steps (dp_sync
// async or stale) come on top.
std::vector<std::int64_t> PredictServerHostBytes(const std::vector<std::int64_t>& stage_elements,
                                                 const PsShape& shape, int state_floats);

}  // namespace pipetwin::models
