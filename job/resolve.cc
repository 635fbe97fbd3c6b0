// resolve.cc — step 2 of job.h: a typed JobConfig to a ResolvedJob.
#include <limits>

#include "job/job.h"
#include "schedule/build.h"

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
  // A cluster whose node count was left out is just large enough for this layout.
  models::ClusterConfig& cl = config.cluster;
  if (!cl.nodes_given) {
    const int world = config.parallel.WorldSize();
    cl.nodes = std::max(1, (world + cl.gpus_per_node - 1) / cl.gpus_per_node);
  }

  ScheduleRequest req;
  req.name = config.schedule;
  if (config.IsCsvSchedule()) req.csv_path = config.CsvPath();
  req.pp = config.parallel.pp;
  req.vpp = config.parallel.vpp;
  req.microbatches = job.microbatches;
  req.reduce_grad = config.parallel.dp > 1;
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

  if (config.has_model && !config.costs) {
    auto jc =
        models::BuildJobCosts(CostInputsOf(config, job.microbatches), job.schedule.num_stages);
    if (!jc) {
      // The cost model's messages name their own keys ("cluster.nodes: ..."); locate them at
      // the model section, as the reader of the file would look for them.
      return Error::BadInput(config.source.Where("model") + ": " + jc.error().message);
    }
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
