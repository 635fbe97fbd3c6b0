// plan.h — `pipetwin plan`: the best layouts and schedules for a model on a cluster. Every
// combination of the plan file's `search:` values is evaluated in process: invalid ones are
// counted by reason, the memory of the rest is checked from the cost model before any
// timing, and those that fit are simulated best-bound first until no remaining layout can
// enter the top K (a layout's iteration time is at least its busiest rank's compute time,
// so a layout whose best possible tokens/s is below the K-th best found is skipped: the top
// K is exactly what simulating every layout would give).
//
//   Expected<PlanFile> p = ReadPlanFile("examples/plan/gpt3-175b.yaml");
//   Expected<PlanResult> r = RunPlan(*p, {.top = 10, .threads = 2});
//   std::cout << PlanSummary(*r);                 // the top K and the counts
//   WriteFileAtomic("plan.json", PlanToJson(*r));
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "job/job.h"
#include "job/plan_file.h"
#include "schedule/expected.h"
#include "schedule/report.h"
#include "sim/known_misses.h"
#include "sim/rebalance.h"

namespace pipetwin {

struct PlanOptions {
  int top = 10;       // K
  int threads = 0;    // 0: every core
  bool prune = true;  // false: simulate every layout that fits (the brute force the tests use)
};

enum class PlanStatus { kInvalid, kNoFit, kPruned, kSimulated };

// One evaluated layout.
struct PlanRow {
  std::string schedule;
  ParallelConfig parallel;
  int micro_batch = 1;
  models::Recompute recompute = models::Recompute::kNone;
  models::Overlap overlap;
  models::DimOrder rank_order = models::kMegatronOrder;  // cluster.rank_order
  PlanStatus status = PlanStatus::kInvalid;
  std::string invalid_reason;  // kInvalid: gpus, sp, heads, layers, batch, schedule, model
  int microbatches = 0;
  std::int64_t peak_memory_bytes = 0;  // the fullest pipeline rank (all but kInvalid)
  int fullest_rank = -1;
  bool fits = false;
  double tokens_per_s_bound = 0;  // tokens/s if the step took only the busiest rank's compute
  // kSimulated:
  double iteration_time_ms = 0, tokens_per_s = 0, mfu = 0, bubble_fraction = 0;
  double exposed_comm_ms = 0;  // TP/CP + DP exposed, from the report's breakdown
};

struct PlanTop {
  JobConfig job;  // the full job: WriteJobConfig(job) reproduces the row under `simulate`
  PlanRow row;
  Breakdown breakdown;
  // Where the accuracy suite says such a layout reads optimistic (the notes `simulate` prints
  // for its emitted job): a layout the model may rank too high.
  std::vector<KnownMiss> known_misses;
  // Where its pipeline ranks are uneven: the model.layers_per_stage that shortens its step
  // (sim/rebalance.h), as `simulate` suggests it for the emitted job.
  std::optional<Rebalance> rebalance;
};

struct PlanResult {
  std::int64_t evaluated = 0, feasible = 0, infeasible_memory = 0, simulated = 0, pruned = 0;
  std::map<std::string, std::int64_t> invalid;  // by reason
  double seconds = 0, configs_per_second = 0;
  int threads = 1;
  std::int64_t hbm_bytes = 0;
  bool rank_orders = false;   // search.rank_order listed more than one: the outputs show it
  bool cp_comms = false;      // search.cp_comm listed more than one: the outputs show it
  std::vector<PlanRow> rows;  // every evaluated layout, in search order
  std::vector<PlanTop> top;   // the best K that fit, by tokens/s (ties: search order)
};

Expected<PlanResult> RunPlan(const PlanFile& plan, const PlanOptions& opts = {});

// The fastest of the top layouts with their steps taken some other way than the ranking's, and
// that step; the ranking itself stays the model's.
struct FastestOfTop {
  std::size_t index = 0;  // into PlanResult::top
  double iteration_ms = 0;
  double first_ms = 0;  // #1's step taken the same way, for comparison
};
// ... once each takes the split `rebalance` suggests for it (its even split where none is
// suggested); layouts below the top K are not rebalanced. Empty where no top layout has a
// suggestion.
using FastestRebalanced = FastestOfTop;
std::optional<FastestRebalanced> FindFastestRebalanced(const PlanResult& r);
// ... if each layout in a known miss (PlanTop::known_misses) were as slow as the suite's runs of
// its kind at their worst: its step times 1 + the largest `optimistic_pct` of its notes / 100,
// the others as predicted. Empty where no top layout is in a known miss.
using FastestAtKnownWorst = FastestOfTop;
std::optional<FastestAtKnownWorst> FindFastestAtKnownWorst(const PlanResult& r);

// Outputs: the human summary, the --report JSON, the --csv (a row per evaluated layout).
std::string PlanSummary(const PlanResult& r);
std::string PlanToJson(const PlanResult& r);
std::string PlanCsv(const PlanResult& r);

}  // namespace pipetwin
