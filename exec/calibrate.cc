#include "exec/calibrate.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "exec/backend.h"
#include "exec/mpi_util.h"
#include "exec/run.h"
#include "models/comm.h"
#include "models/costs.h"
#include "models/training.h"
#include "schedule/build.h"
#include "schedule/stats.h"

namespace pipetwin::exec {
namespace {

double Ms(std::int64_t ns) { return static_cast<double>(ns) * 1e-6; }

// Per stage, what calibrate reports; -1 where this rank has no sample.
enum Field { kF, kI, kW, kB, kOpt, kTransferBytes, kDpMs, kDpBytes, kDpBenchMs, kNumFields };

int FieldOf(ActionKind k) {
  switch (k) {
    case ActionKind::kForward:
      return kF;
    case ActionKind::kBackwardInput:
      return kI;
    case ActionKind::kBackwardWeight:
      return kW;
    case ActionKind::kBackward:
      return kB;
    case ActionKind::kOptimizer:
      return kOpt;
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
    case ActionKind::kReduceGrad:
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kWaitReduceGrad:
      break;
  }
  return -1;
}

// Scalars, reduced with MAX over the world (-1 where a rank has none).
enum Scalar { kOverhead, kStepStart, kSync, kLatency, kBandwidth, kNumScalars };

double Now() { return MPI_Wtime(); }

// Median one-way time (ms) of a ping-pong of `bytes` between pp ranks a and b of `comm`.
double PingPong(MPI_Comm comm, int a, int b, std::int64_t bytes, int reps) {
  int me = 0;
  PT_MPI_CHECK(MPI_Comm_rank(comm, &me));
  std::vector<char> buf(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)));
  const int n = static_cast<int>(bytes);
  std::vector<double> t;
  for (int i = 0; i < reps + 3; ++i) {
    const double s = Now();
    if (me == a) {
      PT_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, b, 77, comm));
      PT_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, b, 78, comm, MPI_STATUS_IGNORE));
    } else if (me == b) {
      PT_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, a, 77, comm, MPI_STATUS_IGNORE));
      PT_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, a, 78, comm));
    }
    if (i >= 3) t.push_back((Now() - s) * 1e3 / 2.0);
  }
  return Median(t);
}

std::string Num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// What calibration measures on this rank, then reduced over the world (the slowest replica).
struct Measurements {
  int num_stages = 0;
  std::vector<double> stage;  // [stage][Field], -1 where not measured
  std::array<double, kNumScalars> scalar{};
  std::vector<std::pair<std::int64_t, double>> p2p_samples;  // (bytes, one-way ms), root only
  std::vector<double> jitter;        // [calibration step][pipeline rank] speed factors
  std::vector<double> step_sum;      // this rank's compute time of each calibration step
  bool computes = true;              // the backend computes (the sleep backend only sleeps)
  std::optional<Roofline> roofline;  // root only, where the backend has one
  explicit Measurements(int stages)
      : num_stages(stages), stage(static_cast<std::size_t>(stages * kNumFields), -1.0) {
    scalar.fill(-1.0);
  }
  double& at(int s, int f) { return stage[static_cast<std::size_t>(s * kNumFields + f)]; }
};

// 1. Compute actions and the engine's overhead, from every calibration step.
void MeasureActions(const RunHookContext& ctx, Measurements& m) {
  auto at = [&](int s, int f) -> double& { return m.at(s, f); };
  auto& scalar = m.scalar;
  std::map<std::pair<int, int>, std::vector<double>> samples;
  std::vector<double> overhead, step_start;
  for (const auto& events : ctx.steps) {
    if (!events.empty()) step_start.push_back(Ms(events.front().start_ns));
    std::int64_t prev_end = -1, recv_ns = 0;
    for (const TimelineEvent& e : events) {
      if (e.stream == Stream::kRecv) recv_ns += e.end_ns - e.start_ns;
      if (e.stream != Stream::kCompute) continue;
      samples[{e.action.stage, FieldOf(e.action.kind)}].push_back(Ms(e.end_ns - e.start_ns));
      // The first optimizer step waits for the reductions and the all-rank sync: no
      // overhead sample there.
      if (prev_end >= 0 && e.action.kind != ActionKind::kOptimizer) {
        overhead.push_back(Ms(e.start_ns - prev_end - recv_ns));
      }
      prev_end = e.end_ns;
      recv_ns = 0;
    }
  }
  for (const auto& [key, v] : samples) at(key.first, key.second) = Median(v);
  scalar[kOverhead] = std::max(0.0, Median(overhead));
  // Each step's compute time over what the medians add up to: how fast this rank ran in
  // that step (a shared machine's cores change speed from one step to the next).
  std::vector<double>& step_sum = m.step_sum;
  step_sum.assign(ctx.steps.size(), 0.0);
  for (std::size_t t = 0; t < ctx.steps.size(); ++t) {
    for (const TimelineEvent& e : ctx.steps[t]) {
      if (e.stream == Stream::kCompute) step_sum[t] += Ms(e.end_ns - e.start_ns);
    }
  }
  scalar[kStepStart] = Median(step_start);
}

// The size of one pipeline transfer: every transfer of a rank has the same shape.
void MeasureTransferSize(const RunHookContext& ctx, const std::vector<Action>& prog,
                         const std::vector<int>& mine, Measurements& m) {
  int sends = 0;
  for (const Action& a : prog) {
    sends += a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB ? 1 : 0;
  }
  if (sends > 0) {
    const double bytes = static_cast<double>(ctx.backend.BytesSent(CommGroup::kPp)) /
                         (static_cast<double>(ctx.total_steps) * sends);
    for (int s : mine) m.at(s, kTransferBytes) = bytes;
  }
}

// 3. The data-parallel reduction of each stage's gradients, benchmarked and as the steps ran it.
void MeasureDpReduction(const RunHookContext& ctx, const std::vector<int>& mine, int reps,
                        double timeout_s, Measurements& m) {
  auto at = [&](int s, int f) -> double& { return m.at(s, f); };
  // The benchmark reduces as the backend does (Backend::DescribeReduceGrad; the CPU backend's:
  // in place; a reduce-scatter of the padded gradients under ZeRO-1) and polls as the engine
  // polls (WaitRequest): a nonblocking collective progresses only when tested, so a blocking
  // benchmark would time another thing.
  // The gradient group: dp × cp ranks (the DP group when cp is 1).
  int dp = 1;
  PT_MPI_CHECK(MPI_Comm_size(ctx.groups.grad, &dp));
  for (int s : mine) {
    if (dp <= 1) {
      at(s, kDpMs) = 0;
      at(s, kDpBytes) = 0;
      continue;
    }
    const GradReduction red = *ctx.backend.DescribeReduceGrad(s);
    std::vector<float> g(red.elements, 1.0f);
    std::vector<double> t;
    for (int i = 0; i < reps + 3; ++i) {
      PT_MPI_CHECK(MPI_Barrier(ctx.groups.grad));
      const double st = Now();
      MPI_Request req;
      if (red.reduce_scatter) {
        PT_MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, g.data(),
                                               static_cast<int>(red.elements) / dp, MPI_FLOAT,
                                               MPI_SUM, ctx.groups.grad, &req));
      } else {
        PT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, g.data(), static_cast<int>(red.elements),
                                    MPI_FLOAT, MPI_SUM, ctx.groups.grad, &req));
      }
      WaitRequest(&req, timeout_s, [] { return std::string("calibrating the DP reduction"); });
      if (i >= 3) t.push_back((Now() - st) * 1e3);
    }
    at(s, kDpBenchMs) = Median(t);
    // The bytes of the stage's data-parallel traffic in a step: the reduction and, under
    // ZeRO-1 (a reduce-scatter), the all-gather of the padded parameters after OPT, as the
    // backend counts them (the simulator books a step's DP bytes on REDUCE_GRAD).
    const std::int64_t gather =
        red.reduce_scatter ? models::RingBytesSentPerRank(
                                 models::Collective::kAllGather,
                                 static_cast<std::int64_t>(red.elements * sizeof(float)), dp)
                           : 0;
    at(s, kDpBytes) = static_cast<double>(red.bytes_sent + gather);
  }
  // What the profile uses is the reduction as the steps ran it: from the last replica's
  // start to the last replica's end (the replicas' imbalance is in the jitter below), with
  // the caches and the polling of a real step; the benchmark above is reported beside it.
  if (dp > 1) {
    const std::size_t nm = mine.size();
    std::vector<double> se(ctx.steps.size() * nm * 2, -1.0);
    for (std::size_t t = 0; t < ctx.steps.size(); ++t) {
      for (const TimelineEvent& e : ctx.steps[t]) {
        if (e.stream != Stream::kCollective || e.action.kind != ActionKind::kReduceGrad) continue;
        const auto j = static_cast<std::size_t>(
            std::find(mine.begin(), mine.end(), e.action.stage) - mine.begin());
        if (j >= nm) continue;
        se[(t * nm + j) * 2] = Ms(e.start_ns);
        se[(t * nm + j) * 2 + 1] = Ms(e.end_ns);
      }
    }
    PT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, se.data(), static_cast<int>(se.size()), MPI_DOUBLE,
                               MPI_MAX, ctx.groups.grad));
    for (std::size_t j = 0; j < nm; ++j) {
      std::vector<double> d;
      for (std::size_t t = 0; t < ctx.steps.size(); ++t) {
        const double a = se[(t * nm + j) * 2], b = se[(t * nm + j) * 2 + 1];
        if (a >= 0 && b >= a) d.push_back(b - a);
      }
      at(mine[j], kDpMs) = d.empty() ? at(mine[j], kDpBenchMs) : Median(d);
    }
  }
}

// 2. Ping-pong between pipeline neighbours, at sizes around the real transfer, fitted to
//    latency + bytes / bandwidth.
void MeasureP2p(const RunHookContext& ctx, int reps, Measurements& m) {
  auto at = [&](int s, int f) -> double& { return m.at(s, f); };
  auto& scalar = m.scalar;
  auto& p2p_samples = m.p2p_samples;
  const int num_stages = m.num_stages;
  double transfer = -1;
  for (int s = 0; s < num_stages; ++s) transfer = std::max(transfer, at(s, kTransferBytes));
  PT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &transfer, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  int pp = 1;
  PT_MPI_CHECK(MPI_Comm_size(ctx.groups.pp, &pp));
  if (pp > 1 && transfer > 0) {
    const auto t = static_cast<std::int64_t>(transfer);
    const std::vector<std::int64_t> sizes = {8, std::max<std::int64_t>(t / 4, 16), t, 4 * t};
    std::vector<double> xs, ys;
    for (int k = 0; k + 1 < pp; ++k) {
      for (std::int64_t b : sizes) {
        PT_MPI_CHECK(MPI_Barrier(ctx.groups.pp));
        const double ms = PingPong(ctx.groups.pp, k, k + 1, b, reps);
        if (k == 0) {
          xs.push_back(static_cast<double>(b));
          ys.push_back(ms);
        }
      }
    }
    if (WorldRank() == 0) {
      // Least squares: time = latency + bytes / bandwidth.
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      const double n = static_cast<double>(xs.size());
      for (std::size_t i = 0; i < xs.size(); ++i) {
        sx += xs[i];
        sy += ys[i];
        sxx += xs[i] * xs[i];
        sxy += xs[i] * ys[i];
        p2p_samples.emplace_back(static_cast<std::int64_t>(xs[i]), ys[i]);
      }
      const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
      const double icept = (sy - slope * sx) / n;
      scalar[kLatency] = std::max(0.0, icept);
      scalar[kBandwidth] = slope > 0 ? 1.0 / slope : 1e12;
    }
  }
}

// 4. What the engine does before the optimizer step with optimizer_sync (exec/run.cc): this
//    rank's squared gradient norm, all-reduced over every rank.
void MeasureSync(const RunHookContext& ctx, int reps, double timeout_s, bool optimizer_sync,
                 Measurements& m) {
  {
    std::vector<double> t;
    for (int i = 0; i < reps + 3; ++i) {
      PT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      const double st = Now();
      const double local = ctx.backend.GradNormSquared();
      double total = 0;
      MPI_Request req;
      PT_MPI_CHECK(MPI_Iallreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
      WaitRequest(&req, timeout_s, [] { return std::string("calibrating the gradient norm"); });
      if (i >= 3) t.push_back((Now() - st) * 1e3);
    }
    m.scalar[kSync] = optimizer_sync ? Median(t) : 0.0;
  }
}

// The slowest replica of each stage and of each scalar; each calibration step's speed factor
// of every pipeline rank.
void ReduceOverRanks(const RunHookContext& ctx, int pp_rank, Measurements& m) {
  auto at = [&](int s, int f) -> double& { return m.at(s, f); };
  auto& stage = m.stage;
  auto& scalar = m.scalar;
  auto& jitter = m.jitter;
  const std::vector<double>& step_sum = m.step_sum;
  int pp = 1;
  PT_MPI_CHECK(MPI_Comm_size(ctx.groups.pp, &pp));
  PT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, stage.data(), static_cast<int>(stage.size()), MPI_DOUBLE,
                             MPI_MAX, MPI_COMM_WORLD));
  // Per step, a pipeline rank's speed factor against the profile's medians (the slowest
  // replica's): this rank's step time over the profile's sum for the same actions; the
  // slowest replica of the pipeline rank gates it.
  jitter.assign(ctx.steps.size() * static_cast<std::size_t>(pp), 0.0);
  for (std::size_t t = 0; t < ctx.steps.size(); ++t) {
    double profile_sum = 0;
    for (const TimelineEvent& e : ctx.steps[t]) {
      if (e.stream == Stream::kCompute) profile_sum += at(e.action.stage, FieldOf(e.action.kind));
    }
    if (profile_sum > 0) {
      jitter[t * static_cast<std::size_t>(pp) + static_cast<std::size_t>(pp_rank)] =
          step_sum[t] / profile_sum;
    }
  }
  PT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, jitter.data(), static_cast<int>(jitter.size()),
                             MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  PT_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, scalar.data(), kNumScalars, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
}

// The profile's text (sim/profile.h documents the format).
std::string ProfileYaml(const ResolvedJob& job, const CalibrateOptions& opts, int steps, int warmup,
                        int reps, Measurements& m) {
  const int num_stages = m.num_stages;
  const auto& stage = m.stage;
  const auto& scalar = m.scalar;
  const auto& p2p_samples = m.p2p_samples;
  const auto& jitter = m.jitter;
  const ParallelConfig& par = job.parallel();
  // Each measured compute kind's rate: the cost model's FLOPs of one rank (models/costs.h)
  // over the median, where the job names a model and the backend computes.
  const bool rates = job.model_costs.has_value() && m.computes &&
                     static_cast<int>(job.model_costs->stages.size()) == num_stages;
  std::ostringstream y;
  y << "# pipetwin calibration profile, measured by `pipetwin calibrate --backend " << opts.backend
    << "`.\n"
    << "# Read by `pipetwin simulate JOB --profile THIS` (sim/profile.h documents the keys).\n"
    << "# Times in ms: medians over " << steps << " calibration steps after " << warmup
    << " warm-up steps (actions), or over " << reps << " repetitions (links, collectives).\n"
    << (opts.interleaved ? "# The calibration steps alternated with as many measured steps in "
                           "one run (`pipetwin run --calibrate`).\n"
                         : "")
    << "version: 1\n"
    << "backend: " << opts.backend << "\n"
    << "job: \"" << job.path() << "\"\n"
    << "schedule: \"" << job.config.schedule << "\"\n"
    << "microbatches: " << job.microbatches << "\n"
    << "parallel: {pp: " << par.pp << ", dp: " << par.dp << ", tp: " << par.tp << ", cp: " << par.cp
    << ", sp: " << (par.sp ? "true" : "false") << "}\n"
    << "recompute: " << models::ToString(job.config.training.recompute)
    << "   # training.recompute: backward_input_ms includes the recomputed forward\n"
    << (rates ? "# stages[].*_gflops: the cost model's FLOPs of one rank of the stage (its TP x CP "
                "group) in one\n# microbatch's action over the action's median, in GFLOP/s.\n"
              : "")
    << "stages:\n";
  const char* names[kNumFields] = {"forward_ms",   "backward_input_ms", "backward_weight_ms",
                                   "backward_ms",  "optimizer_ms",      "transfer_bytes",
                                   "dp_reduce_ms", "dp_reduce_bytes",   "(dp_allreduce)"};
  const char* rate_names[] = {"forward_gflops", "backward_input_gflops", "backward_weight_gflops",
                              "backward_gflops"};
  for (int s = 0; s < num_stages; ++s) {
    y << "  - {stage: " << s;
    for (int f = 0; f < kNumFields; ++f) {
      const double v = stage[static_cast<std::size_t>(s * kNumFields + f)];
      if (v < 0 || f == kDpBenchMs) continue;  // not run on this stage by this schedule
      y << ", " << names[f] << ": "
        << (f == kTransferBytes || f == kDpBytes ? std::to_string(static_cast<std::int64_t>(v))
                                                 : Num(v));
    }
    if (rates) {
      const models::StageCost& c = job.model_costs->stages[static_cast<std::size_t>(s)];
      const double flops[] = {c.forward_flops, c.backward_input_flops, c.backward_weight_flops,
                              c.backward_input_flops + c.backward_weight_flops};
      for (int f = kF; f <= kB; ++f) {
        const double ms = stage[static_cast<std::size_t>(s * kNumFields + f)];
        if (ms <= 0 || flops[f] <= 0) continue;
        y << ", " << rate_names[f] << ": " << Num(flops[f] / (ms * 1e6));
      }
    }
    y << "}\n";
  }
  y << "engine:\n"
    << "  action_overhead_ms: " << Num(scalar[kOverhead])
    << "   # compute thread between compute actions, outside receives\n"
    << "  step_start_ms: " << Num(std::max(0.0, scalar[kStepStart]))
    << "   # from a step's start to its first action\n"
    << "sync_ms: " << Num(scalar[kSync])
    << "   # before the optimizer: local gradient norm, all-reduced over all ranks\n";
  if (m.roofline) {
    y << "# One core, one thread, over its CPU time, after the steps: a 512 x 512 x 2048 fp32 "
         "GEMM\n"
      << "# through the backend's GEMM, and a triad over 64 MiB (best of 3 each).\n"
      << "roofline: {gemm_gflops: " << Num(m.roofline->gemm_gflops)
      << ", memory_gb_s: " << Num(m.roofline->memory_gb_s) << "}\n";
  }
  if (scalar[kLatency] >= 0) {
    y << "p2p:\n"
      << "  latency_ms: " << Num(scalar[kLatency]) << "\n"
      << "  bandwidth_bytes_per_ms: " << Num(scalar[kBandwidth]) << "\n"
      << "  samples:   # one-way time of a ping-pong between pipeline ranks 0 and 1\n";
    for (const auto& [b, ms] : p2p_samples) {
      y << "    - {bytes: " << b << ", ms: " << Num(ms) << "}\n";
    }
  }
  if (par.dp * par.cp > 1) {
    y << "dp_allreduce:   # a benchmark of each stage's gradient reduction alone, in a DP group\n"
      << "                # of group_size ranks (stages[].dp_reduce_ms: as the steps ran it)\n";
    for (int s = 0; s < num_stages; ++s) {
      const double ms = stage[static_cast<std::size_t>(s * kNumFields + kDpBenchMs)];
      const double by = stage[static_cast<std::size_t>(s * kNumFields + kDpBytes)];
      y << "  - {group_size: " << par.dp * par.cp << ", stage: " << s
        << ", bytes_sent: " << static_cast<std::int64_t>(by) << ", ms: " << Num(ms) << "}\n";
    }
  }
  if (!jitter.empty()) {
    const std::size_t pp = static_cast<std::size_t>(par.pp);
    y << "jitter:   # per calibration step: each pipeline rank's compute time over the medians'\n"
      << "          # (its slowest replica); simulate plays each step and reports the median\n";
    for (std::size_t t = 0; t + pp <= jitter.size(); t += pp) {
      y << "  - [";
      for (std::size_t r = 0; r < pp; ++r) y << (r > 0 ? ", " : "") << Num(jitter[t + r]);
      y << "]\n";
    }
  }
  return y.str();
}

}  // namespace

Expected<CalibrateResult> Calibrate(const ResolvedJob& job_in, const CalibrateOptions& opts) {
  // The job with enough measured steps for medians: a typed variant of the job.
  // Interleaved, the job's own counts: as many calibration steps as it asks measured steps.
  const ExecutionConfig& exe = job_in.config.execution;
  const int steps = opts.interleaved ? exe.steps : std::max(exe.steps, opts.min_steps);
  const int warmup = opts.interleaved ? exe.warmup : std::max(exe.warmup, opts.min_warmup);
  JobConfig variant = job_in.config;
  variant.execution.steps = opts.interleaved ? 2 * steps : steps;
  variant.execution.warmup = warmup;
  auto resolved = ResolveJob(std::move(variant));
  if (!resolved) return resolved.error();
  const ResolvedJob& job = *resolved;
  const Schedule& sched = job.schedule;
  Measurements m(sched.num_stages);
  const int reps = opts.repetitions;
  const double timeout_s = job.config.execution.timeout_s;

  RunOptions ro;
  ro.backend = opts.backend;
  ro.interleave_calibration = opts.interleaved;
  ro.compute_ms = opts.compute_ms;
  ro.after_steps = [&](const RunHookContext& ctx) -> Status {
    const int pp_rank = ctx.groups.coord.pp;
    // Every rank runs the same backend, so every rank returns here alike (no collective yet).
    for (int s = 0; s < sched.num_stages; ++s) {
      if (sched.stage_to_rank[static_cast<std::size_t>(s)] == pp_rank &&
          !ctx.backend.DescribeReduceGrad(s)) {
        return Error::Failure(
            "calibrate needs a backend whose gradient reduction it can "
            "reproduce over MPI (--backend cpu); --backend " +
            opts.backend + " has none");
      }
    }
    const std::vector<int> mine = StagesOfRank(sched, pp_rank);
    MeasureActions(ctx, m);
    MeasureTransferSize(ctx, sched.programs[static_cast<std::size_t>(pp_rank)], mine, m);
    MeasureDpReduction(ctx, mine, reps, timeout_s, m);
    MeasureP2p(ctx, reps, m);
    MeasureSync(ctx, reps, timeout_s, job.config.optimizer_sync, m);
    ReduceOverRanks(ctx, pp_rank, m);
    m.computes = ctx.backend.Computes();
    // Last, after every step and collective of calibration, on the rank that writes the
    // profile alone (the others go on to gather the steps' records and wait there).
    if (WorldRank() == 0) m.roofline = ctx.backend.MeasureRoofline();
    return OkStatus();
  };

  auto run = RunJob(job, ro);
  if (!run) return run.error();
  CalibrateResult res;
  res.root = run->root;
  if (opts.interleaved) res.run = std::move(*run);
  if (!res.root) return res;
  res.profile_yaml = ProfileYaml(job, opts, steps, warmup, reps, m);
  return res;
}

}  // namespace pipetwin::exec
