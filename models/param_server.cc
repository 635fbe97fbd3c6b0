#include "models/param_server.h"

#include <algorithm>

namespace pipetwin::models {

bool UsesParameterServers(const ClusterConfig& cluster, const ParallelConfig& par) {
  return cluster.dp_reduction == ClusterConfig::DpReduction::kParameterServer && par.dp > 1 &&
         par.zero == 0;
}

int ParameterServerRanks(const ClusterConfig& cluster, const ParallelConfig& par) {
  return UsesParameterServers(cluster, par) ? cluster.parameter_servers : 0;
}

PsShard ParameterServerShard(std::int64_t elements, int servers, int server) {
  const std::int64_t n = std::max(1, servers);
  const std::int64_t chunk = (elements + n - 1) / n;
  const std::int64_t begin = std::min(elements, chunk * server);
  return {begin, std::min(elements, begin + chunk) - begin};
}

std::vector<PsServerBytes> PredictServerBytes(const std::vector<std::int64_t>& stage_elements,
                                              const PsShape& shape, int element_bytes) {
  std::vector<PsServerBytes> out(static_cast<std::size_t>(std::max(0, shape.servers)));
  for (int i = 0; i < shape.servers; ++i) {
    std::int64_t elems = 0, shards = 0;
    for (std::int64_t e : stage_elements) {
      const std::int64_t n = ParameterServerShard(e, shape.servers, i).size;
      elems += n;
      shards += n > 0 ? 1 : 0;
    }
    const std::int64_t pushes = static_cast<std::int64_t>(shape.dp) * shape.tp;
    const std::int64_t received = elems * pushes * element_bytes;
    out[static_cast<std::size_t>(i)] = {received + shards * pushes * kUpdateCountBytes, received};
  }
  return out;
}

std::vector<std::int64_t> PredictServerHostBytes(const std::vector<std::int64_t>& stage_elements,
                                                 const PsShape& shape, int state_floats) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(std::max(0, shape.servers)));
  for (int i = 0; i < shape.servers; ++i) {
    std::int64_t elems = 0;
    for (std::int64_t e : stage_elements) elems += ParameterServerShard(e, shape.servers, i).size;
    out[static_cast<std::size_t>(i)] =
        elems * shape.tp * (1 + state_floats + shape.dp) * static_cast<std::int64_t>(sizeof(float));
  }
  return out;
}

}  // namespace pipetwin::models
