#include "exec/run.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "exec/backend_registry.h"
#include "exec/engine.h"
#include "exec/mpi_util.h"
#include "exec/param_server.h"
#include "exec/straggler_backend.h"
#include "job/report_builder.h"
#include "models/costs.h"
#include "models/cpu_inventory.h"
#include "models/model.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/quote.h"
#include "schedule/stats.h"
#include "schedule/suggest.h"

namespace pipetwin::exec {
namespace {

// Tag of a server's byte counts to world rank 0 on PsLinks::comm: the largest tag MPI
// guarantees (stage tags, 4 per stage, stay below it).
constexpr int kServerBytesTag = 32767;

// A collective on the job's ranks (JobComm) bounded by the timeout.
void WaitRequest(MPI_Request* req, double timeout_s, const std::string& what) {
  exec::WaitRequest(req, timeout_s, [&] { return what; });
}

double AllReduceMax(double v, double timeout_s, const char* what) {
  MPI_Request req;
  double out = 0;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, JobComm(), &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

// Element-wise maximum over the world of a few values.
template <std::size_t N>
std::array<double, N> AllReduceMax(std::array<double, N> v, double timeout_s, const char* what) {
  MPI_Request req;
  std::array<double, N> out{};
  PT_MPI_CHECK(MPI_Iallreduce(v.data(), out.data(), static_cast<int>(N), MPI_DOUBLE, MPI_MAX,
                              JobComm(), &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

double AllReduceSum(double v, double timeout_s, const char* what) {
  MPI_Request req;
  double out = 0;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, JobComm(), &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

// Element-wise MAX or SUM over the job's ranks of a vector of the same length on every rank.
std::vector<double> ReduceVector(const std::vector<double>& v, MPI_Op op, double timeout_s,
                                 const char* what) {
  std::vector<double> out(v.size());
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallreduce(v.data(), out.data(), static_cast<int>(v.size()), MPI_DOUBLE, op,
                              JobComm(), &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

std::int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Barrier(double timeout_s, const char* what) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Ibarrier(JobComm(), &req));
  WaitRequest(&req, timeout_s, what);
}

Expected<gpt::ModelConfig> CpuModel(const JobConfig& job, const models::ModelConfig& m,
                                    int micro_batch, std::uint64_t seed) {
  if (auto bad = models::ExecutorModelMismatch(m)) return job.source.At(bad->key, bad->message);
  gpt::ModelConfig c;
  c.layers = m.layers;
  c.hidden = m.hidden;
  c.ffn_hidden = m.ffn_hidden;
  c.heads = m.heads;
  c.vocab = m.vocab;
  c.seq_len = m.seq_len;
  c.micro_batch = micro_batch;
  c.seed = seed;
  // model.dropout: Megatron-LM's default probability, hidden and attention alike (the CUDA
  // backend refuses it).
  c.dropout = m.dropout ? models::kExecutorDropout : 0.0f;
  c.tied_embeddings = m.tied_embeddings;
  c.bias = m.bias;
  c.rms_norm = m.norm == models::Norm::kRmsNorm;
  c.rope = m.position == models::Position::kRope;
  c.swiglu = m.mlp == models::Mlp::kSwiglu;
  c.kv_heads = m.kv_heads;
  return c;
}

// Gathers every rank's events of one step on rank 0.
Timeline GatherTimeline(const std::vector<TimelineEvent>& mine, int world, double timeout_s) {
  constexpr int kFields = 8;
  std::vector<std::int64_t> flat;
  flat.reserve(mine.size() * kFields);
  for (const TimelineEvent& e : mine) {
    flat.insert(flat.end(),
                {e.action.stage, static_cast<std::int64_t>(e.action.kind), e.action.microbatch,
                 static_cast<std::int64_t>(e.stream), e.start_ns, e.end_ns, e.peer, e.bytes});
  }
  int n = static_cast<int>(flat.size());
  std::vector<int> counts(static_cast<std::size_t>(world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, JobComm(), &req));
  WaitRequest(&req, timeout_s, "gathering the timeline");
  std::vector<int> displs(static_cast<std::size_t>(world), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<std::int64_t> all(static_cast<std::size_t>(displs.back() + counts.back()));
  PT_MPI_CHECK(MPI_Igatherv(flat.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(),
                            MPI_INT64_T, 0, JobComm(), &req));
  WaitRequest(&req, timeout_s, "gathering the timeline");
  Timeline t;
  if (WorldRank() != 0) return t;
  t.events.resize(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    const auto* p = all.data() + displs[static_cast<std::size_t>(r)];
    for (int i = 0; i < counts[static_cast<std::size_t>(r)]; i += kFields) {
      TimelineEvent e;
      e.action = Action{static_cast<std::int32_t>(p[i]), static_cast<ActionKind>(p[i + 1]),
                        static_cast<std::int32_t>(p[i + 2])};
      e.stream = static_cast<Stream>(p[i + 3]);
      e.start_ns = p[i + 4];
      e.end_ns = p[i + 5];
      e.peer = static_cast<std::int32_t>(p[i + 6]);
      e.bytes = p[i + 7];
      t.events[static_cast<std::size_t>(r)].push_back(e);
    }
  }
  return t;
}

// What runs with parameter servers (exec/param_server.h).
Status CheckParameterServers(const ResolvedJob& job, const RunOptions& opts) {
  if (job.config.parallel.cp > 1) {
    // The servers group the pushes of a (stage, tp rank) by dp rank alone.
    return job.config.source.At("cluster.dp_reduction",
                                "parameter servers with context parallelism (parallel.cp > 1) "
                                "are not in the executor: use dp_reduction: ring");
  }
  if (opts.after_steps) {
    return job.config.source.At("cluster.dp_reduction",
                                "calibration does not run parameter servers: calibrate with "
                                "dp_reduction: ring");
  }
  if (opts.check_reference) {
    return Error::BadInput(job.path() +
                           ": --check-reference: with cluster.dp_reduction: parameter-server the "
                           "workers never hold the reduced gradients (the servers do); check "
                           "with dp_reduction: ring");
  }
  return OkStatus();
}

// A server rank's whole run: serve every step, then tell world rank 0 its bytes per step.
Status ServeParameters(const ResolvedJob& job, const RunOptions& opts, const PsWorld& ps) {
  const JobConfig& cfg = job.config;
  auto model = CpuModel(cfg, cfg.model, cfg.training.micro_batch, cfg.execution.seed);
  if (!model) return model.error();
  auto layers = models::SplitLayers(cfg.model, job.schedule.num_stages);
  if (!layers) return layers.error();
  ServerConfig sc;
  sc.links = ps.links();
  sc.server = ps.server();
  sc.steps = cfg.execution.warmup + cfg.execution.steps;
  sc.model = *model;
  sc.layers_per_stage = *layers;
  sc.stage_to_rank = job.schedule.stage_to_rank;
  sc.layout = models::RankLayout(job.parallel(), cfg.cluster.rank_order);
  sc.sequence_parallel = cfg.parallel.sp;
  sc.backend = opts.backend;
  sc.prompt_wakeups = opts.backend == "sleep";
  sc.dp_sync = cfg.training.dp_sync;
  sc.staleness = cfg.training.staleness;
  sc.optimizer = {cfg.training.optimizer == models::Optimizer::kAdam,
                  static_cast<float>(cfg.execution.learning_rate),
                  cfg.training.optimizer == models::Optimizer::kSgdMomentum ? 0.9f : 0.0f};
  auto bytes = RunParameterServer(sc);
  if (!bytes) return bytes.error();
  std::int64_t out[2] = {bytes->sent, bytes->received};
  MPI_Request req;
  PT_MPI_CHECK(MPI_Isend(out, 2, MPI_INT64_T, 0, kServerBytesTag, ps.links().comm, &req));
  WaitRequest(&req, cfg.execution.timeout_s, "parameter server's byte counts to rank 0");
  return OkStatus();
}

// Rank 0: every server's bytes per step.
std::vector<models::PsServerBytes> ServerBytes(const PsLinks& links) {
  std::vector<models::PsServerBytes> out;
  for (int i = 0; i < links.servers; ++i) {
    std::int64_t in[2] = {0, 0};
    MPI_Request req;
    PT_MPI_CHECK(
        MPI_Irecv(in, 2, MPI_INT64_T, links.first_server + i, kServerBytesTag, links.comm, &req));
    WaitRequest(&req, links.timeout_s, "byte counts of parameter server " + std::to_string(i));
    out.push_back({in[0], in[1]});
  }
  return out;
}

// Phase 1: what this executor can run, and the world mpirun started for it.
Status CheckRunnable(const ResolvedJob& job, const RunOptions& opts, int world, int servers) {
  const JobConfig& cfg = job.config;
  const ExecutionConfig& exe = cfg.execution;
  if (opts.interleave_calibration && (exe.steps < 2 || exe.steps % 2 != 0)) {
    return Error::Failure(job.path() + ": interleaved calibration needs an even number of steps " +
                          "(a calibration step before each measured step), got " +
                          std::to_string(exe.steps));
  }
  if (!(exe.timeout_s > 0)) {
    return Error::Failure(job.path() +
                          ": execution.timeout_s is not set (the caller sizes it from the "
                          "predicted step: SizeRunTimeout in sim/simulate.h)");
  }
  if (!BackendRegistered(opts.backend)) {
    std::vector<std::string> names = RegisteredBackends();
    if (!BackendRegistered("cuda")) names.emplace_back("cuda");  // pipetwin-cuda, handed over to
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : " or ") + n;
    const std::string guess = DidYouMean(opts.backend, names);
    return Error::BadInput("--backend: must be " + known + ", got " + Quoted(opts.backend) +
                           (guess.empty() ? "" : "; " + guess));
  }
  const ParallelConfig& par = cfg.parallel;
  if (par.cp > 1 && opts.backend != "cpu") {
    return cfg.source.At("parallel.cp",
                         "context parallelism (ring attention) runs on --backend "
                         "cpu only; --backend " +
                             opts.backend + " needs cp: 1 (simulate models cp on every device)");
  }
  if (cfg.has_model && cfg.model.tied_embeddings && par.pp > 1) {
    if (opts.backend != "cpu") {
      return cfg.source.At("model.tied_embeddings",
                           "tied embeddings over a pipeline (the first and last stages' "
                           "gradients summed) run on --backend cpu only; --backend " +
                               opts.backend + " needs tied_embeddings: false or pp: 1");
    }
    if (auto bad = models::ExecutorTiedMismatch(cfg.model, par, cfg.cluster)) {
      return cfg.source.At(bad->key, bad->message);
    }
  }
  if (cfg.training.precision == models::Precision::kFp8) {
    return cfg.source.At("training.precision",
                         "fp8 is simulated only (the executor's GEMMs are bf16 or fp32): use "
                         "bf16 with `run --backend cuda`, fp32 with --backend cpu");
  }
  if (opts.backend == "cpu") {
    if (auto bad = models::CpuExecutorTrainingMismatch(cfg.training)) {
      return cfg.source.At(bad->key, bad->message);
    }
  }
  if (cfg.training.master_weights != models::MasterWeights::kFp32) {
    return cfg.source.At("training.master_weights",
                         "remainders (Apex's 16-bit master-weight remainders) is simulated only: "
                         "the executor keeps a full fp32 master copy; use fp32 with `run`");
  }
  if (par.zero > 1) {
    return cfg.source.At("parallel.zero",
                         "ZeRO stages 2 and 3 are not in the executor yet: use zero: 0 or 1 with "
                         "`run` (simulate models all three)");
  }
  if (cfg.training.pipeline_engine != models::PipelineEngine::kMegatron) {
    return cfg.source.At("training.pipeline_engine",
                         "deepspeed (each send waits before the next action) is modelled by "
                         "simulate only; the executor sends as Megatron-LM does: use "
                         "pipeline_engine: megatron with `run`");
  }
  // A device's work runs behind the host's back: only the host backends slow a straggler.
  if (cfg.stragglers.any() && opts.backend != "cpu" && opts.backend != "sleep") {
    return cfg.source.At("execution.stragglers",
                         "only the sleep and cpu backends apply stragglers; --backend " +
                             opts.backend + " runs at the machine's speed");
  }
  if (opts.check_reference && opts.backend == "sleep") {
    return Error::BadInput(
        "--check-reference: --backend sleep computes no gradients to check "
        "(use --backend cpu)");
  }
  if (servers > 0) {
    if (Status s = CheckParameterServers(job, opts); !s) return s;
  }
  if (world != par.WorldSize() + servers) {
    const std::string ps = servers > 0 ? " + " + std::to_string(servers) +
                                             " parameter servers (cluster.parameter_servers)"
                                       : "";
    return Error::BadInput(job.path() +
                           ": parallel: pp × dp × tp × cp = " + std::to_string(par.pp) + " × " +
                           std::to_string(par.dp) + " × " + std::to_string(par.tp) + " × " +
                           std::to_string(par.cp) + " = " + std::to_string(par.WorldSize()) +
                           " ranks" + ps + ", but mpirun started " + std::to_string(world) +
                           " (use mpirun -np " + std::to_string(par.WorldSize() + servers) + ")");
  }
  return OkStatus();
}

// Phase 2: the backend's configuration for this rank: the resolved job's model and training
// (the tiny preset for an abstract job), its stage split and this rank's groups.
Expected<BackendConfig> ConfigureBackend(const ResolvedJob& job, const Groups& groups) {
  const JobConfig& cfg = job.config;
  const ExecutionConfig& exe = cfg.execution;
  const ParallelConfig& par = cfg.parallel;
  const models::TrainingConfig& training = cfg.training;
  auto cpu_model = CpuModel(cfg, cfg.model, training.micro_batch, exe.seed);
  if (!cpu_model) return cpu_model.error();
  auto layers = models::SplitLayers(cfg.model, job.schedule.num_stages);
  if (!layers) return layers.error();
  const models::RankCoord me = groups.coord;
  BackendConfig bc;
  bc.model = *cpu_model;
  bc.layers_per_stage = *layers;
  bc.stage_to_rank = job.schedule.stage_to_rank;
  bc.pp_rank = me.pp;
  bc.microbatches = job.microbatches;
  bc.dp = par.dp;
  bc.dp_rank = me.dp;
  bc.tp = gpt::TpConfig{.size = par.tp, .rank = me.tp, .sequence_parallel = par.sp};
  bc.cp = gpt::CpConfig{
      .size = par.cp,
      .rank = me.cp,
      .exchange = par.cp_comm == ParallelConfig::CpComm::kAllGather ? gpt::CpExchange::kAllGather
                  : par.cp_comm == ParallelConfig::CpComm::kP2P     ? gpt::CpExchange::kRing
                                                                    : gpt::CpExchange::kAllToAll,
      .a2a_size = par.cp_comm == ParallelConfig::CpComm::kAllToAllP2P ? par.cp_a2a : 0};
  if (auto why =
          gpt::Validate(bc.model, gpt::ChunkSpec{0, bc.model.layers, true, true}, bc.tp, bc.cp)) {
    return cfg.source.At(par.cp > 1 ? "parallel.cp" : "model", *why);
  }
  bc.recompute = training.recompute == models::Recompute::kFull        ? gpt::Recompute::kFull
                 : training.recompute == models::Recompute::kSelective ? gpt::Recompute::kSelective
                                                                       : gpt::Recompute::kNone;
  bc.grad_size = par.dp * par.cp;
  bc.grad_rank = me.dp * par.cp + me.cp;
  bc.adam = training.optimizer == models::Optimizer::kAdam;
  bc.momentum = training.optimizer == models::Optimizer::kSgdMomentum ? 0.9f : 0.0f;
  bc.zero1 = par.zero == 1 && bc.grad_size > 1;
  bc.learning_rate = static_cast<float>(exe.learning_rate);
  bc.data_seed = exe.seed;
  bc.timeout_s = exe.timeout_s;
  bc.threads = exe.threads;
  bc.pp_comm = groups.pp;
  bc.dp_comm = groups.dp;
  bc.tp_comm = groups.tp;
  bc.cp_comm = groups.cp;
  bc.grad_comm = groups.grad;
  bc.bf16 = training.precision != models::Precision::kFp32;
  bc.schedule = &job.schedule;
  bc.job = &job;
  return bc;
}

// Phase 3's engine options: the deadline, the receive window and, with optimizer_sync,
// Megatron's all-rank gradient-norm reduction before the optimizer step.
EngineOptions EngineOptionsFor(const JobConfig& cfg, Backend& backend) {
  EngineOptions eo;
  eo.timeout_s = cfg.execution.timeout_s;
  eo.recv_window = cfg.execution.recv_window;
  eo.reduce_after_backward = cfg.training.reduce_after_backward();
  if (cfg.optimizer_sync) {
    eo.before_optimizer = [&backend](Clock::time_point deadline) {
      const double local = backend.GradNormSquared();
      double total = 0;
      MPI_Request req;
      PT_MPI_CHECK(MPI_Iallreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, JobComm(), &req));
      exec::WaitRequest(&req, deadline, [] {
        return std::string("gradient-norm all-reduce before the optimizer step");
      });
    };
  }
  return eo;
}

// Phase 3: warm-up and measured (and interleaved calibration) steps; every rank's events of
// every kept step, the losses, the iteration times and the reference check.
struct Steps {
  std::vector<std::vector<TimelineEvent>> measured, calibration;
  PsStepTimes ps;  // with parameter servers: every step's start, end and staleness
};
Expected<Steps> RunSteps(const ResolvedJob& job, const RunOptions& opts, const BackendConfig& bc,
                         Backend& backend, Engine& engine, RunResult& res) {
  const JobConfig& cfg = job.config;
  const ExecutionConfig& exe = cfg.execution;
  const Schedule& s = job.schedule;
  const int pp_rank = bc.pp_rank;
  const std::vector<int> my_stages = StagesOfRank(s, pp_rank);
  const bool loss_rank =
      bc.tp.rank == 0 && s.stage_to_rank[static_cast<std::size_t>(s.num_stages - 1)] == pp_rank;
  const double samples = static_cast<double>(job.microbatches) * cfg.parallel.dp;
  Steps kept;
  const int total_steps = exe.warmup + exe.steps;
  // training.dp_sync async or stale: no barrier and no world-wide reduction between steps
  // (the parameter servers pace the workers); the step times and losses are reduced at the end.
  const bool free_running = cfg.training.dp_sync != models::DpSync::kSync;
  std::vector<double> local_ms, local_loss;
  for (int step = 0; step < total_steps; ++step) {
    if (!free_running || step == 0) Barrier(exe.timeout_s, "barrier before a step");
    const std::int64_t begin_ns = SteadyNs();
    const std::int64_t held = bc.ps ? bc.ps->updates_held() : step;
    if (step == exe.warmup) backend.ResetPeakMemory();
    if (opts.fault.Is(TestFault::Kind::kHang, WorldRank()) && step == exe.warmup) {
      std::this_thread::sleep_for(std::chrono::hours(1));  // test hook: a rank that stalls
    }
    std::vector<TimelineEvent> events = engine.RunStep(step);
    backend.FinishStep(events);
    if (bc.ps) kept.ps.Add(begin_ns, SteadyNs(), step - held);
    // The step's iteration time, as the report builder defines it: the makespan under
    // optimizer_sync, else the longest rank span.
    const RankStepStats mine = SummarizeRank(events);
    double iteration_ms = 0, loss = 0;
    if (free_running) {
      local_ms.push_back(static_cast<double>(mine.span_ns()) * 1e-6);
      local_loss.push_back(loss_rank ? backend.StepLoss() : 0.0);
    } else {
      const std::array<double, 2> step_max =
          AllReduceMax(std::array<double, 2>{static_cast<double>(mine.last_end_ns) * 1e-6,
                                             static_cast<double>(mine.span_ns()) * 1e-6},
                       exe.timeout_s, "step time");
      iteration_ms = cfg.optimizer_sync ? step_max[0] : step_max[1];
      loss = AllReduceSum(loss_rank ? backend.StepLoss() : 0.0, exe.timeout_s, "loss") / samples;
      res.losses.push_back(loss);
    }
    if (opts.fault.Is(TestFault::Kind::kKill, WorldRank()) && step == exe.warmup) {
      std::raise(SIGKILL);  // test hook: a rank that dies mid-run
    }
    if (step == 0 && opts.check_reference) {
      // Test hook: gradients off by 1e-4 must fail the reference check.
      const float perturb = opts.fault.Is(TestFault::Kind::kPerturb, WorldRank()) ? 1.0001f : 1.0f;
      auto err = ReferenceError(bc, backend, my_stages, loss, perturb);
      if (!err) return err.error();
      res.max_relative_error = AllReduceMax(*err, exe.timeout_s, "reference check");
    }
    if (opts.interleave_calibration && step >= exe.warmup && (step - exe.warmup) % 2 == 0) {
      kept.calibration.push_back(std::move(events));
    } else if (step >= exe.warmup) {
      res.step_ms.push_back(iteration_ms);
      kept.measured.push_back(std::move(events));
    }
  }
  if (free_running) {
    // Step k's loss: every worker's own step k; its time: the longest rank span of step k.
    res.losses = ReduceVector(local_loss, MPI_SUM, exe.timeout_s, "losses");
    for (double& x : res.losses) x /= samples;
    const std::vector<double> ms = ReduceVector(local_ms, MPI_MAX, exe.timeout_s, "step times");
    res.step_ms.assign(ms.begin() + exe.warmup, ms.end());
  }
  return kept;
}

// Phase 4: every rank's numbers of the reported step, gathered on rank 0 as the report
// builder's record (world-rank rows: busy time and span, memory, bytes by group per step).
std::optional<StepRecord> GatherStepRecord(const std::vector<TimelineEvent>& mine,
                                           const Backend& backend, int world, int total_steps,
                                           double timeout_s) {
  const MemoryBytes mem = backend.PeakMemory();
  const RankStepStats st = SummarizeRank(mine);
  constexpr int kFields = 13;
  std::int64_t row[kFields] = {st.busy_ns,
                               st.first_start_ns,
                               st.last_end_ns,
                               backend.PeakMemoryTotal(),
                               mem.params,
                               mem.grads,
                               mem.optimizer,
                               mem.activations,
                               mem.comm_buffers,
                               backend.BytesSent(CommGroup::kPp) / total_steps,
                               backend.BytesSent(CommGroup::kDp) / total_steps,
                               backend.BytesSent(CommGroup::kTp) / total_steps,
                               backend.BytesSent(CommGroup::kCp) / total_steps};
  std::vector<std::int64_t> rows(static_cast<std::size_t>(kFields * world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Igather(row, kFields, MPI_INT64_T, rows.data(), kFields, MPI_INT64_T, 0,
                           JobComm(), &req));
  WaitRequest(&req, timeout_s, "gathering the report");
  if (WorldRank() != 0) return std::nullopt;
  StepRecord rec;
  rec.source = "run";
  rec.world_rows = true;
  for (int r = 0; r < world; ++r) {
    const std::int64_t* x = rows.data() + kFields * r;
    StepRecord::Row k;
    k.step.busy_ns = x[0];
    k.step.first_start_ns = x[1];
    k.step.last_end_ns = x[2];
    // A backend that computes nothing (sleep) measures no memory: the report takes the model's.
    if (backend.Computes()) {
      k.memory = models::RankMemory{MemoryBytes{x[4], x[5], x[6], x[7], x[8]}, x[3]};
    }
    k.bytes = CommBytes{x[9], x[10], x[11], x[12]};
    rec.makespan_ns = std::max(rec.makespan_ns, k.step.last_end_ns);
    rec.rows.push_back(k);
  }
  return rec;
}

}  // namespace

Expected<RunResult> RunJob(const ResolvedJob& job, const RunOptions& opts) {
  const ExecutionConfig& exe = job.config.execution;
  int world = 0;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  const int servers = models::ParameterServerRanks(job.config.cluster, job.parallel());
  // Every process makes these checks alike, before any other communication: they agree.
  if (Status s = AgreeAcrossWorld(CheckRunnable(job, opts, world, servers)); !s) {
    return s.error();
  }
  // The CUDA executor holds and reduces gradients in the compute precision; the prediction
  // holds them in the reduction's element type (models/README.md, "Model state").
  if (opts.backend == "cuda" && WorldRank() == 0 && job.config.training.mixed_precision() &&
      job.config.training.grad_reduce_dtype == models::GradReduceDtype::kFp32) {
    std::fprintf(stderr,
                 "note: the CUDA executor holds and reduces gradients in %s; the prediction "
                 "counts them in fp32 (training.grad_reduce_dtype: fp32, the default): state "
                 "grad_reduce_dtype: bf16 to compare memory like for like\n",
                 std::string(models::ToString(job.config.training.precision)).c_str());
  }
  // With parameter servers the last `servers` world ranks serve; the rest run the job.
  const PsWorld ps(job.parallel().WorldSize(), servers, exe.timeout_s);
  if (ps.is_server()) {
    if (Status s = ServeParameters(job, opts, ps); !s) return s.error();
    return RunResult{};
  }
  world = job.parallel().WorldSize();
  auto groups = Groups::Split(models::RankLayout(job.parallel(), job.config.cluster.rank_order));
  auto bc = ConfigureBackend(job, *groups);
  std::unique_ptr<PsClient> ps_client;
  Expected<std::unique_ptr<Backend>> made = Error::Failure("no backend configured");
  if (bc) {
    bc->compute_ms = opts.compute_ms;
    bc->test_cp_unmasked = opts.fault.Is(TestFault::Kind::kCpMask, WorldRank());
    if (ps.links().enabled()) {
      ps_client = std::make_unique<PsClient>(ps.links());
      bc->ps = ps_client.get();
    }
    made = MakeBackend(opts.backend, *bc);
  }
  // What the backend refuses (the model, the sleep backend's costs) is the same on every rank
  // of the job: they agree, before the first step.
  const Status configured = !bc ? Status(bc.error()) : !made ? Status(made.error()) : OkStatus();
  if (Status s = AgreeAcross(JobComm(), configured); !s) return s.error();
  std::unique_ptr<Backend> backend = std::move(*made);
  if (job.config.stragglers.any() && backend->Computes()) {
    // The CPU backend computes on the host: a slow rank sleeps after each action
    // (exec/straggler_backend.h); the sleep backend slows itself (CheckRunnable refuses the rest).
    backend = WrapStragglers(std::move(backend), job.config.stragglers, WorldRank());
  }
  Engine engine(job.schedule, bc->pp_rank, WorldRank(), *backend,
                EngineOptionsFor(job.config, *backend));
  // One rank per core: spin a while in waits (exec/mpi_util.h); oversubscribed: back off.
  // A backend that only sleeps (real-time priority, exec/sleep/) never spins.
  SetWaitSpin(world <= static_cast<int>(std::thread::hardware_concurrency()) && backend->Computes()
                  ? std::chrono::milliseconds(2)
                  : std::chrono::milliseconds(0));

  RunResult res;
  res.root = WorldRank() == 0;
  auto steps = RunSteps(job, opts, *bc, *backend, engine, res);
  if (!steps) return steps.error();
  // The median step is the one reported and traced.
  const std::vector<TimelineEvent>& mine = steps->measured[UpperMedianIndex(res.step_ms)];
  res.timeline = GatherTimeline(mine, world, exe.timeout_s);
  const int total_steps = exe.warmup + exe.steps;
  if (opts.after_steps) {
    const auto& shown = opts.interleave_calibration ? steps->calibration : steps->measured;
    if (Status st = opts.after_steps({shown, *backend, *groups, total_steps}); !st) {
      return st.error();
    }
  }
  std::optional<DpSyncReport> dp_sync;
  if (ps_client) dp_sync = GatherDpSync(job, steps->ps, exe.timeout_s);  // collective
  auto rec = GatherStepRecord(mine, *backend, world, total_steps, exe.timeout_s);
  if (!rec) return res;  // not rank 0
  if (ps.links().enabled()) rec->servers = ServerBytes(ps.links());
  rec->dp_sync = std::move(dp_sync);
  res.report = BuildReport(job, *rec);
  res.report.measured =
      Measured{res.step_ms, res.losses, opts.backend, opts.check_reference, res.max_relative_error};
  return res;
}

}  // namespace pipetwin::exec
