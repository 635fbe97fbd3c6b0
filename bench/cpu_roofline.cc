// The CPU backend against the core it runs on: the attainable fp32 GEMM rate (a 512 x 512 x
// 2048 product, OpenBLAS and Eigen), the memory bandwidth (a STREAM-style triad), and the rate
// each action kind (F, I, W) of a GEMM-bound pipeline stage achieves, as a fraction of the
// better GEMM rate measured in the same run.
//
//   cmake --preset default && cmake --build --preset default --target cpu_roofline
//   build/default/bench/cpu_roofline
//
// One thread (the CPU backend's default, execution.threads = 1). The stage is 4 transformer
// blocks of the issue-17 model (hidden 512, ffn 2048, 8 heads, seq 256, micro-batch 2): a middle
// stage of bench/jobs/gemm-bound-pp2.yaml without its embedding or head. FLOPs are the cost
// model's (models/layer_costs.h, Narayanan et al.), the attention core's scaled to the share of
// the causal scores that the backend's blocked attention computes (5/8 at seq 256). Counters:
// GFLOP/s over wall-clock time, GFLOP/s_cpu over this thread's CPU time (what the core did while
// the thread held it: the machine may be shared), and of_attainable = GFLOP/s_cpu over
// attainable_GFLOP/s_cpu, the better of OpenBLAS and Eigen on the 512 x 512 x 2048 GEMM (best of 5
// each, thread CPU time), measured once per run before the first action.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/gemm.h"
#include "exec/cpu/roofline.h"
#include "models/costs.h"
#include "models/cpu_inventory.h"
#include "models/layer_costs.h"
#include "models/model.h"

namespace pipetwin {
namespace {

using cpu::GemmImpl;
using cpu::ThreadSeconds;

// The 512 x 512 x 2048 GEMM and the triad are exec/cpu/roofline.h's, as `pipetwin calibrate`
// measures them for its profile's `roofline:`.
void GemmBench(benchmark::State& state, GemmImpl impl) {
  cpu::SetGemmThreads(1);
  cpu::GemmOperands g;
  double cpu = 0;
  for (auto _ : state) {
    cpu += cpu::GemmSeconds(impl, g);
    benchmark::DoNotOptimize(g.c.data());
  }
  const double flops = cpu::kRooflineGemmFlops * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s_cpu"] = flops * 1e-9 / cpu;
  state.SetLabel(impl == GemmImpl::kEigen ? "Eigen, this build's flags" : cpu::GemmLibrary());
}
void BM_GemmOpenBLAS(benchmark::State& state) { GemmBench(state, GemmImpl::kBackend); }
void BM_GemmEigen(benchmark::State& state) { GemmBench(state, GemmImpl::kEigen); }
BENCHMARK(BM_GemmOpenBLAS)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_GemmEigen)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// Triad a = b + s c over 3 x 64 MiB (far beyond the caches); 12 bytes per element moved.
void BM_MemoryTriad(benchmark::State& state) {
  cpu::TriadArrays t(cpu::kTriadElementsBench);
  double cpu = 0;
  for (auto _ : state) {
    cpu += cpu::TriadSeconds(t);
    benchmark::DoNotOptimize(t.a.data());
    benchmark::ClobberMemory();
  }
  const double gb = t.bytes() * 1e-9 * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(gb, benchmark::Counter::kIsRate);
  state.counters["GB/s_cpu"] = gb / cpu;
}
BENCHMARK(BM_MemoryTriad)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// The better of OpenBLAS and Eigen on the 512 x 512 x 2048 GEMM: best of 5 each, in GFLOP/s
// of thread CPU time.
double AttainableGflops() {
  static const double rate = [] {
    cpu::SetGemmThreads(1);
    return std::max(cpu::GemmGflops(GemmImpl::kBackend, 5), cpu::GemmGflops(GemmImpl::kEigen, 5));
  }();
  return rate;
}

cpu::ModelConfig StageModel() {
  return cpu::ModelConfig{.layers = 8,
                          .hidden = 512,
                          .ffn_hidden = 2048,
                          .heads = 8,
                          .vocab = 256,
                          .seq_len = 256,
                          .micro_batch = 2};
}

// The FLOPs of one microbatch through `layers` blocks of StageModel(): the cost model's GEMMs,
// and its attention core scaled to the scores the backend computes.
models::LayerFlops StageFlops(const cpu::ModelConfig& g, int layers) {
  models::ModelConfig m;
  m.layers = g.layers;
  m.hidden = g.hidden;
  m.ffn_hidden = g.ffn_hidden;
  m.heads = g.heads;
  m.kv_heads = g.heads;
  m.vocab = g.vocab;
  m.seq_len = g.seq_len;
  models::LayerFlops f = models::DecoderLayerFlops(m, g.micro_batch, models::Sharding{});
  f.gemm *= layers;
  // The scores the backend computes at cp = 1 without selective recompute (its ring core).
  f.attention *= layers * models::CpuAttentionFraction(g.seq_len, 1, false);
  return f;
}

enum Kind : std::int64_t { kF = 0, kI = 1, kW = 2 };

// One action kind on a middle stage of 4 blocks: each iteration runs F, I and W of one
// microbatch; only the kind under test is timed. dropout 1: hidden and attention dropout at
// the executor's p (model.dropout: true), its masks drawn in F and again in I.
void BM_StageAction(benchmark::State& state) {
  const auto kind = static_cast<Kind>(state.range(0));
  const double attainable = AttainableGflops();
  cpu::RetainFreedMemory();  // as the CPU backend does
  cpu::SetGemmThreads(1);
  cpu::ModelConfig model = StageModel();
  model.dropout = state.range(1) != 0 ? models::kExecutorDropout : 0.0f;
  const int layers = 4;
  cpu::Accountant acc;
  cpu::Chunk stage(
      model, cpu::ChunkSpec{.first_layer = 2, .num_layers = layers, .first = false, .last = false},
      cpu::TpConfig{}, acc);
  std::vector<float> input(stage.activation_size()), output(stage.activation_size());
  std::vector<float> grad_out(stage.activation_size()), grad_in(stage.activation_size());
  for (std::size_t i = 0; i < input.size(); ++i) {
    input[i] = cpu::NormalFromKey(i);
    grad_out[i] = 1e-3f * cpu::NormalFromKey(i + input.size());
  }
  using Clock = std::chrono::steady_clock;
  std::int64_t mb = 0;
  double wall = 0, cpu = 0;
  // The attainable rate again, beside every timed action: one OpenBLAS and one Eigen product
  // per iteration, untimed for the action. A shared machine's core changes speed over seconds,
  // so the ratio of rates taken at the same moments is steadier than one against a rate taken
  // before the loop.
  cpu::GemmOperands ref;
  double ref_backend = 0, ref_eigen = 0;
  for (auto _ : state) {
    if (kind != kF) {  // what the action under test needs, untimed
      stage.Forward(mb, {.input = input, .output = output});
      if (kind == kW) stage.BackwardInput(mb, grad_out, grad_in);
    }
    const auto w0 = Clock::now();
    const double c0 = ThreadSeconds();
    if (kind == kF) stage.Forward(mb, {.input = input, .output = output});
    if (kind == kI) stage.BackwardInput(mb, grad_out, grad_in);
    if (kind == kW) stage.BackwardWeight(mb);
    const double dc = ThreadSeconds() - c0;
    const double dw = std::chrono::duration<double>(Clock::now() - w0).count();
    state.SetIterationTime(dw);
    wall += dw;
    cpu += dc;
    if (kind == kF) stage.BackwardInput(mb, grad_out, grad_in);  // finish the microbatch
    if (kind != kW) stage.BackwardWeight(mb);
    ++mb;
    ref_backend += cpu::GemmSeconds(GemmImpl::kBackend, ref);
    ref_eigen += cpu::GemmSeconds(GemmImpl::kEigen, ref);
  }
  const models::LayerFlops f = StageFlops(model, layers);
  const double gflop = (kind == kF   ? f.F()
                        : kind == kI ? f.I()
                                     : f.W()) *
                       1e-9 * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = gflop / wall;
  state.counters["GFLOP/s_cpu"] = gflop / cpu;
  state.counters["attainable_GFLOP/s_cpu"] = attainable;
  state.counters["of_attainable"] = gflop / cpu / attainable;
  const double beside = cpu::kRooflineGemmFlops * 1e-9 * static_cast<double>(state.iterations()) /
                        std::min(ref_backend, ref_eigen);
  state.counters["attainable_beside_GFLOP/s_cpu"] = beside;
  state.counters["of_attainable_beside"] = gflop / cpu / beside;
  state.SetLabel(std::string(kind == kF   ? "F"
                             : kind == kI ? "I"
                                          : "W") +
                 (state.range(1) != 0 ? " dropout" : ""));
}
BENCHMARK(BM_StageAction)
    ->ArgNames({"kind", "dropout"})
    ->ArgsProduct({{kF, kI, kW}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
