// profile.h — a calibration profile (YAML, written by `pipetwin calibrate`) as the
// simulator's cost table: measured times in place of the cost model's.
//
//   Expected<Profile> t = LoadProfile("profile.yaml", schedule);   // after BuildSchedule
//   if (!t) return t.error();   // bad input: names the file, the key and what is allowed
//
// The format (times in ms; unknown keys are errors, like the job file):
//   version: 1
//   backend: cpu                     # what was measured (informational)
//   job: "...", schedule: "...", microbatches: 8        # informational
//   parallel: {pp: 2, dp: 1, tp: 1, cp: 1, sp: false}   # pp must match the schedule
//   recompute: full                  # training.recompute of the measured run: its I contains
//                                    # the recomputed forward, so simulate and `run --profile`
//                                    # refuse a job with another setting (absent: not checked)
//   stages:                          # one per model chunk, in model order
//     - {stage: 0, forward_ms: 9.8, backward_ms: 20.1,  # medians of the measured actions;
//        backward_input_ms: 10.2, backward_weight_ms: 9.9,   # each kind the schedule runs
//        optimizer_ms: 1.2,                                 # on the stage is required
//        transfer_bytes: 65536,      # one activation / gradient transfer it sends
//        dp_reduce_ms: 0.8, dp_reduce_bytes: 1234,      # its DP gradient all-reduce
//        forward_gflops: 41.2, backward_input_gflops: 38.0,  # informational, optional: the
//        backward_weight_gflops: 44.9, backward_gflops: 41.3}  # rate each measured kind
//                                    # achieved, the cost model's FLOPs of one rank (its TP x CP
//                                    # group) in the action over its median (models/costs.h:
//                                    # StageCost::forward_flops, ...; B = I + W); each a number
//                                    # > 0, and only beside its *_ms
//   engine:
//     action_overhead_ms: 0.02       # executor time between compute actions (posting
//                                    # sends and receives, polling), outside receives
//     step_start_ms: 0.5             # from a step's start to its first action
//   sync_ms: 0.01                    # all-rank reduction before the optimizer step
//   p2p: {latency_ms: 0.005, bandwidth_bytes_per_ms: 2.0e6, samples: [{bytes, ms}, ...]}
//   dp_allreduce: [{group_size: 2, stage: 0, bytes_sent: 1234, ms: 0.8}, ...]  # informational
//   roofline: {gemm_gflops: 95.1, memory_gb_s: 11.8}  # informational, optional (calibrate on
//                                    # the CPU backend): one core's fp32 GEMM rate and triad
//                                    # bandwidth, one thread over its CPU time
//                                    # (exec/cpu/roofline.h); each a number > 0
//   jitter:                          # optional: per calibration step, each pipeline rank's
//     - [1.03, 0.97]                 # compute time over the medians' sum (its speed that
//     - [0.91, 1.12]                 # step); one factor per pipeline rank, each in (0, 100]
//
// How the measured numbers become the cost table: a compute action costs its median plus
// the engine's per-action overhead; a receive on the CPU backend completes (the data is
// copied) when the receiving rank reaches it, so the copy, transfer_bytes / bandwidth, is
// charged to the compute action that consumes the received tensor (F after RECV_F; B or I
// after RECV_B) and the link itself costs the latency; the fixed cost of starting a step is
// charged once per step, with the all-rank synchronisation.
//
// Jitter: on a shared machine a core's speed changes from one step to the next, and a step
// waits for its slowest rank, so the median step is slower than a step played at median
// speeds. With `jitter`, simulate plays the step once per listed calibration step, every
// rank's compute times scaled by its factor, and reports the median of those iteration
// times (the same estimator `run` applies to its measured steps); the report's `jitter` key
// gives the nominal (unscaled) time and the spread.
//
// The informational keys (backend, job, schedule, microbatches, dp_allreduce, the *_gflops and
// roofline) play no part in the cost table; `pipetwin compare --profile` shows the rates
// (workflow/compare_files.h). Profiles without the rates (written before them, or for a job
// without a model, or by the sleep backend) stay valid.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedule/expected.h"
#include "schedule/schedule.h"
#include "sim/costs.h"
#include "sim/simulate.h"

namespace pipetwin {

// Median milliseconds of a compute action kind on a stage: {(stage, kind), ms}.
using ActionMedians = std::map<std::pair<int, ActionKind>, double>;

struct ProfileRoofline {  // `roofline:`; 0 where a key is absent
  double gemm_gflops = 0;
  double memory_gb_s = 0;
};

struct Profile {
  CostTable table;                          // at median speed
  std::vector<std::vector<double>> jitter;  // [calibration step][pipeline rank]; may be empty
  // The stages' medians as listed (before overhead and copies are added): what the sleep
  // backend sleeps (`run --backend sleep --profile`).
  ActionMedians medians;
  std::string recompute;  // none | selective | full as measured; empty when not stated
  // Informational.
  std::string backend;      // as stated
  ActionMedians listed_ms;  // the stages' medians exactly as listed (no B from I + W, no replay)
  ActionMedians gflops;     // stages[].*_gflops by (stage, kind), where listed
  std::optional<ProfileRoofline> roofline;
};

// Bad input when the profile was measured under another training.recompute than the job's
// (a calibrated I includes the recomputed forward, or not).
Status CheckProfileMatchesJob(const Profile& p, const ResolvedJob& job, const std::string& path);

// `table` with every compute time of the stages on pipeline rank r scaled by factors[r].
CostTable ScaleComputeByRank(const CostTable& table, const Schedule& s,
                             const std::vector<double>& factors);

// `replace`, when given, takes the place of the profile's medians for the actions it lists
// (validate's replay: the measured run's own action times, to separate the schedule model's
// error from the machine's drift between calibration and run).
Expected<Profile> LoadProfile(const std::string& path, const Schedule& s,
                              const ActionMedians* replace = nullptr);
// The same from text (`path` names it in messages).
Expected<Profile> ParseProfile(const std::string& yaml_text, const std::string& path,
                               const Schedule& s, const ActionMedians* replace = nullptr);

// The profile without a job (`pipetwin compare --profile`): every key and value checked as
// above except what needs the schedule (parallel.pp, the number of stages, the kinds each
// stage must list, p2p where ranks send, the jitter rows' length); `table` stays empty,
// `medians` are as listed (B from I + W where only those are). `option` names the file's
// origin in a missing file's message.
Expected<Profile> LoadProfileWithoutJob(const std::string& path,
                                        const std::string& option = "--profile");
Expected<Profile> ParseProfileWithoutJob(const std::string& yaml_text, const std::string& path);

// `pipetwin simulate JOB --profile PROFILE`: Simulate(job), then the same schedule played
// again with the profile's cost table; the report keeps what does not depend on time
// (memory, bytes) from the job's model and takes times from the replay.
Expected<SimResult> SimulateWithProfile(const ResolvedJob& job, const std::string& profile_path,
                                        const SimulateOptions& opts);

}  // namespace pipetwin
