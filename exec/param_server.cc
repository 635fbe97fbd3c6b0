#include "exec/param_server.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <stdexcept>

#include "exec/model/params.h"
#include "exec/mpi_util.h"
#include "models/dp_sync.h"
#include "models/placement.h"

namespace pipetwin::exec {
namespace {

// Tags on PsLinks::comm, which carries nothing else: the stage and what the message is.
enum : int { kInitial = 0, kPush = 1, kPull = 2, kUpdates = 3, kKinds = 4 };
int Tag(int stage, int kind) { return stage * kKinds + kind; }

std::map<std::string, ShardOptimizerFactory>& Optimizers() {
  static std::map<std::string, ShardOptimizerFactory> m;
  return m;
}

int Count(std::int64_t n) { return static_cast<int>(n); }

}  // namespace

void RegisterShardOptimizer(const std::string& backend, ShardOptimizerFactory factory) {
  Optimizers()[backend] = std::move(factory);
}

PsWorld::PsWorld(int workers, int servers, double timeout_s) {
  if (servers <= 0) return;
  links_.first_server = workers;
  links_.servers = servers;
  links_.timeout_s = timeout_s;
  PT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &links_.comm));
  const int rank = WorldRank();
  const bool server = rank >= workers;
  PT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, server ? 1 : 0, rank, &workers_));
  if (server) {
    server_ = rank - workers;
  } else {
    SetJobComm(workers_);
  }
}

PsWorld::~PsWorld() {
  if (links_.comm == MPI_COMM_NULL) return;
  SetJobComm(MPI_COMM_WORLD);
  MPI_Comm_free(&workers_);
  MPI_Comm_free(&links_.comm);
}

PsClient::PsClient(const PsLinks& links) : links_(links) {}

PsClient::~PsClient() {
  for (auto& [stage, reqs] : reqs_) {
    for (MPI_Request& r : reqs) {
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    }
  }
}

void PsClient::SendInitial(int stage, std::span<const float> params) {
  const auto n = static_cast<std::int64_t>(params.size());
  for (int i = 0; i < links_.servers; ++i) {
    const models::PsShard sh = models::ParameterServerShard(n, links_.servers, i);
    if (sh.size == 0) continue;
    MPI_Request req;
    PT_MPI_CHECK(MPI_Isend(params.data() + sh.begin, Count(sh.size), MPI_FLOAT,
                           links_.first_server + i, Tag(stage, kInitial), links_.comm, &req));
    WaitRequest(&req, links_.timeout_s, [&] {
      return "initial parameters of stage " + std::to_string(stage) + " to parameter server " +
             std::to_string(i);
    });
  }
}

void PsClient::Push(int stage, std::span<const float> grads, std::span<float> params) {
  if (reqs_.count(stage) > 0) {
    throw std::logic_error("REDUCE_GRAD twice for stage " + std::to_string(stage));
  }
  if (grads.size() != params.size()) throw std::logic_error("PsClient::Push: sizes differ");
  std::vector<MPI_Request>& reqs = reqs_[stage];
  std::vector<std::int64_t>& updates = updates_[stage];
  updates.assign(static_cast<std::size_t>(links_.servers), -1);
  const auto n = static_cast<std::int64_t>(grads.size());
  for (int i = 0; i < links_.servers; ++i) {
    const models::PsShard sh = models::ParameterServerShard(n, links_.servers, i);
    if (sh.size == 0) continue;
    const int server = links_.first_server + i;
    // The pull first, so the server's reply always finds its receive posted.
    MPI_Request req;
    PT_MPI_CHECK(MPI_Irecv(params.data() + sh.begin, Count(sh.size), MPI_FLOAT, server,
                           Tag(stage, kPull), links_.comm, &req));
    reqs.push_back(req);
    PT_MPI_CHECK(MPI_Irecv(&updates[static_cast<std::size_t>(i)], 1, MPI_INT64_T, server,
                           Tag(stage, kUpdates), links_.comm, &req));
    reqs.push_back(req);
    PT_MPI_CHECK(MPI_Isend(grads.data() + sh.begin, Count(sh.size), MPI_FLOAT, server,
                           Tag(stage, kPush), links_.comm, &req));
    reqs.push_back(req);
    bytes_sent_ += sh.size * static_cast<std::int64_t>(sizeof(float));
  }
}

bool PsClient::Test(int stage) {
  auto it = reqs_.find(stage);
  if (it == reqs_.end()) return true;
  int done = 0;
  PT_MPI_CHECK(MPI_Testall(static_cast<int>(it->second.size()), it->second.data(), &done,
                           MPI_STATUSES_IGNORE));
  if (done) reqs_.erase(it);
  return done != 0;
}

std::int64_t PsClient::updates_held() const {
  std::int64_t fewest = -1;
  for (const auto& [stage, per_server] : updates_) {
    for (std::int64_t u : per_server) {
      if (u >= 0 && (fewest < 0 || u < fewest)) fewest = u;
    }
  }
  return std::max<std::int64_t>(0, fewest);
}

namespace {

// What one server holds for one (stage, tp rank): its shard, the dp workers that push it,
// the parameters and optimizer state, the pushes of the steps not yet applied, and the
// replies not yet sent.
struct ServedShard {
  int stage = 0;
  int tp_rank = 0;
  std::vector<int> workers;  // world ranks, in dp order
  models::PsShard shard;
  std::vector<float> params;
  std::unique_ptr<ShardOptimizer> optimizer;
  std::int64_t applied = 0;  // updates applied (one per step)
  // Per step not yet applied: one buffer per worker and how many have arrived.
  struct Pushes {
    std::vector<std::vector<float>> from;
    std::size_t arrived = 0;
  };
  std::map<std::int64_t, Pushes> steps;
  std::vector<std::int64_t> posted;   // per worker: pushes whose receive has been posted
  std::vector<MPI_Request> receives;  // per worker: the one posted (or null)
  struct Reply {
    std::size_t worker;
    std::int64_t step;
  };
  std::vector<Reply> waiting;  // pushes not yet answered
};

// A reply in flight: the parameters as they were when it left, and the update count.
struct Sent {
  std::vector<float> params;
  std::int64_t updates = 0;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

std::vector<ServedShard> ShardsOf(const ServerConfig& cfg) {
  const models::RankLayout& layout = cfg.layout;
  const int stages = static_cast<int>(cfg.layers_per_stage.size());
  const int tp = layout.Size(models::Dim::kTp);
  const ShardOptimizerFactory* make = nullptr;
  if (auto it = Optimizers().find(cfg.backend); it != Optimizers().end()) make = &it->second;
  std::vector<ServedShard> out;
  int first_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const int layers = cfg.layers_per_stage[static_cast<std::size_t>(s)];
    for (int t = 0; t < tp; ++t) {
      const gpt::ParamLayout pl = gpt::ChunkParamLayout(
          cfg.model, {first_layer, layers, s == 0, s == stages - 1},
          gpt::TpConfig{.size = tp, .rank = t, .sequence_parallel = cfg.sequence_parallel});
      ServedShard x;
      x.stage = s;
      x.tp_rank = t;
      x.shard = models::ParameterServerShard(static_cast<std::int64_t>(pl.total), cfg.links.servers,
                                             cfg.server);
      if (x.shard.size == 0) continue;
      models::RankCoord c;
      c.pp = cfg.stage_to_rank[static_cast<std::size_t>(s)];
      c.tp = t;
      x.workers = layout.Group(models::Dim::kDp, c);
      const auto size = static_cast<std::size_t>(x.shard.size);
      x.params.assign(size, 0.0f);
      x.posted.assign(x.workers.size(), 0);
      x.receives.assign(x.workers.size(), MPI_REQUEST_NULL);
      if (make) x.optimizer = (*make)(size, cfg.optimizer);
      out.push_back(std::move(x));
    }
    first_layer += layers;
  }
  return out;
}

}  // namespace

std::optional<DpSyncReport> GatherDpSync(const ResolvedJob& job, const PsStepTimes& mine,
                                         double timeout_s) {
  const MPI_Comm comm = JobComm();
  int world = 0, rank = 0;
  PT_MPI_CHECK(MPI_Comm_size(comm, &world));
  PT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const std::size_t steps = mine.start_ns.size();
  std::vector<std::int64_t> row;
  for (const auto* v : {&mine.start_ns, &mine.end_ns, &mine.staleness}) {
    row.insert(row.end(), v->begin(), v->end());
  }
  std::vector<std::int64_t> all(row.size() * static_cast<std::size_t>(world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Igather(row.data(), static_cast<int>(row.size()), MPI_INT64_T, all.data(),
                           static_cast<int>(row.size()), MPI_INT64_T, 0, comm, &req));
  WaitRequest(&req, timeout_s, [] { return std::string("gathering the workers' step times"); });
  if (rank != 0) return std::nullopt;
  const JobConfig& c = job.config;
  const models::RankLayout layout(job.parallel(), c.cluster.rank_order);
  const auto dp = static_cast<std::size_t>(c.parallel.dp);
  models::DpSyncTimes t;
  constexpr double kNone = -1;
  t.start_ms.assign(dp, std::vector<double>(steps, kNone));
  t.end_ms.assign(dp, std::vector<double>(steps, kNone));
  t.staleness.assign(dp, std::vector<int>(steps, 0));
  std::int64_t origin = all.empty() ? 0 : all.front();
  for (int r = 0; r < world; ++r) {
    origin = std::min(origin, all[static_cast<std::size_t>(r) * row.size()]);
  }
  for (int r = 0; r < world; ++r) {
    const auto w = static_cast<std::size_t>(layout.Coord(r).dp);
    const std::int64_t* x = all.data() + static_cast<std::size_t>(r) * row.size();
    for (std::size_t k = 0; k < steps; ++k) {
      const double start = static_cast<double>(x[k] - origin) * 1e-6;
      const double end = static_cast<double>(x[steps + k] - origin) * 1e-6;
      double& s = t.start_ms[w][k];
      double& e = t.end_ms[w][k];
      s = s == kNone ? start : std::min(s, start);
      e = std::max(e, end);
      t.staleness[w][k] = std::max(t.staleness[w][k], static_cast<int>(x[2 * steps + k]));
    }
  }
  const models::TrainingConfig& tc = c.training;
  return models::SummarizeDpSync(t, tc.dp_sync, tc.staleness, c.execution.warmup,
                                 static_cast<double>(job.microbatches) * tc.micro_batch);
}

Expected<models::PsServerBytes> RunParameterServer(const ServerConfig& cfg) {
  if (cfg.prompt_wakeups) {
    // As the sleep backend: 1 us timer slack; SCHED_FIFO 1 where permitted, else nice -20.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    const sched_param rt{.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0) setpriority(PRIO_PROCESS, 0, -20);
  }
  std::vector<ServedShard> shards = ShardsOf(cfg);
  const MPI_Comm comm = cfg.links.comm;
  const std::string me = "parameter server " + std::to_string(cfg.server);
  // The initial parameters, from each shard's dp-rank-0 worker.
  {
    std::vector<MPI_Request> reqs;
    for (ServedShard& x : shards) {
      MPI_Request req;
      PT_MPI_CHECK(MPI_Irecv(x.params.data(), Count(x.shard.size), MPI_FLOAT, x.workers.front(),
                             Tag(x.stage, kInitial), comm, &req));
      reqs.push_back(req);
    }
    for (MPI_Request& r : reqs) {
      WaitRequest(&r, cfg.links.timeout_s, [&] { return me + ": initial parameters"; });
    }
  }
  models::PsServerBytes total;
  const auto steps = static_cast<std::int64_t>(cfg.steps);
  // The update a reply to a push of step k waits for: k (sync), k - s (stale), none (async).
  const bool waits = cfg.dp_sync != models::DpSync::kAsync;
  const std::int64_t lag = cfg.dp_sync == models::DpSync::kStale ? cfg.staleness : 0;
  std::vector<std::unique_ptr<Sent>> sent;
  std::vector<float> sum;
  auto post = [&](ServedShard& x, std::size_t w) {
    const std::int64_t k = x.posted[w]++;
    ServedShard::Pushes& p = x.steps[k];
    if (p.from.empty()) p.from.resize(x.workers.size());
    p.from[w].resize(static_cast<std::size_t>(x.shard.size));
    PT_MPI_CHECK(MPI_Irecv(p.from[w].data(), Count(x.shard.size), MPI_FLOAT, x.workers[w],
                           Tag(x.stage, kPush), comm, &x.receives[w]));
  };
  for (ServedShard& x : shards) {
    for (std::size_t w = 0; w < x.workers.size(); ++w) {
      if (steps > 0) post(x, w);
    }
  }
  // One pass over every shard: takes in arrived pushes, applies complete steps in order,
  // answers the pushes whose wait is over. True when it did anything.
  auto progress = [&] {
    bool moved = false;
    for (ServedShard& x : shards) {
      for (std::size_t w = 0; w < x.workers.size(); ++w) {
        if (x.receives[w] == MPI_REQUEST_NULL) continue;
        int done = 0;
        PT_MPI_CHECK(MPI_Test(&x.receives[w], &done, MPI_STATUS_IGNORE));
        if (!done) continue;
        moved = true;
        const std::int64_t k = x.posted[w] - 1;
        ++x.steps[k].arrived;
        x.waiting.push_back({w, k});
        total.received += x.shard.size * static_cast<std::int64_t>(sizeof(float));
        if (x.posted[w] < steps) post(x, w);
      }
      // Apply step `applied` once all of its pushes are in: their sum in dp order.
      for (auto it = x.steps.find(x.applied);
           it != x.steps.end() && it->second.arrived == x.workers.size();
           it = x.steps.find(x.applied)) {
        const auto& from = it->second.from;
        sum.assign(from.front().begin(), from.front().end());
        for (std::size_t w = 1; w < from.size(); ++w) {
          for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += from[w][i];
        }
        if (x.optimizer) x.optimizer->Step(x.params, sum);
        x.steps.erase(it);
        ++x.applied;
        moved = true;
      }
      for (auto r = x.waiting.begin(); r != x.waiting.end();) {
        if (waits && x.applied < r->step + 1 - lag) {
          ++r;
          continue;
        }
        auto out = std::make_unique<Sent>();
        out->params = x.params;
        out->updates = x.applied;
        const int worker = x.workers[r->worker];
        PT_MPI_CHECK(MPI_Isend(out->params.data(), Count(x.shard.size), MPI_FLOAT, worker,
                               Tag(x.stage, kPull), comm, &out->req[0]));
        PT_MPI_CHECK(MPI_Isend(&out->updates, 1, MPI_INT64_T, worker, Tag(x.stage, kUpdates), comm,
                               &out->req[1]));
        total.sent += x.shard.size * static_cast<std::int64_t>(sizeof(float)) +
                      static_cast<std::int64_t>(sizeof(std::int64_t));
        sent.push_back(std::move(out));
        r = x.waiting.erase(r);
        moved = true;
      }
    }
    // Release the replies that have left.
    for (auto it = sent.begin(); it != sent.end();) {
      int done = 0;
      PT_MPI_CHECK(MPI_Testall(2, (*it)->req, &done, MPI_STATUSES_IGNORE));
      if (done) {
        it = sent.erase(it);
        moved = true;
      } else {
        ++it;
      }
    }
    return moved;
  };
  auto finished = [&] {
    if (!sent.empty()) return false;
    for (const ServedShard& x : shards) {
      if (x.applied < steps || !x.waiting.empty()) return false;
    }
    return true;
  };
  while (!finished()) {
    // A deadline from the last progress: a worker that stopped pushing is noticed.
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(cfg.links.timeout_s));
    WaitFor(
        deadline, [&] { return progress() || finished(); },
        [&] { return me + ": waiting for gradients (a worker stopped)"; });
  }
  if (cfg.steps > 0) {
    total.sent /= cfg.steps;
    total.received /= cfg.steps;
  }
  return total;
}

}  // namespace pipetwin::exec
