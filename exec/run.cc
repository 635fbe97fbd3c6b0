#include "exec/run.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "exec/cpu_backend.h"
#include "exec/cuda/factory.h"
#include "exec/engine.h"
#include "exec/mpi_util.h"
#include "models/costs.h"
#include "models/model.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/build.h"
#include "schedule/yaml_fields.h"

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

Expected<cpu::ModelConfig> CpuModel(const JobSpec& job, const models::ModelConfig& m,
                                    int micro_batch, std::uint64_t seed) {
  YamlFields f{job.path};
  const YAML::Node at = job.root["model"] ? job.root["model"] : job.root;
  if (m.mlp != models::Mlp::kGelu || m.norm != models::Norm::kLayerNorm ||
      m.position != models::Position::kLearned) {
    return f.At(at, "model",
                "the CPU backend runs a GPT-style decoder (mlp: gelu, norm: layernorm, learned "
                "positions); this model has mlp " +
                    std::string(models::ToString(m.mlp)) + ", norm " +
                    std::string(models::ToString(m.norm)));
  }
  if (m.kv_heads != m.heads) {
    return f.At(at, "model.kv_heads",
                "the CPU backend has no grouped-query attention: kv_heads must equal heads");
  }
  cpu::ModelConfig c;
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

// Worst relative error (‖a − b‖ / ‖b‖ per tensor) of this rank's gradients against a
// single-process reference of the same model and data; also checks the step's mean loss.
// `perturb` scales this rank's gradients first (a test hook: 1.0001 must fail the check).
double ReferenceError(const cpu::ModelConfig& model, const Backend& backend,
                      const std::vector<int>& stages, int microbatches, int dp,
                      const cpu::TpConfig& tp, std::uint64_t seed, double measured_loss,
                      float perturb) {
  cpu::Accountant acc;
  cpu::Chunk ref(
      model,
      cpu::ChunkSpec{.first_layer = 0, .num_layers = model.layers, .first = true, .last = true},
      cpu::TpConfig{}, acc);
  ref.set_loss_scale(1.0f / static_cast<float>(microbatches * dp));
  cpu::SyntheticData data({.vocab = model.vocab,
                           .seq_len = model.seq_len,
                           .micro_batch = model.micro_batch,
                           .seed = seed,
                           .noise = 0.0f});
  std::vector<std::int32_t> tokens(data.tokens_per_microbatch()), labels(tokens.size());
  double loss = 0;
  for (int mb = 0; mb < microbatches * dp; ++mb) {
    data.Fill(0, mb, tokens, labels);
    loss += static_cast<double>(ref.Forward(mb, {.tokens = tokens, .labels = labels}));
    ref.Backward(mb, {}, {});
  }
  loss /= microbatches * dp;
  double worst = std::abs(measured_loss - loss) / std::max(std::abs(loss), 1e-30);
  for (int s : stages) {
    const cpu::ParamLayout& layout = backend.StageLayout(s);
    std::vector<float> grads = backend.StageGrads(s);
    for (float& g : grads) g *= perturb;
    std::vector<float> shard;
    for (const cpu::ParamInfo& p : layout.params) {
      const cpu::ParamInfo& rp = ref.layout().Find(p.name);
      shard.assign(static_cast<std::size_t>(p.size()), 0.0f);
      cpu::ShardFromFull(p, tp, ref.grads().data() + rp.offset, shard.data());
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < shard.size(); ++i) {
        const double a = static_cast<double>(grads[p.offset + i]);
        const double b = static_cast<double>(shard[i]);
        diff += (a - b) * (a - b);
        norm += b * b;
      }
      worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
    }
  }
  return worst;
}

}  // namespace

Expected<RunResult> RunJob(const JobSpec& job, const RunOptions& opts) {
  const ExecutionConfig* exe = &job.execution_config;
  if (opts.interleave_calibration && (exe->steps < 2 || exe->steps % 2 != 0)) {
    return Error::Failure(job.path + ": interleaved calibration needs an even number of steps " +
                          "(a calibration step before each measured step), got " +
                          std::to_string(exe->steps));
  }
  YamlFields f{job.path};
  if (opts.backend != "cpu" && opts.backend != "cuda") {
    return Error::BadInput("--backend: must be cpu or cuda, got '" + opts.backend + "'");
  }
  const ParallelConfig& par = job.parallel;
  if (par.cp > 1) {
    return f.At(job.root["parallel"]["cp"], "parallel.cp",
                "context parallelism (ring attention) is not in the CPU executor yet: use cp: 1 "
                "with `run` (simulate models it)");
  }
  if (par.zero > 1) {
    return f.At(job.root["parallel"]["zero"], "parallel.zero",
                "ZeRO stages 2 and 3 are not in the executor yet: use zero: 0 or 1 with `run` "
                "(simulate models all three)");
  }
  int world = 0;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (world != par.WorldSize()) {
    return Error::BadInput(job.path + ": parallel: pp × dp × tp × cp = " + std::to_string(par.pp) +
                           " × " + std::to_string(par.dp) + " × " + std::to_string(par.tp) + " × " +
                           std::to_string(par.cp) + " = " + std::to_string(par.WorldSize()) +
                           " ranks, but mpirun started " + std::to_string(world) +
                           " (use mpirun -np " + std::to_string(par.WorldSize()) + ")");
  }
  // Model and training: the same keys as the cost model; the tiny preset by default.
  YAML::Node model_node = job.root["model"];
  if (!model_node) model_node = YAML::Load("{preset: tiny}");
  auto model = models::ParseModelConfig(model_node, f);
  if (!model) return model.error();
  int micro_batch = 1;
  bool adam = true;
  float momentum = 0.0f;
  models::TrainingConfig training;
  if (job.root["training"]) {
    auto t = models::ParseTrainingConfig(job.root["training"], f);
    if (!t) return t.error();
    training = *t;
    micro_batch = t->micro_batch;
    adam = t->optimizer == models::Optimizer::kAdam;
    momentum = t->optimizer == models::Optimizer::kSgdMomentum ? 0.9f : 0.0f;
  }
  if (opts.backend == "cuda") {
    // What the CUDA backend runs: bf16 or fp32, every activation kept, unfused attention.
    if (training.precision == models::Precision::kFp16) {
      return f.At(job.root["training"]["precision"], "training.precision",
                  "the CUDA backend runs bf16 or fp32 (fp16 needs loss scaling, not built)");
    }
    if (training.recompute != models::Recompute::kNone) {
      return f.At(job.root["training"]["recompute"], "training.recompute",
                  "the CUDA backend keeps every activation: use recompute: none with `run`");
    }
    if (training.flash_attention) {
      return f.At(job.root["training"]["flash_attention"], "training.flash_attention",
                  "the CUDA backend's attention is unfused: use flash_attention: false");
    }
  }
  auto m = models::ResolveMicrobatches(job);
  if (!m) return m.error();
  auto cpu_model = CpuModel(job, *model, micro_batch, exe->seed);
  if (!cpu_model) return cpu_model.error();
  auto sched = BuildSchedule(job, *m);
  if (!sched) return sched.error();
  auto layers = models::SplitLayers(*model, sched->num_stages);
  if (!layers) return layers.error();

  const models::RankLayout layout(par);
  auto groups = Groups::Split(layout);
  const models::RankCoord me = groups->coord;
  CpuBackendConfig bc;
  bc.model = *cpu_model;
  bc.layers_per_stage = *layers;
  bc.stage_to_rank = sched->stage_to_rank;
  bc.pp_rank = me.pp;
  bc.microbatches = *m;
  bc.dp = par.dp;
  bc.dp_rank = me.dp;
  bc.tp = cpu::TpConfig{.size = par.tp, .rank = me.tp, .sequence_parallel = par.sp};
  if (auto why = cpu::Validate(bc.model, cpu::ChunkSpec{0, bc.model.layers, true, true}, bc.tp)) {
    return f.At(job.root["model"] ? job.root["model"] : job.root, "model", *why);
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
  std::unique_ptr<Backend> backend_owner;
  if (opts.backend == "cuda") {
    if (par.zero > 0) {
      return f.At(job.root["parallel"]["zero"], "parallel.zero",
                  "ZeRO is not in the CUDA backend yet: use zero: 0 with --backend cuda");
    }
    auto made = MakeCudaBackend(
        {.base = bc, .bf16 = training.precision != models::Precision::kFp32, .schedule = &*sched});
    if (!made) return made.error();
    backend_owner = std::move(*made);
  } else {
    backend_owner = std::make_unique<CpuBackend>(bc);
  }
  Backend& backend = *backend_owner;

  EngineOptions eo;
  eo.timeout_s = exe->timeout_s;
  eo.recv_window = exe->recv_window;
  if (job.optimizer_sync) {
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
    std::int64_t end = 0;
    for (const auto& e : events) end = std::max(end, e.end_ns);
    const double makespan =
        AllReduceMax(static_cast<double>(end) * 1e-6, exe->timeout_s, "step time");
    const double loss =
        AllReduceSum(loss_rank ? backend.StepLoss() : 0.0, exe->timeout_s, "loss") / (*m * par.dp);
    res.losses.push_back(loss);
    if (opts.fault.Is(TestFault::Kind::kKill, WorldRank()) && step == exe->warmup) {
      std::raise(SIGKILL);  // test hook: a rank that dies mid-run
    }
    if (step == 0 && opts.check_reference) {
      // Test hook: gradients off by 1e-4 must fail the reference check.
      const float perturb = opts.fault.Is(TestFault::Kind::kPerturb, WorldRank()) ? 1.0001f : 1.0f;
      const double err = ReferenceError(*cpu_model, backend, my_stages, *m, par.dp, bc.tp,
                                        exe->seed, loss, perturb);
      res.max_relative_error = AllReduceMax(err, exe->timeout_s, "reference check");
    }
    if (opts.interleave_calibration && step >= exe->warmup && (step - exe->warmup) % 2 == 0) {
      calibration.push_back(std::move(events));
    } else if (step >= exe->warmup) {
      res.step_ms.push_back(makespan);
      measured.push_back(std::move(events));
    }
  }
  // The median step is the one reported and traced.
  std::vector<std::size_t> order(res.step_ms.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return res.step_ms[a] < res.step_ms[b]; });
  const std::size_t median = order[order.size() / 2];
  const std::vector<TimelineEvent>& mine = measured[median];
  res.timeline = GatherTimeline(mine, world, exe->timeout_s);
  if (opts.after_steps) {
    auto* cpu_backend = dynamic_cast<CpuBackend*>(&backend);
    if (cpu_backend == nullptr) {
      return Error::Failure("this command needs the CPU backend's chunks (--backend cpu)");
    }
    const auto& shown = opts.interleave_calibration ? calibration : measured;
    if (Status st = opts.after_steps({shown, *cpu_backend, *groups, total_steps}); !st) {
      return st.error();
    }
  }

  // Per-rank numbers, gathered on rank 0.
  const MemoryBytes mem = backend.PeakMemory();
  std::int64_t busy_ns = 0, first = -1, last = 0;
  for (const auto& e : mine) {
    if (e.stream == Stream::kCompute) {
      busy_ns += e.end_ns - e.start_ns;
      if (first < 0) first = e.start_ns;
    }
    if (e.stream != Stream::kRecv) last = std::max(last, e.end_ns);
  }
  std::int64_t row[12] = {busy_ns,
                          std::max<std::int64_t>(first, 0),
                          last,
                          backend.PeakMemoryTotal(),
                          mem.params,
                          mem.grads,
                          mem.optimizer,
                          mem.activations,
                          mem.comm_buffers,
                          backend.BytesSent(0) / total_steps,
                          backend.BytesSent(1) / total_steps,
                          backend.BytesSent(2) / total_steps};
  std::vector<std::int64_t> rows(static_cast<std::size_t>(12 * world));
  MPI_Request req;
  PT_MPI_CHECK(
      MPI_Igather(row, 12, MPI_INT64_T, rows.data(), 12, MPI_INT64_T, 0, MPI_COMM_WORLD, &req));
  WaitRequest(&req, exe->timeout_s, "gathering the report");
  if (!res.root) return res;

  Report& rep = res.report;
  rep.source = "run";
  rep.schedule = job.schedule;
  rep.pp = par.pp;
  rep.microbatches = *m;
  rep.optimizer_sync = job.optimizer_sync;
  rep.iteration_time_ms = res.step_ms[median];
  rep.makespan_ms = rep.iteration_time_ms;
  double busy_total = 0;
  for (int r = 0; r < world; ++r) {
    const std::int64_t* x = rows.data() + 12 * r;
    RankReport k;
    k.rank = r;
    k.compute_busy_ms = static_cast<double>(x[0]) * 1e-6;
    k.span_ms = static_cast<double>(x[2] - x[1]) * 1e-6;
    k.bubble_fraction = 1.0 - k.compute_busy_ms / rep.iteration_time_ms;
    k.peak_memory_bytes = x[3];
    k.memory = MemoryBytes{x[4], x[5], x[6], x[7], x[8]};
    k.comm_bytes_sent = x[9] + x[10] + x[11];
    rep.comm.pp += x[9];
    rep.comm.dp += x[10];
    rep.comm.tp += x[11];
    busy_total += k.compute_busy_ms;
    rep.ranks.push_back(k);
  }
  rep.bubble_fraction = 1.0 - busy_total / (world * rep.iteration_time_ms);
  const double samples = static_cast<double>(*m) * par.dp * micro_batch;
  rep.throughput.samples_per_s = samples / (rep.iteration_time_ms * 1e-3);
  rep.throughput.tokens_per_s = rep.throughput.samples_per_s * model->seq_len;
  rep.extra["measured_steps_ms"] = res.step_ms;
  rep.extra["losses"] = res.losses;
  rep.extra["backend"] = opts.backend;
  if (opts.check_reference) rep.extra["reference_max_relative_error"] = res.max_relative_error;
  return res;
}

}  // namespace pipetwin::exec
