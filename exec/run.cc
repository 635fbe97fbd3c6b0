#include "exec/run.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "exec/backend_registry.h"
#include "exec/engine.h"
#include "exec/mpi_util.h"
#include "job/report_builder.h"
#include "models/costs.h"
#include "models/model.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/stats.h"

namespace pipetwin::exec {
namespace {

// A collective on MPI_COMM_WORLD bounded by the timeout.
void WaitRequest(MPI_Request* req, double timeout_s, const std::string& what) {
  exec::WaitRequest(req, timeout_s, [&] { return what; });
}

double AllReduceMax(double v, double timeout_s, const char* what) {
  MPI_Request req;
  double out = 0;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

// Element-wise maximum over the world of a few values.
template <std::size_t N>
std::array<double, N> AllReduceMax(std::array<double, N> v, double timeout_s, const char* what) {
  MPI_Request req;
  std::array<double, N> out{};
  PT_MPI_CHECK(MPI_Iallreduce(v.data(), out.data(), static_cast<int>(N), MPI_DOUBLE, MPI_MAX,
                              MPI_COMM_WORLD, &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

double AllReduceSum(double v, double timeout_s, const char* what) {
  MPI_Request req;
  double out = 0;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
  WaitRequest(&req, timeout_s, what);
  return out;
}

void Barrier(double timeout_s, const char* what) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  WaitRequest(&req, timeout_s, what);
}

Expected<gpt::ModelConfig> CpuModel(const JobConfig& job, const models::ModelConfig& m,
                                    int micro_batch, std::uint64_t seed) {
  if (m.mlp != models::Mlp::kGelu || m.norm != models::Norm::kLayerNorm ||
      m.position != models::Position::kLearned) {
    return job.source.At(
        "model",
        "the CPU backend runs a GPT-style decoder (mlp: gelu, norm: layernorm, learned "
        "positions); this model has mlp " +
            std::string(models::ToString(m.mlp)) + ", norm " +
            std::string(models::ToString(m.norm)));
  }
  if (m.kv_heads != m.heads) {
    return job.source.At(
        "model.kv_heads",
        "the CPU backend has no grouped-query attention: kv_heads must equal heads");
  }
  gpt::ModelConfig c;
  c.layers = m.layers;
  c.hidden = m.hidden;
  c.ffn_hidden = m.ffn_hidden;
  c.heads = m.heads;
  c.vocab = m.vocab;
  c.seq_len = m.seq_len;
  c.micro_batch = micro_batch;
  c.seed = seed;
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
  PT_MPI_CHECK(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
  WaitRequest(&req, timeout_s, "gathering the timeline");
  std::vector<int> displs(static_cast<std::size_t>(world), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<std::int64_t> all(static_cast<std::size_t>(displs.back() + counts.back()));
  PT_MPI_CHECK(MPI_Igatherv(flat.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(),
                            MPI_INT64_T, 0, MPI_COMM_WORLD, &req));
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

}  // namespace

Expected<RunResult> RunJob(const ResolvedJob& job, const RunOptions& opts) {
  const JobConfig& cfg = job.config;
  const ExecutionConfig* exe = &cfg.execution;
  if (opts.interleave_calibration && (exe->steps < 2 || exe->steps % 2 != 0)) {
    return Error::Failure(job.path() + ": interleaved calibration needs an even number of steps " +
                          "(a calibration step before each measured step), got " +
                          std::to_string(exe->steps));
  }
  if (!BackendRegistered(opts.backend)) {
    std::string known;
    for (const std::string& n : RegisteredBackends()) known += (known.empty() ? "" : " or ") + n;
    return Error::BadInput("--backend: must be " + known + ", got '" + opts.backend + "'");
  }
  const ParallelConfig& par = cfg.parallel;
  if (par.cp > 1) {
    return cfg.source.At("parallel.cp",
                         "context parallelism (ring attention) is not in the CPU executor yet: use "
                         "cp: 1 with `run` (simulate models it)");
  }
  if (par.zero > 1) {
    return cfg.source.At("parallel.zero",
                         "ZeRO stages 2 and 3 are not in the executor yet: use zero: 0 or 1 with "
                         "`run` (simulate models all three)");
  }
  int world = 0;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (world != par.WorldSize()) {
    return Error::BadInput(
        job.path() + ": parallel: pp × dp × tp × cp = " + std::to_string(par.pp) + " × " +
        std::to_string(par.dp) + " × " + std::to_string(par.tp) + " × " + std::to_string(par.cp) +
        " = " + std::to_string(par.WorldSize()) + " ranks, but mpirun started " +
        std::to_string(world) + " (use mpirun -np " + std::to_string(par.WorldSize()) + ")");
  }
  // The model and training of the resolved job (the tiny preset for an abstract job).
  const models::ModelConfig* model = &cfg.model;
  const models::TrainingConfig& training = cfg.training;
  const int micro_batch = training.micro_batch;
  const bool adam = training.optimizer == models::Optimizer::kAdam;
  const float momentum = training.optimizer == models::Optimizer::kSgdMomentum ? 0.9f : 0.0f;
  const int* m = &job.microbatches;
  auto cpu_model = CpuModel(cfg, *model, micro_batch, exe->seed);
  if (!cpu_model) return cpu_model.error();
  const Schedule* sched = &job.schedule;
  auto layers = models::SplitLayers(*model, sched->num_stages);
  if (!layers) return layers.error();

  const models::RankLayout layout(par, cfg.cluster.rank_order);
  auto groups = Groups::Split(layout);
  const models::RankCoord me = groups->coord;
  BackendConfig bc;
  bc.model = *cpu_model;
  bc.layers_per_stage = *layers;
  bc.stage_to_rank = sched->stage_to_rank;
  bc.pp_rank = me.pp;
  bc.microbatches = *m;
  bc.dp = par.dp;
  bc.dp_rank = me.dp;
  bc.tp = gpt::TpConfig{.size = par.tp, .rank = me.tp, .sequence_parallel = par.sp};
  if (auto why = gpt::Validate(bc.model, gpt::ChunkSpec{0, bc.model.layers, true, true}, bc.tp)) {
    return cfg.source.At("model", *why);
  }
  bc.adam = adam;
  bc.momentum = momentum;
  bc.zero1 = par.zero == 1 && par.dp > 1;
  bc.learning_rate = static_cast<float>(exe->learning_rate);
  bc.data_seed = exe->seed;
  bc.timeout_s = exe->timeout_s;
  bc.pp_comm = groups->pp;
  bc.dp_comm = groups->dp;
  bc.tp_comm = groups->tp;
  bc.bf16 = training.precision != models::Precision::kFp32;
  bc.schedule = sched;
  bc.job = &job;
  auto made = MakeBackend(opts.backend, bc);
  if (!made) return made.error();
  std::unique_ptr<Backend> backend_owner = std::move(*made);
  Backend& backend = *backend_owner;

  EngineOptions eo;
  eo.timeout_s = exe->timeout_s;
  eo.recv_window = exe->recv_window;
  if (cfg.optimizer_sync) {
    // Megatron reduces the gradient norm over all ranks before the optimizer step.
    eo.before_optimizer = [&](Clock::time_point deadline) {
      const double local = backend.GradNormSquared();
      double total = 0;
      MPI_Request req;
      PT_MPI_CHECK(MPI_Iallreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
      exec::WaitRequest(&req, deadline, [] {
        return std::string("gradient-norm all-reduce before the optimizer step");
      });
    };
  }
  Engine engine(*sched, me.pp, WorldRank(), backend, eo);
  // One rank per core: spin a while in waits (exec/mpi_util.h); oversubscribed: back off.
  SetWaitSpin(world <= static_cast<int>(std::thread::hardware_concurrency())
                  ? std::chrono::milliseconds(2)
                  : std::chrono::milliseconds(0));

  RunResult res;
  res.root = WorldRank() == 0;
  const std::vector<int> my_stages = StagesOfRank(*sched, me.pp);
  const bool loss_rank =
      me.tp == 0 && sched->stage_to_rank[static_cast<std::size_t>(sched->num_stages - 1)] == me.pp;
  std::vector<std::vector<TimelineEvent>> measured, calibration;
  const int total_steps = exe->warmup + exe->steps;
  for (int step = 0; step < total_steps; ++step) {
    Barrier(exe->timeout_s, "barrier before a step");
    if (step == exe->warmup) backend.ResetPeakMemory();
    if (opts.fault.Is(TestFault::Kind::kHang, WorldRank()) && step == exe->warmup) {
      std::this_thread::sleep_for(std::chrono::hours(1));  // test hook: a rank that stalls
    }
    std::vector<TimelineEvent> events = engine.RunStep(step);
    backend.FinishStep(events);
    // The step's iteration time, as the report builder defines it: the makespan under
    // optimizer_sync, else the longest rank span.
    const RankStepStats mine_stats = SummarizeRank(events);
    const std::array<double, 2> step_max =
        AllReduceMax(std::array<double, 2>{static_cast<double>(mine_stats.last_end_ns) * 1e-6,
                                           static_cast<double>(mine_stats.span_ns()) * 1e-6},
                     exe->timeout_s, "step time");
    const double iteration_ms = cfg.optimizer_sync ? step_max[0] : step_max[1];
    const double loss =
        AllReduceSum(loss_rank ? backend.StepLoss() : 0.0, exe->timeout_s, "loss") / (*m * par.dp);
    res.losses.push_back(loss);
    if (opts.fault.Is(TestFault::Kind::kKill, WorldRank()) && step == exe->warmup) {
      std::raise(SIGKILL);  // test hook: a rank that dies mid-run
    }
    if (step == 0 && opts.check_reference) {
      // Test hook: gradients off by 1e-4 must fail the reference check.
      const float perturb = opts.fault.Is(TestFault::Kind::kPerturb, WorldRank()) ? 1.0001f : 1.0f;
      auto err = ReferenceError(bc, backend, my_stages, loss, perturb);
      if (!err) return err.error();
      res.max_relative_error = AllReduceMax(*err, exe->timeout_s, "reference check");
    }
    if (opts.interleave_calibration && step >= exe->warmup && (step - exe->warmup) % 2 == 0) {
      calibration.push_back(std::move(events));
    } else if (step >= exe->warmup) {
      res.step_ms.push_back(iteration_ms);
      measured.push_back(std::move(events));
    }
  }
  // The median step is the one reported and traced.
  const std::size_t median = UpperMedianIndex(res.step_ms);
  const std::vector<TimelineEvent>& mine = measured[median];
  res.timeline = GatherTimeline(mine, world, exe->timeout_s);
  if (opts.after_steps) {
    const auto& shown = opts.interleave_calibration ? calibration : measured;
    if (Status st = opts.after_steps({shown, backend, *groups, total_steps}); !st) {
      return st.error();
    }
  }

  // Per-rank numbers, gathered on rank 0, for the report builder.
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
                           MPI_COMM_WORLD, &req));
  WaitRequest(&req, exe->timeout_s, "gathering the report");
  if (!res.root) return res;

  StepRecord rec;
  rec.source = "run";
  rec.world_rows = true;
  for (int r = 0; r < world; ++r) {
    const std::int64_t* x = rows.data() + kFields * r;
    StepRecord::Row k;
    k.step.busy_ns = x[0];
    k.step.first_start_ns = x[1];
    k.step.last_end_ns = x[2];
    k.memory = models::RankMemory{MemoryBytes{x[4], x[5], x[6], x[7], x[8]}, x[3]};
    k.bytes = CommBytes{x[9], x[10], x[11], x[12]};
    rec.makespan_ns = std::max(rec.makespan_ns, k.step.last_end_ns);
    rec.rows.push_back(k);
  }
  res.report = BuildReport(job, rec);
  Measured facts;
  facts.steps_ms = res.step_ms;
  facts.losses = res.losses;
  facts.backend = opts.backend;
  facts.has_reference = opts.check_reference;
  facts.reference_max_relative_error = res.max_relative_error;
  res.report.measured = std::move(facts);
  return res;
}

}  // namespace pipetwin::exec
