// Simulator throughput: simulated actions per second, and how the time grows with pp × m.
//
//   cmake --preset release && cmake --build --preset release --target sim_benchmark
//   build/release/bench/sim_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only
//
// BM_Engine times the discrete-event engine alone on a lowered, validated schedule (what a
// parameter sweep re-runs when only costs change); BM_EndToEnd adds generating, lowering and
// validating the schedule and building the report (what `pipetwin simulate` does).
#include <benchmark/benchmark.h>

#include "schedule/build.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

JobSpec MakeJob(int pp, int m) {
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
  const JobSpec job = MakeJob(pp, m);
  const Schedule s = *BuildSchedule(job, m);
  const CostTable costs = UniformCosts(*job.costs, s.num_stages);
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
  const JobSpec job = MakeJob(pp, m);
  std::uint64_t actions = 0;
  for (auto _ : state) {
    auto r = Simulate(job, /*record_timeline=*/false);
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

BENCHMARK_MAIN();
