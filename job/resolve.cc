// resolve.cc — step 2 of job.h: a typed JobConfig to a ResolvedJob.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "job/job.h"
#include "models/cpu_inventory.h"
#include "models/dp_sync.h"
#include "models/param_server.h"
#include "schedule/build.h"
#include "schedule/limits.h"

namespace pipetwin {
namespace {

// The most ranks pipetwin models: pp × dp × tp × cp must stay far from int's range.
constexpr long long kMaxWorld = 1LL << 24;

}  // namespace

Status CheckWorldSize(const JobConfig& c) {
  const ParallelConfig& p = c.parallel;
  const long long world = static_cast<long long>(p.pp) * p.dp * p.tp * p.cp;
  if (world > kMaxWorld) {
    return c.source.At("parallel", "pp × dp × tp × cp = " + std::to_string(world) +
                                       " ranks; at most " + std::to_string(kMaxWorld) +
                                       " are supported");
  }
  return OkStatus();
}

namespace {

// Chunks per rank follow from the schedule: two for the V schedules, one unless the schedule
// interleaves (or comes from a CSV, which says for itself).
Status CheckChunks(JobConfig& c) {
  if (c.schedule == "zbv" || c.schedule == "dualpipev") {
    c.parallel.vpp = 2;
  } else if (c.schedule != "interleaved-1f1b" && !c.IsCsvSchedule() && c.parallel.vpp != 1) {
    return c.source.At("parallel.vpp",
                       "must be 1 for " + c.schedule +
                           " (several chunks per rank: interleaved-1f1b, zbv, dualpipev)");
  }
  return OkStatus();
}

// `microbatches` if given (it must then agree with training.global_batch = microbatches ×
// micro_batch × dp when that is given too), otherwise global_batch / (micro_batch × dp).
Expected<int> Microbatches(const JobConfig& c) {
  const models::TrainingConfig& t = c.training;
  const long long per_microbatch = static_cast<long long>(t.micro_batch) * c.parallel.dp;
  if (c.microbatches) {
    if (t.global_batch != 0 && t.global_batch != *c.microbatches * per_microbatch) {
      return c.source.At("training.global_batch",
                         "disagrees with microbatches: " + std::to_string(t.global_batch) +
                             " != microbatches (" + std::to_string(*c.microbatches) +
                             ") x training.micro_batch (" + std::to_string(t.micro_batch) +
                             ") x parallel.dp (" + std::to_string(c.parallel.dp) + ")");
    }
    return *c.microbatches;
  }
  if (t.global_batch == 0) {
    return c.source.At("microbatches", "required: give `microbatches` or `training.global_batch`");
  }
  if (t.global_batch % per_microbatch != 0) {
    return c.source.At("training.global_batch", "must be divisible by training.micro_batch (" +
                                                    std::to_string(t.micro_batch) +
                                                    ") x parallel.dp (" +
                                                    std::to_string(c.parallel.dp) + "), got " +
                                                    std::to_string(t.global_batch));
  }
  const long long m = t.global_batch / per_microbatch;
  if (m > 1000000) {
    return c.source.At("training.global_batch",
                       "gives " + std::to_string(m) + " microbatches; at most 1000000 are allowed");
  }
  return static_cast<int>(m);
}

// The simulated step is at most the sum of all its actions' costs; keeping that sum below
// 1e12 ms (about 31 years) keeps every simulated time far inside int64 nanoseconds.
constexpr double kMaxStepMs = 1e12;

std::string Ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Abstract costs: each field's share of that sum, the largest named when it is too long.
// training.dp_sync async and stale are protocols of parameter servers: workers that push
// gradients and pull parameters each at its own pace. A ring all-reduce or ZeRO's collectives
// are barriers among the workers, and so is optimizer_sync's all-rank gradient norm.
Status CheckDpSync(const JobConfig& c) {
  const models::TrainingConfig& t = c.training;
  if (t.dp_sync == models::DpSync::kSync) return OkStatus();
  const std::string mode = "dp_sync: " + std::string(models::ToString(t.dp_sync));
  if (c.parallel.zero != 0) {
    return c.source.At("training.dp_sync",
                       mode + " with ZeRO (parallel.zero: " + std::to_string(c.parallel.zero) +
                           "): ZeRO shards the optimizer over the workers, whose collectives "
                           "are a barrier; use zero: 0 with parameter servers, or dp_sync: sync");
  }
  if (c.cluster.dp_reduction != models::ClusterConfig::DpReduction::kParameterServer) {
    return c.source.At("training.dp_sync",
                       mode +
                           " needs cluster.dp_reduction: parameter-server (a ring or tree "
                           "all-reduce is a barrier among the workers); or use dp_sync: sync");
  }
  if (c.parallel.dp < 2) {
    return c.source.At(
        "training.dp_sync",
        mode + " needs data parallelism: parallel.dp >= 2, got " + std::to_string(c.parallel.dp));
  }
  if (c.optimizer_sync) {
    return c.source.At("training.dp_sync",
                       mode +
                           " needs optimizer_sync: false (its all-rank gradient-norm "
                           "reduction is a barrier among the workers)");
  }
  return OkStatus();
}

Status CheckAbstractStepTime(const JobConfig& c, int microbatches) {
  const AbstractCosts& k = *c.costs;
  const double chunks = static_cast<double>(c.parallel.pp) * c.parallel.vpp;
  const double per_mb = chunks * microbatches;
  const std::pair<const char*, double> terms[] = {
      {"costs.forward_ms", per_mb * k.forward_ms},
      {"costs.backward_input_ms", per_mb * k.backward_input_ms},
      {"costs.backward_weight_ms", per_mb * k.backward_weight_ms},
      {"costs.p2p_ms", 2 * per_mb * k.p2p_ms},
      {"costs.optimizer_ms", chunks * k.optimizer_ms},
      {"costs.dp_reduce_ms", chunks * k.dp_reduce_ms},
      {"costs.sync_ms", k.sync_ms}};
  double total = 0;
  const std::pair<const char*, double>* worst = &terms[0];
  for (const auto& t : terms) {
    total += t.second;
    if (t.second > worst->second) worst = &t;
  }
  if (total > kMaxStepMs) {
    return c.source.At(worst->first,
                       "with " + std::to_string(microbatches) + " microbatches over " + Ms(chunks) +
                           " stages the step's actions sum to " + Ms(total) +
                           " ms; the simulated step is limited to " + Ms(kMaxStepMs) + " ms");
  }
  return OkStatus();
}

// Model-derived costs: the same bound; the model's and training's sizes are what to change.
Status CheckModelStepTime(const JobConfig& c, const models::JobCosts& jc, int microbatches) {
  double total = jc.sync_ms;
  for (const models::StageCost& s : jc.stages) {
    const double per_mb = s.forward_ms + s.backward_input_ms + s.backward_weight_ms +
                          s.forward_tp_comm_ms + s.backward_tp_comm_ms + s.forward_cp_comm_ms +
                          s.backward_cp_comm_ms + 2 * s.p2p_ms;
    total += microbatches * per_mb + s.dp_reduce_ms + s.param_allgather_ms + s.embedding_sync_ms +
             s.optimizer_ms;
  }
  if (!(total <= kMaxStepMs)) {  // NaN too
    return c.source.At("model", "the cost model prices one step at " + Ms(total) +
                                    " ms; the simulated step is limited to " + Ms(kMaxStepMs) +
                                    " ms (reduce model.seq_len, model.hidden, model.layers, "
                                    "training.micro_batch or the microbatches)");
  }
  return OkStatus();
}

// What simulate plays step by step is bounded before anything runs: with variability in
// execution.stragglers, every measured step with a draw per world rank (sim/simulate.cc); with
// parameter servers, every worker's every step, warm-up included (sim/dp_sync.cc).
Status CheckPlays(const JobConfig& config, const Schedule& schedule) {
  const models::Stragglers& st = config.stragglers;
  const bool ps = models::UsesParameterServers(config.cluster, config.parallel);
  if (!st.random() && !ps) return OkStatus();
  const long long world = config.parallel.WorldSize();
  const long long dp = config.parallel.dp;
  const long long actions = static_cast<long long>(schedule.NumActions());
  const auto refuse = [&](const std::string& key, long long steps, const std::string& what,
                          long long per_step, long long limit, const std::string& why) {
    return config.source.At(
        key,
        std::to_string(steps) + " steps x " + std::to_string(per_step) + " " + what + " = " +
            std::to_string(steps * per_step) + "; " + why + ", at most " + std::to_string(limit) +
            ". Use fewer steps" +
            (st.random() ? ", or cluster.variability for the expected step over many ranks" : ""));
  };
  if (st.random()) {
    const long long steps = config.execution.steps;
    const std::string why =
        "with variability in execution.stragglers, simulate plays every measured step with "
        "its own draws";
    if (steps * world > models::kMaxStragglerDraws) {
      return refuse("execution.steps", steps, "world ranks", world, models::kMaxStragglerDraws,
                    why);
    }
    if (steps * actions > models::kMaxStragglerPlayActions) {
      return refuse("execution.steps", steps, "schedule actions", actions,
                    models::kMaxStragglerPlayActions, why);
    }
  }
  if (ps) {
    // Warm-up included; each worker's every step is a play where the draws differ, one per
    // distinct set of slow ranks otherwise.
    const long long steps =
        static_cast<long long>(config.execution.warmup) + config.execution.steps;
    const std::string why =
        "with parameter servers, simulate plays every worker's every step, warm-up included";
    if (steps * dp > models::kMaxDpSyncWorkerSteps) {
      return refuse("execution.steps", steps, "workers (dp)", dp, models::kMaxDpSyncWorkerSteps,
                    why);
    }
    if (st.random() && steps * world > models::kMaxStragglerDraws) {
      return refuse("execution.steps", steps, "world ranks", world, models::kMaxStragglerDraws,
                    why);
    }
    const long long plays =
        st.random() ? steps * dp : std::min(dp, static_cast<long long>(st.fixed.size()) + 1);
    if (plays > models::kMaxDpSyncPlays || plays * actions > models::kMaxStragglerPlayActions) {
      return config.source.At(
          "execution.steps",
          std::to_string(plays) + " plays x " + std::to_string(actions) +
              " schedule actions = " + std::to_string(plays * actions) + "; " + why +
              " (one play per worker and step with variability in execution.stragglers, one "
              "per distinct set of slow ranks otherwise), at most " +
              std::to_string(models::kMaxDpSyncPlays) + " plays and " +
              std::to_string(models::kMaxStragglerPlayActions) + " actions");
    }
  }
  return OkStatus();
}

}  // namespace

double ResolvedJob::SamplesPerStep() const {
  return static_cast<double>(microbatches) * config.training.micro_batch * config.parallel.dp;
}

models::CostInputs CostInputsOf(const JobConfig& c, int microbatches) {
  models::CostInputs in;
  in.parallel = c.parallel;
  in.model = c.model;
  in.training = c.training;
  in.cluster = c.cluster;
  in.microbatches = microbatches;
  in.optimizer_sync = c.optimizer_sync;
  return in;
}

Expected<ResolvedJob> ResolveJob(JobConfig config, const ResolveOptions& opts) {
  if (Status s = CheckWorldSize(config); !s) return s.error();
  if (Status s = CheckChunks(config); !s) return s.error();
  ResolvedJob job;
  auto m = Microbatches(config);
  if (!m) return m.error();
  job.microbatches = *m;
  if (Status s = CheckDpSync(config); !s) return s.error();
  // A cluster whose node count was left out is just large enough for this layout.
  models::ClusterConfig& cl = config.cluster;
  if (!cl.nodes_given) {
    const int world = config.parallel.WorldSize();
    cl.nodes = std::max(1, (world + cl.gpus_per_node - 1) / cl.gpus_per_node);
  }
  // The cheap consistency checks (the cluster holds the ranks, tp divides the heads, the
  // layers split over the stages) before anything large is built or priced: a job both wrong
  // and huge fails at once, with the message about what is wrong.
  if (config.has_model && !config.costs) {
    if (cl.device.name == "cpu") {
      auto bad = models::ExecutorModelMismatch(config.model);
      if (!bad) bad = models::ExecutorTiedMismatch(config.model, config.parallel, cl);
      if (!bad) bad = models::CpuExecutorTrainingMismatch(config.training);
      if (bad) return config.source.At(bad->key, bad->message);
    }
    const int stages = config.IsCsvSchedule() ? 0 : config.parallel.pp * config.parallel.vpp;
    if (Status s = models::CheckCostInputs(CostInputsOf(config, job.microbatches), stages); !s) {
      return Error::BadInput(config.source.Where("model") + ": " + s.error().message);
    }
  }
  // Before any schedule is built: its size is bounded (a CSV checks its own numbers).
  const long long actions =
      static_cast<long long>(config.parallel.pp) * config.parallel.vpp * job.microbatches * 4;
  if (!config.IsCsvSchedule() && actions > kMaxScheduleActions) {
    return config.source.At(
        config.microbatches ? "microbatches" : "training.global_batch",
        "pp (" + std::to_string(config.parallel.pp) + ") x vpp (" +
            std::to_string(config.parallel.vpp) + ") x microbatches (" +
            std::to_string(job.microbatches) + ") x 4 = " + std::to_string(actions) +
            " schedule actions; at most " + std::to_string(kMaxScheduleActions) +
            " (kMaxScheduleActions) are supported");
  }
  if (config.costs) {
    if (Status s = CheckAbstractStepTime(config, job.microbatches); !s) return s.error();
  }

  ScheduleRequest req;
  req.name = config.schedule;
  if (config.IsCsvSchedule()) req.csv_path = config.CsvPath();
  req.pp = config.parallel.pp;
  req.vpp = config.parallel.vpp;
  req.microbatches = job.microbatches;
  // The gradients are reduced over dp x cp ranks (every CP rank holds its tokens' share).
  req.reduce_grad = config.parallel.dp * config.parallel.cp > 1;
  req.where_schedule = config.source.Where("schedule");
  req.where_microbatches =
      config.source.Where(config.microbatches ? "microbatches" : "training.global_batch");
  req.validate_generated = opts.validate_generated;
  if (opts.schedule != nullptr) {
    job.schedule = *opts.schedule;
  } else {
    auto sched = BuildSchedule(req);
    if (!sched) return sched.error();
    job.schedule = std::move(*sched);
  }
  if (Status s = CheckPlays(config, job.schedule); !s) return s.error();

  // With `model:` the cost model sizes the job (memory, bytes sent) even where `costs:` gives
  // the times (a job for the sleep backend: its real buffers, the costs' times).
  if (config.has_model) {
    auto jc =
        models::BuildJobCosts(CostInputsOf(config, job.microbatches), job.schedule.num_stages);
    if (!jc) {
      // The cost model's messages name their own keys ("cluster.nodes: ..."); locate them at
      // the model section, as the reader of the file would look for them.
      return Error::BadInput(config.source.Where("model") + ": " + jc.error().message);
    }
    if (Status s = CheckModelStepTime(config, *jc, job.microbatches); !s) return s.error();
    job.model_costs = std::move(*jc);
  }
  job.config = std::move(config);
  return job;
}

Expected<ResolvedJob> LoadJob(const std::string& path, const ResolveOptions& opts) {
  auto c = ReadJobConfig(path);
  if (!c) return c.error();
  return ResolveJob(std::move(*c), opts);
}

Expected<ResolvedJob> ParseJob(const std::string& yaml_text, const std::string& path,
                               const ResolveOptions& opts) {
  auto c = ParseJobConfig(yaml_text, path);
  if (!c) return c.error();
  return ResolveJob(std::move(*c), opts);
}

}  // namespace pipetwin
