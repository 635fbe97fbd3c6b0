// param_server.h — the executor's parameter servers (`cluster.dp_reduction: parameter-server`,
// `cluster.parameter_servers: N`; the sharding and byte counts are models/param_server.h).
//
// `run` starts pp × dp × tp × cp workers and N server ranks after them (world ranks W..W+N-1).
// Server i holds shard i of every stage's parameters, for every tensor-parallel rank, and the
// optimizer state of that shard. A worker's REDUCE_GRAD pushes shard i of the stage's
// gradients to server i and posts the receive of the updated shard i of the parameters
// straight into its parameter buffer; the server waits for all dp pushes of a (stage, tp rank),
// sums them in dp order, steps its optimizer (one update per step k, once all dp pushes of
// step k are in) and sends the shard back to each of the dp workers, with the number of
// updates it holds; under training.dp_sync async or stale it answers a push before the
// step's update (models/dp_sync.h). The worker's OPT then has nothing left to do. The initial
// parameters come from the dp-rank-0 worker of each (stage, tp rank) once, before the first step
// (not counted in the bytes of a step).
//
//   worker:  PsClient ps(cfg.ps);  ps.SendInitial(stage, params);
//            ps.Push(stage, grads, params);  while (!ps.Test(stage)) { ... }
//   server:  auto bytes = RunParameterServer(server_config);   // all steps, then returns
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/model/config.h"
#include "job/job.h"
#include "models/param_server.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/expected.h"
#include "schedule/report.h"

namespace pipetwin::exec {

// Where the servers are, as every rank sees it (BackendConfig::ps).
struct PsLinks {
  MPI_Comm comm = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD: ranks are world ranks
  int first_server = 0;           // world rank of server 0 (= the workers' count)
  int servers = 0;                // 0: no parameter servers
  double timeout_s = 300;
  bool enabled() const { return servers > 0; }
};

// The world of a run with servers, made by every rank of MPI_COMM_WORLD together: the
// servers' links and, for the workers, a communicator of the workers alone that becomes
// JobComm() (exec/mpi_util.h) until destruction. Nothing happens where servers == 0.
class PsWorld {
 public:
  PsWorld(int workers, int servers, double timeout_s);
  ~PsWorld();
  PsWorld(const PsWorld&) = delete;
  PsWorld& operator=(const PsWorld&) = delete;
  bool is_server() const { return server_ >= 0; }
  int server() const { return server_; }
  const PsLinks& links() const { return links_; }

 private:
  PsLinks links_;
  MPI_Comm workers_ = MPI_COMM_NULL;
  int server_ = -1;
};

// A worker's side of the protocol.
class PsClient {
 public:
  explicit PsClient(const PsLinks& links);
  ~PsClient();  // cancels the receives still posted (a step that failed)
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // The dp-rank-0 worker of a (stage, tp rank): the servers' initial parameters (blocking).
  void SendInitial(int stage, std::span<const float> params);
  // Pushes `grads` shard by shard and receives the updated parameters into `params` (same
  // size; both must stay alive until Test returns true).
  void Push(int stage, std::span<const float> grads, std::span<float> params);
  // True once the push and the pull of `stage` have completed (or none is in flight).
  bool Test(int stage);
  std::int64_t bytes_sent() const { return bytes_sent_; }
  // Updates (steps of the servers) in the parameters this rank holds: the fewest over the
  // shards it pulled last (0 before the first pull). Under training.dp_sync the staleness of
  // the next step's gradients is that step minus this.
  std::int64_t updates_held() const;

 private:
  PsLinks links_;
  std::map<int, std::vector<MPI_Request>> reqs_;
  // Per stage, per server: the update count that came with the last pull.
  std::map<int, std::vector<std::int64_t>> updates_;
  std::int64_t bytes_sent_ = 0;
};

// The optimizer a server applies to its shard; a backend that computes registers one
// (exec/cpu/register.cc). Without one the servers sum and send the parameters back unchanged
// (the sleep backend: its optimizer time is the workers' OPT).
struct ShardOptimizerSpec {
  bool adam = true;
  float learning_rate = 1e-3f;
  float momentum = 0.0f;
};
class ShardOptimizer {
 public:
  virtual ~ShardOptimizer() = default;
  virtual void Step(std::span<float> params, std::span<const float> grads) = 0;
};
using ShardOptimizerFactory =
    std::function<std::unique_ptr<ShardOptimizer>(std::size_t n, const ShardOptimizerSpec&)>;
void RegisterShardOptimizer(const std::string& backend, ShardOptimizerFactory factory);

struct ServerConfig {
  PsLinks links;
  int server = 0;  // 0..servers-1
  int steps = 0;   // warm-up and measured steps together
  gpt::ModelConfig model;
  std::vector<int> layers_per_stage;            // every stage, in model order
  std::vector<int> stage_to_rank;               // pipeline rank of every stage
  models::RankLayout layout{ParallelConfig{}};  // the workers' placement
  bool sequence_parallel = false;
  std::string backend;  // whose ShardOptimizer to use
  ShardOptimizerSpec optimizer;
  // training.dp_sync: when the reply to a worker's push of step k goes out (models/dp_sync.h):
  // sync once update k is applied, stale once update k - staleness is, async at once.
  models::DpSync dp_sync = models::DpSync::kSync;
  int staleness = 0;
  // The sleep backend's workers wake at real-time priority (exec/sleep/): a server that
  // answers them should too, or a busy machine delays every reply by a scheduler tick.
  bool prompt_wakeups = false;
};

// A worker rank's steps with parameter servers: wall-clock start and end (steady clock, ns)
// and the staleness of each step's gradients (the step minus the updates its parameters held).
struct PsStepTimes {
  std::vector<std::int64_t> start_ns, end_ns, staleness;
  void Add(std::int64_t start, std::int64_t end, std::int64_t stale) {
    start_ns.push_back(start);
    end_ns.push_back(end);
    staleness.push_back(stale);
  }
};

// Collective over the job's ranks (JobComm): every rank's times on rank 0, each worker
// (data-parallel replica: its ranks' earliest start and latest end of a step, their largest
// staleness) summarised by models::SummarizeDpSync. Nothing on the other ranks. The ranks share
// one machine's steady clock.
std::optional<DpSyncReport> GatherDpSync(const ResolvedJob& job, const PsStepTimes& mine,
                                         double timeout_s);

// Serves `steps` steps; the bytes this server sent and received per step (the run's totals
// divided by the steps).
Expected<models::PsServerBytes> RunParameterServer(const ServerConfig& cfg);

}  // namespace pipetwin::exec
