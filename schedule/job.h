// job.h — the job file (YAML): what to simulate or run.
//
// LoadJob reads and checks the keys that schedule/ owns (schedule, microbatches,
// optimizer_sync, parallel, costs); `model`, `training`, `cluster` and `execution` are kept
// as YAML nodes for models/ and exec/ to read with the same YamlFields rules. Unknown keys
// are errors, every error names the file, the key and what is allowed (see DESIGN.md).
//
//   Expected<JobSpec> job = LoadJob("examples/1f1b.yaml");
//   if (!job) { std::cerr << job.error().message; return job.error().exit_status(); }
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>

#include "schedule/expected.h"
#include "schedule/generators.h"

namespace pipetwin {

struct ParallelConfig {
  int pp = 1;
  int vpp = 1;  // chunks per rank: interleaved-1f1b; zbv and dualpipev always use 2
  int dp = 1;
  int tp = 1;
  bool sp = false;
  int cp = 1;
  int zero = 0;  // ZeRO stage 0..3
  int WorldSize() const { return pp * dp * tp * cp; }
};

// Abstract costs of ONE action of ONE model chunk (job file `costs:`).
struct AbstractCosts {
  double forward_ms = 1.0;
  double backward_input_ms = 1.0;   // I; a full backward B = I + W
  double backward_weight_ms = 1.0;  // W
  double p2p_ms = 0.0;              // one activation or gradient transfer between stages
  double optimizer_ms = 0.0;        // optimizer step of one chunk
  double dp_reduce_ms = 0.0;        // data-parallel gradient reduction of one chunk (dp > 1)
  double sync_ms = 0.0;             // the all-rank synchronisation before the optimizer step
};

// The job file's `execution:` section: how `pipetwin run` executes the step.
struct ExecutionConfig {
  int steps = 3;           // measured steps
  int warmup = 1;          // steps run before measuring
  double timeout_s = 300;  // a receive or collective that stalls longer fails the run
  std::uint64_t seed = 1;  // synthetic data
  double learning_rate = 1e-3;
  int recv_window = 8;  // receives posted ahead, in program order
};

struct JobSpec {
  std::string path;                 // the file, for messages
  std::string schedule;             // a generator name, or "csv:PATH"
  std::optional<int> microbatches;  // absent: models/ derives it from `training:`
  bool optimizer_sync = true;
  ParallelConfig parallel;
  std::optional<AbstractCosts> costs;
  ExecutionConfig execution_config;
  // Sections owned by other layers, checked there (null nodes where the file has none:
  // test with root["model"], since a default YAML::Node is a defined null).
  YAML::Node model, training, cluster, execution;
  YAML::Node root;

  bool IsCsvSchedule() const { return schedule.rfind("csv:", 0) == 0; }
  std::string CsvPath() const;     // relative paths resolve against the job file's folder
  GeneratorParams Params() const;  // needs microbatches
};

Expected<JobSpec> LoadJob(const std::string& path);
Expected<JobSpec> ParseJob(const std::string& yaml_text, const std::string& path);

}  // namespace pipetwin
