// Simulator throughput: simulated actions per second, and how the time grows with pp × m.
//
//   cmake --preset release && cmake --build --preset release --target sim_benchmark
//   build/release/bench/sim_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only
//
// BM_Engine times the discrete-event engine alone on a lowered, validated schedule (what a
// parameter sweep re-runs when only costs change); BM_EndToEnd adds generating, lowering and
// validating the schedule (resolving the job) and building the report (what `pipetwin
// simulate` does after reading the file).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "job/job.h"
#include "sim/plan.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

ResolvedJob MakeJob(int pp, int m) {
  auto job = ParseJob("schedule: interleaved-1f1b\nmicrobatches: " + std::to_string(m) +
                          "\nparallel: {pp: " + std::to_string(pp) +
                          ", vpp: 2}\ncosts: {forward_ms: 1.0, backward_input_ms: 1.1, "
                          "backward_weight_ms: 0.9, p2p_ms: 0.05}\n",
                      "bench.yaml");
  if (!job) throw std::runtime_error(job.error().message);
  return *job;
}

void BM_Engine(benchmark::State& state) {
  const int pp = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const ResolvedJob job = MakeJob(pp, m);
  const Schedule& s = job.schedule;
  const CostTable costs = JobCostTable(job);
  std::uint64_t actions = 0;
  for (auto _ : state) {
    SimStats st = RunEngine(s, costs, {.optimizer_sync = true}, nullptr);
    benchmark::DoNotOptimize(st.makespan);
    actions += st.actions;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(actions));
  state.counters["pp_x_m"] = static_cast<double>(pp * m);
  state.counters["actions"] = static_cast<double>(s.NumActions());
}

void BM_EndToEnd(benchmark::State& state) {
  const int pp = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const ResolvedJob job = MakeJob(pp, m);
  std::uint64_t actions = 0;
  for (auto _ : state) {
    auto j = ResolveJob(job.config);
    auto r = Simulate(*j, /*record_timeline=*/false);
    benchmark::DoNotOptimize(r->report.iteration_time_ms);
    actions += r->stats.actions;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(actions));
  state.counters["pp_x_m"] = static_cast<double>(pp * m);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int pp : {4, 16, 64}) {
    for (int m : {64, 256, 1024}) b->Args({pp, m});
  }
}

BENCHMARK(BM_Engine)->Apply(Shapes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EndToEnd)->Apply(Shapes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetwin

namespace pipetwin {
namespace {

// Configurations per second: GPT-3 175B on 1,024 A100s, sweeping TP × PP × micro-batch
// (DP fills the rest), each configuration costed by models/, its schedule generated,
// lowered and validated, simulated, and reported (memory, MFU, breakdown) — the whole
// `pipetwin simulate` path without the YAML parse. Calculon reports 70–90 per second per core.
// state.range(0) = 1: the lean sweep path: built-in generators trusted (validated by the
// test suite over pp 1..16 × m 1..64), one report row per pipeline rank instead of per GPU.
void BM_Gpt3Sweep(benchmark::State& state) {
  const bool lean = state.range(0) == 1;
  auto job = ReadJobConfig(std::string(PIPETWIN_SOURCE_DIR) + "/examples/models/gpt3-175b.yaml");
  if (!job) throw std::runtime_error(job.error().message);
  struct Config {
    int tp, pp, mb;
  };
  std::vector<Config> configs;
  for (int tp : {2, 4, 8}) {
    for (int pp : {4, 8, 16}) {
      for (int mb : {1, 2}) configs.push_back({tp, pp, mb});
    }
  }
  std::size_t i = 0;
  std::int64_t done = 0;
  for (auto _ : state) {
    // A typed variant of the job, resolved (schedule built, cost model run) and simulated.
    const Config c = configs[i++ % configs.size()];
    JobConfig v = *job;
    v.parallel.tp = c.tp;
    v.parallel.pp = c.pp;
    v.parallel.dp = 1024 / (c.tp * c.pp);
    v.training.micro_batch = c.mb;
    v.microbatches.reset();  // from the global batch
    auto r = ResolveJob(std::move(v), {.validate_generated = !lean});
    if (!r) throw std::runtime_error(r.error().message);
    auto sim = Simulate(*r, {.record_timeline = false, .per_world_rank = !lean});
    benchmark::DoNotOptimize(sim->report.throughput.mfu);
    ++done;
  }
  state.SetItemsProcessed(done);
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(done), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gpt3Sweep)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// `pipetwin plan examples/plan/gpt3-175b.yaml --threads N`: GPT-3 175B on 1,024 A100s, 4,320
// layouts (invalid, refused by memory, skipped by the bound and simulated all counted).
void BM_Plan(benchmark::State& state) {
  auto plan = ReadPlanFile(std::string(PIPETWIN_SOURCE_DIR) + "/examples/plan/gpt3-175b.yaml");
  if (!plan) throw std::runtime_error(plan.error().message);
  const int threads = static_cast<int>(state.range(0));
  std::int64_t evaluated = 0, simulated = 0;
  for (auto _ : state) {
    auto r = RunPlan(*plan, {.top = 10, .threads = threads});
    if (!r) throw std::runtime_error(r.error().message);
    evaluated += r->evaluated;
    simulated = r->simulated;
    benchmark::DoNotOptimize(r->top.front().row.tokens_per_s);
  }
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
  state.counters["simulated"] = static_cast<double>(simulated);
}
BENCHMARK(BM_Plan)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
