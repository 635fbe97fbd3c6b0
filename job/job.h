// job.h — the job, read once and resolved once into a typed, immutable ResolvedJob that every
// command and both sides (the simulator and the executor) take.
//
// Two steps, each with one home:
//  1. ReadJobConfig: the YAML file to a JobConfig, plain typed values (no YAML past it), every
//     key range-checked where it is read; errors name the file, line, key and what is allowed.
//  2. ResolveJob: a JobConfig to a ResolvedJob: microbatches derived from the global batch,
//     the model checked against the layout, the cost model's per-stage costs, and the
//     schedule generated (or read from its CSV), lowered and validated.
// Variants (validate trying each schedule, calibrate changing steps, plan sweeping layouts)
// copy the JobConfig, change typed fields and resolve again: the YAML is never rewritten.
//
//   Expected<ResolvedJob> job = LoadJob("examples/schedules/1f1b.yaml");
//   if (!job) { std::cerr << job->error().message; return job.error().exit_status(); }
//   JobConfig c = job->config;  c.schedule = "zb-h1";
//   Expected<ResolvedJob> variant = ResolveJob(c);
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "models/cluster.h"
#include "models/costs.h"
#include "models/model.h"
#include "models/stragglers.h"
#include "models/training.h"
#include "schedule/config.h"
#include "schedule/expected.h"
#include "schedule/schedule.h"

namespace pipetwin {

// Where each key of a job file is, so that a value found wrong only in combination with
// others (when the job is resolved, after the YAML is gone) is still reported at its line.
class SourceMap {
 public:
  SourceMap() = default;
  explicit SourceMap(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  void Set(const std::string& key, int line, int column);  // 1-based
  // "<path>:<line>:<col>: <key>" at the key, or at its nearest enclosing key that the file
  // has ("training" for "training.global_batch"), or "<path>: <key>".
  std::string Where(std::string_view key) const;
  // Bad input at `key`: "<Where(key)>: <what>".
  Error At(std::string_view key, std::string_view what) const;
  // Whether the file states `key` (a dotted path: "training.overlap.tp_comm").
  bool Has(std::string_view key) const { return marks_.find(key) != marks_.end(); }

 private:
  std::string path_;
  std::map<std::string, std::pair<int, int>, std::less<>> marks_;
};

// What a job file says, typed. Absent sections hold their defaults (documented in DESIGN.md).
struct JobConfig {
  std::string schedule;             // a generator name, or "csv:PATH"
  std::optional<int> microbatches;  // absent: global_batch / (micro_batch × dp)
  bool optimizer_sync = true;
  ParallelConfig parallel;
  std::optional<AbstractCosts> costs;  // `costs:` (abstract per-action costs)
  bool has_model = false;              // `model:` given: the cost model prices the actions
  // `model:` or, for an abstract job, the model `run` executes: the tiny preset.
  models::ModelConfig model;
  models::TrainingConfig training;
  models::ClusterConfig cluster;
  ExecutionConfig execution;
  // `execution.stragglers` (models/stragglers.h): slow ranks, played by the simulator and
  // applied by the sleep backend.
  models::Stragglers stragglers;
  SourceMap source;  // the file and its keys' positions, for messages

  const std::string& path() const { return source.path(); }
  bool IsCsvSchedule() const { return schedule.rfind("csv:", 0) == 0; }
  std::string CsvPath() const;  // relative paths resolve against the job file's folder
};

// pp × dp × tp × cp within the ranks pipetwin models (2^24), computed without overflow.
Status CheckWorldSize(const JobConfig& c);

// The job file to typed values (step 1).
Expected<JobConfig> ReadJobConfig(const std::string& path);
Expected<JobConfig> ParseJobConfig(const std::string& yaml_text, const std::string& path);

struct ResolveOptions {
  // Trust the built-in generators' output without re-validating it (they are validated over
  // pp 1..16 × m 1..64 by the test suite): for sweeps over many configurations.
  bool validate_generated = true;
  // A schedule already built (lowered, validated) for exactly this job's request — schedule,
  // pp, vpp, microbatches and dp > 1 — used instead of building it again (plan's cache of
  // schedules by shape). Null: build it.
  const Schedule* schedule = nullptr;
};

// A job with everything derived and checked. Built only by ResolveJob; passed as const&.
struct ResolvedJob {
  JobConfig config;
  int microbatches = 0;
  Schedule schedule;  // lowered and validated
  // The cost model's per-stage costs: jobs with `model:` (abstract costs, when also given,
  // price the actions instead; the model still gives memory and bytes sent).
  std::optional<models::JobCosts> model_costs;

  const std::string& path() const { return config.path(); }
  const ParallelConfig& parallel() const { return config.parallel; }
  // Sequences per step: microbatches × micro_batch × dp.
  double SamplesPerStep() const;
};

// Step 2. Errors are bad input naming the file, the key and what is allowed.
Expected<ResolvedJob> ResolveJob(JobConfig config, const ResolveOptions& opts = {});
// Both steps.
Expected<ResolvedJob> LoadJob(const std::string& path, const ResolveOptions& opts = {});
Expected<ResolvedJob> ParseJob(const std::string& yaml_text, const std::string& path,
                               const ResolveOptions& opts = {});

// The config as a job file that reads back to the same config (validate's variants, plan's
// --emit-jobs); `comment` opens the file as a YAML comment.
std::string WriteJobConfig(const JobConfig& c, const std::string& comment = "");

// What the cost model reads, from a resolved job's config (sweeps edit it directly).
models::CostInputs CostInputsOf(const JobConfig& c, int microbatches);

}  // namespace pipetwin
