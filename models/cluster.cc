#include "models/cluster.h"

#include "models/yaml_util.h"
#include "schedule/quote.h"
#include "schedule/suggest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace pipetwin::models {
namespace {

constexpr double kGB = 1e9;  // network and HBM bandwidths are quoted in decimal GB/s
constexpr double kMiB = 1048576.0;
constexpr double kUs = 1e-6;
constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
// The narrow-GEMM factors k / (k + k_half) and n / (n + n_half), least squares (on the log of
// the ratio) over the 44 bf16 GEMMs measured on one H100 SXM (results/models/h100-kernels.json,
// bench/gpu_kernels.py), with the saturating overhead term: the log-RMS falls from 0.21 to 0.11.
// They slow a GEMM's work, not its overhead t0 (when they scaled t0 as well, n_half 250 fitted
// to 0.10, but a GEMM with k = 16 paid 35 t0: a 1024 x 64 x 16 GEMM took 0.87 ms).
// Not measured on A100, which keeps the saturating term alone: H100's factors, with k_half
// scaled by A100's lower ratio of peak FLOPs to HBM bandwidth, moved its held-out Table 1 rows
// from 3.7% to 6.4% (models/README.md).
constexpr double kGemmKHalfH100 = 550, kGemmNHalfH100 = 275;
// The measured shapes' smallest k and n. Below them the factors are held at their value there,
// not extrapolated: a shorter k or a narrower n leaves the GEMM to its memory floor and t0
// (k / (k + 550) at k = 64 would write a large output at 1.1 TB/s, a third of the HBM rate,
// with n large, and made small models' steps slower on an H100 than on an A100).
constexpr double kGemmNarrowMinK = 1024, kGemmNarrowMinN = 512;

// mnk at which a GEMM reaches half of e_gemm, from a fixed per-kernel overhead t0 (launch,
// tail wave): t = 2mnk/(e*peak) + t0  <=>  e(mnk) = e * mnk / (mnk + e*peak*t0/2).
double MnkHalf(double peak, double e, double t0_s) { return e * peak * t0_s / 2; }

// Sources for every number: models/README.md.
const std::vector<DeviceSpec>& Devices() {
  static const std::vector<DeviceSpec> devices = [] {
    DeviceSpec a100;
    a100.name = "a100-sxm-80gb";
    a100.peak_bf16_flops = 312 * kTera;
    a100.peak_fp32_flops = 19.5 * kTera;
    a100.hbm_bytes = static_cast<std::int64_t>(81920 * kMiB);
    a100.hbm_bytes_per_s = 2039 * kGB;
    a100.nvlink_bytes_per_s = 300 * kGB;  // NVLink 3: 600 GB/s bidirectional
    a100.nvlink_latency_s = 2 * kUs;
    a100.nvlink_efficiency = 0.8;
    a100.ib_bytes_per_s = 25 * kGB;  // HDR 200 Gb/s
    a100.ib_latency_s = 5 * kUs;
    a100.ib_efficiency = 0.9;
    // Fitted (scripts/fit_gemm_efficiency.py, results/models/a100-gemm-fit.md): least squares
    // of the relative error over the A100 rows marked fit in examples/published/, the odd rows
    // of the four Megatron-LM sources (Narayanan et al. 2021 Tables 1 and 2, Korthikanti et al.
    // 2022, MegaScale 2024's Megatron-LM baseline) and Table 2's first three ZeRO-3 rows; the
    // even rows are the held-out check. Was 0.70 on Table 1's odd rows alone; 0.80, the cuBLAS
    // large-GEMM figure, leaves Table 1 10.5% optimistic.
    a100.gemm_efficiency = 0.68;  // fitted: the A100 fit rows of examples/published/
    a100.gemm_mnk_half = MnkHalf(a100.peak_bf16_flops, a100.gemm_efficiency, 5 * kUs);
    a100.attn_fwd_efficiency = 0.6;
    a100.attn_bwd_efficiency = 0.45;
    // Attention dropout: TransformerEngine runs FlashAttention-2 below sm90 (its backend choice,
    // checked at v1.7 and v1.11), so FlashAttention-2's own cost of dropout p = 0.1 as measured
    // on an H100 (results/models/h100-dropout.json, -2.json and -3.json, three runs at s = 2,048
    // and 4,096: forward 1.21 to 1.25x, backward 1.07 to 1.14x; their means); not measured on an
    // A100. Nor is the fused bias-dropout-add here: it keeps hbm_efficiency.
    a100.attn_dropout_fwd_factor = 1.23;
    a100.attn_dropout_bwd_factor = 1.10;
    a100.hbm_efficiency = 0.85;
    // A hidden collective's bytes cross HBM three times (NCCL's ring: the peer writes the chunk
    // into this GPU's buffer, the kernel reads it, writes it to the output or the next peer's
    // buffer); not fitted (models/README.md, "Compute beside hidden collectives").
    a100.comm_hbm_touches = 3;
    // Stragglers: a share of the GPUs runs 10% slow (the slowdown assumed), and a step waits
    // for the slowest of the ranks that synchronise in it: 1 + 0.1 (1 - (1 - share)^n). The
    // share, 1 in 5,000, was fitted with e_gemm on the same A100 fit rows
    // (scripts/variability_sweep.py, results/models/variability-sweep.md); H100 and H200 take
    // it as it is (a property of clusters, not refitted on their rows).
    a100.variability = {Variability::Distribution::kSlowFraction, 0, 0.0002, 1.1};

    // The 40 GB A100 SXM4: the same GA100 compute, NVLink 3 and HDR networking as the 80 GB
    // part (A100 datasheet), with HBM2 of 40,960 MiB at 1,555 GB/s instead of HBM2e at 2,039.
    // Every fitted and chosen constant is the 80 GB part's: the GEMMs and attention are
    // compute-bound, and the memory-bound passes run at the same share of their own HBM.
    DeviceSpec a100_40 = a100;
    a100_40.name = "a100-sxm-40gb";
    a100_40.hbm_bytes = static_cast<std::int64_t>(40960 * kMiB);
    a100_40.hbm_bytes_per_s = 1555 * kGB;

    DeviceSpec h100;
    h100.name = "h100-sxm-80gb";
    h100.peak_bf16_flops = 989 * kTera;
    h100.peak_fp32_flops = 67 * kTera;
    h100.peak_fp8_flops = 1979 * kTera;  // dense, H100 SXM datasheet
    h100.hbm_bytes = static_cast<std::int64_t>(81559 * kMiB);
    h100.hbm_bytes_per_s = 3350 * kGB;
    h100.nvlink_bytes_per_s = 450 * kGB;  // NVLink 4: 900 GB/s bidirectional
    h100.nvlink_latency_s = 2 * kUs;
    h100.nvlink_efficiency = 0.8;
    h100.ib_bytes_per_s = 50 * kGB;  // NDR 400 Gb/s
    h100.ib_latency_s = 5 * kUs;
    h100.ib_efficiency = 0.9;
    // Measured on one H100 SXM (bench/gpu_kernels.py, results/models/h100-kernels.json):
    // bf16 GEMMs of transformer shapes with n, k >= 4096 run at a median 0.71 of peak (0.56 to
    // 0.77); copy, add and GeLU at 0.86 to 0.89 of the HBM bandwidth (attention: below). The
    // narrow-GEMM factors (kGemmKHalfH100, kGemmNHalfH100) are fitted to those GEMMs; the GEMM
    // efficiency is the one constant fitted end to end: 0.65 (least squares over the H100 rows
    // marked fit in examples/published/, the odd rows of Megatron-Core's 2024 weak-scaling table
    // and of NVIDIA's 2025 dgxc-benchmarking runs; scripts/fit_gemm_efficiency.py,
    // results/models/h100-gemm-fit.md). The microbenchmarks' level with the same factors is 0.77;
    // what a training step loses beyond that (the framework's kernels between the GEMMs; not
    // sustained clocks, which a bf16 GEMM held for 6 s in results/models/h100-fp8.json) is not
    // modelled term by term.
    h100.fused_attention_by_default = true;
    h100.gemm_efficiency = 0.67;
    h100.variability = a100.variability;  // carried over, not refitted
    // The second and last constant fitted end to end: FP8 GEMMs reach 0.89 of bf16's efficiency
    // (least squares over the H100 fp8 rows marked fit: dgxc-benchmarking 24.11.1's ten and
    // 25.04's seven; scripts/fit_gemm_efficiency.py ... fp8, results/models/h100-fp8-fit.md;
    // 0.88 before the delayed-scaling amax all-reduces were charged). NeMo 24.07's FP8 table
    // (examples/published/nemo2024/) is the held-out check. Measured on one H100
    // (bench/gpu_kernels.py --only fp8, results/models/h100-fp8.json): a median 0.89 over 24
    // layer-shaped GEMMs, 0.88 sustained for 6 s at the power limit.
    h100.fp8_gemm_factor = 0.87;
    h100.gemm_mnk_half = MnkHalf(h100.peak_bf16_flops, h100.gemm_efficiency, 5 * kUs);
    h100.gemm_k_half = kGemmKHalfH100;
    h100.gemm_n_half = kGemmNHalfH100;
    // Causal flash attention (PyTorch SDPA, cuDNN's kernel), the mean of the measured fractions
    // at s = 2,048, 4,096 and 8,192 over every run that timed it without a pass training does
    // not run: forward four runs on two machines (results/models/h100-kernels.json, -2.json,
    // h100-attention.json, -2.json: 0.563, 0.599, 0.605, 0.589), backward the three of
    // 2026-11-28 (0.370, 0.376, 0.371), the earlier one having carried a gradient-accumulation
    // pass (models/README.md, "Attention core").
    h100.attn_fwd_efficiency = 0.59;
    h100.attn_bwd_efficiency = 0.37;
    // Attention dropout: TransformerEngine prefers cuDNN's fused attention on sm90 (checked at
    // v1.7 and v1.11), whose causal kernel with dropout p = 0.1 took 2.06x to 2.25x its time
    // without forward and 1.04x to 1.12x backward at s = 2,048 and 4,096 on one H100, three runs
    // (results/models/h100-dropout.json, -2.json, -3.json; PyTorch 2.11's cuDNN backend).
    // The means.
    h100.attn_dropout_fwd_factor = 2.17;
    h100.attn_dropout_bwd_factor = 1.08;
    h100.hbm_efficiency = 0.85;
    h100.comm_hbm_touches = 3;  // as A100's
    // Megatron's bias-dropout-add (x + bias, dropout p = 0.1, + residual; torch.compile, as
    // Megatron-Core's jit_fuser) as training runs it, mask kept: 0.46 of the HBM bandwidth by its
    // 3e + 1 bytes an element on one H100, where a plain add moved 0.89 and a copy 0.86 at the
    // same size (results/models/h100-dropout-2.json); forward and backward together 0.43. Against
    // the 0.85 the model's memory-bound passes run at: 0.85 / 0.46.
    h100.dropout_add_factor = 0.85 / 0.46;

    DeviceSpec h200 = h100;  // same GH100 compute and network, larger and faster HBM3e
    h200.name = "h200-sxm-141gb";
    h200.hbm_bytes = static_cast<std::int64_t>(143771 * kMiB);
    h200.hbm_bytes_per_s = 4800 * kGB;
    // Measured on one H200 SXM with the same benchmark and software as H100's
    // (bench/gpu_kernels.py, PyTorch 2.11; results/models/h200-kernels.json and -2.json, two
    // runs; h200-fp8.json and -2.json; h200-dropout.json, one run). Nothing here is fitted end
    // to end; where H100's constant was, the H200's is H100's times the ratio of the two GPUs'
    // measurements (the H200's as the mean of its two runs).
    //  - Large bf16 GEMMs (n, k >= 4,096): a median 0.699 of peak over the two runs (0.709,
    //    0.690) against H100's 0.712: e_gemm 0.67 x 0.699 / 0.712 = 0.66. The narrow-GEMM
    //    factors, refitted as H100's were (scripts/gemm_waves.py, on each shape's geometric mean
    //    of the two runs; level 0.77 on both GPUs), are k 450 and n 200 (log-RMS error 0.087;
    //    H100's 550 and 275 give 0.099 there): the faster HBM feeds short-k GEMMs better.
    //  - Causal flash attention at s = 2,048 to 8,192, measured as H100's (the mean over the
    //    runs): forward 0.60 of the executed FLOPs over five runs (h200-kernels.json, -2, -3,
    //    h200-attention.json, -2: 0.608, 0.596, 0.602, 0.593, 0.600), backward 0.38 over the
    //    three of 2026-11-28 (0.379, 0.377, 0.383; the first two timed a pass training does not
    //    run).
    //  - FP8 GEMMs: a median 0.91 and 0.89 of bf16's efficiency over 30 shapes (H100 0.881):
    //    H100's fitted 0.87 x 0.900 / 0.881 = 0.89.
    //  - cuDNN's causal attention with dropout p = 0.1, two runs (h200-dropout.json, -2.json):
    //    2.28x, 2.25x and 2.30x, 2.07x forward, 1.09x, 1.06x and 1.03x, 1.09x backward at
    //    s = 2,048 and 4,096; the bias-dropout-add moved 0.38 and 0.32 of the HBM bandwidth (H100
    //    0.46), a copy 0.82 and 0.84, an add 0.89 and 0.87 (the 0.85 of hbm_efficiency stands).
    h200.gemm_efficiency = 0.66;
    h200.gemm_mnk_half = MnkHalf(h200.peak_bf16_flops, h200.gemm_efficiency, 5 * kUs);
    h200.gemm_k_half = 450;
    h200.gemm_n_half = 200;
    h200.attn_fwd_efficiency = 0.60;
    h200.attn_bwd_efficiency = 0.38;
    h200.fp8_gemm_factor = 0.89;
    h200.attn_dropout_fwd_factor = 2.23;
    h200.attn_dropout_bwd_factor = 1.07;
    h200.dropout_add_factor = 0.85 / 0.35;
    // One CPU core running the executor's CPU backend (exec/cpu/, float32 Eigen). The
    // rates are rough placeholders for a current x86 core (AVX2 FMA, a few GEMM threads'
    // worth of efficiency lost to small shapes): `pipetwin calibrate` measures the real
    // costs. What matters for this device is memory: the simulator then uses the CPU
    // executor's own inventory (models/cpu_inventory.h), so predicted memory equals the
    // executor's, byte for byte. The "network" is shared memory between processes.
    DeviceSpec cpu;
    cpu.name = "cpu";
    cpu.peak_bf16_flops = 50 * kGiga;  // no bf16 on the CPU backend: runs in fp32
    cpu.peak_fp32_flops = 50 * kGiga;
    cpu.hbm_bytes = static_cast<std::int64_t>(16384 * kMiB);
    cpu.hbm_bytes_per_s = 10 * kGB;
    cpu.nvlink_bytes_per_s = 5 * kGB;
    cpu.nvlink_latency_s = 2 * kUs;
    cpu.nvlink_efficiency = 1.0;
    cpu.ib_bytes_per_s = 5 * kGB;
    cpu.ib_latency_s = 2 * kUs;
    cpu.ib_efficiency = 1.0;
    cpu.gemm_efficiency = 0.5;
    cpu.gemm_mnk_half = MnkHalf(cpu.peak_fp32_flops, cpu.gemm_efficiency, 2 * kUs);
    cpu.attn_fwd_efficiency = 0.2;
    cpu.attn_bwd_efficiency = 0.2;
    cpu.hbm_efficiency = 1.0;
    return std::vector<DeviceSpec>{a100, a100_40, h100, h200, cpu};
  }();
  return devices;
}

}  // namespace

const std::vector<std::string>& DeviceNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& d : Devices()) v.push_back(d.name);
    return v;
  }();
  return names;
}

Expected<DeviceSpec> FindDevice(std::string_view name) {
  for (const auto& d : Devices()) {
    if (d.name == name) return d;
  }
  std::string all;
  for (const auto& n : DeviceNames()) all += (all.empty() ? "" : ", ") + n;
  const std::string guess = DidYouMean(name, DeviceNames());
  return Error::BadInput("unknown device " + Quoted(name) + (guess.empty() ? "" : ", " + guess) +
                         " (allowed: " + all + ")");
}

namespace {

Status ParseLink(const YAML::Node& node, const YamlFields& f, const std::string& section,
                 double* bandwidth, double* latency, double* efficiency) {
  if (!node) return OkStatus();
  if (Status s = f.CheckKeys(node, section, {"bandwidth_gb_s", "latency_us", "efficiency"}); !s) {
    return s;
  }
  if (const YAML::Node v = node["bandwidth_gb_s"]) {
    Expected<double> x = f.Number(v, section + ".bandwidth_gb_s", 1e-3, 1e6);
    if (!x) return x.error();
    *bandwidth = *x * kGB;
  }
  if (const YAML::Node v = node["latency_us"]) {
    Expected<double> x = f.Number(v, section + ".latency_us", 0, 1e6);
    if (!x) return x.error();
    *latency = *x * kUs;
  }
  if (const YAML::Node v = node["efficiency"]) {
    Expected<double> x = f.Number(v, section + ".efficiency", 1e-3, 1);
    if (!x) return x.error();
    *efficiency = *x;
  }
  return OkStatus();
}

// `cluster.fabric`: blocks of nodes with full bisection and the oversubscription above them.
Status ParseFabric(const YAML::Node& node, const YamlFields& f, Fabric* fabric) {
  if (!node) return OkStatus();
  if (Status s = f.CheckKeys(node, "cluster.fabric", {"block_nodes", "oversubscription"}); !s) {
    return s;
  }
  if (const YAML::Node v = node["block_nodes"]) {
    Expected<long long> x = f.Int(v, "cluster.fabric.block_nodes", 1, 1 << 20);
    if (!x) return x.error();
    fabric->block_nodes = static_cast<int>(*x);
  }
  if (const YAML::Node v = node["oversubscription"]) {
    Expected<double> x = f.Number(v, "cluster.fabric.oversubscription", 1, 1024);
    if (!x) return x.error();
    fabric->oversubscription = *x;
  }
  return OkStatus();
}

// `cluster.compute`: the efficiency model's constants, for calibrating against measured runs.
// A new gemm_efficiency keeps the per-kernel overhead t0 (mnk_half is proportional to e).
Status ParseCompute(const YAML::Node& node, const YamlFields& f, DeviceSpec* d) {
  if (!node) return OkStatus();
  if (Status s =
          f.CheckKeys(node, "cluster.compute",
                      {"gemm_efficiency", "fp8_gemm_factor", "attention_forward_efficiency",
                       "attention_backward_efficiency", "hbm_efficiency", "comm_hbm_touches"});
      !s) {
    return s;
  }
  if (const YAML::Node v = node["comm_hbm_touches"]) {
    Expected<double> x = f.Number(v, "cluster.compute.comm_hbm_touches", 0, 16);
    if (!x) return x.error();
    d->comm_hbm_touches = *x;
  }
  auto fraction = [&](const char* key, double* out) -> Status {
    const YAML::Node v = node[key];
    if (!v) return OkStatus();
    Expected<double> x = f.Number(v, std::string("cluster.compute.") + key, 1e-3, 1);
    if (!x) return x.error();
    *out = *x;
    return OkStatus();
  };
  const double e0 = d->gemm_efficiency;
  for (Status s : {fraction("gemm_efficiency", &d->gemm_efficiency),
                   fraction("fp8_gemm_factor", &d->fp8_gemm_factor),
                   fraction("attention_forward_efficiency", &d->attn_fwd_efficiency),
                   fraction("attention_backward_efficiency", &d->attn_bwd_efficiency),
                   fraction("hbm_efficiency", &d->hbm_efficiency)}) {
    if (!s) return s;
  }
  d->gemm_mnk_half *= d->gemm_efficiency / e0;
  return OkStatus();
}

// log Phi(z), accurate in both tails.
double LogNormalCdf(double z) {
  return z > 0 ? std::log1p(-0.5 * std::erfc(z / std::sqrt(2.0)))
               : std::log(0.5 * std::erfc(-z / std::sqrt(2.0)));
}

}  // namespace

Status ParseVariability(const YAML::Node& node, const YamlFields& f, const std::string& key,
                        Variability* out) {
  if (!node) return OkStatus();
  if (!node.IsMap()) {
    return f.At(node, key,
                "must be a map {distribution: normal|lognormal, cv} or {distribution: "
                "slow_fraction, fraction, slowdown, cv}");
  }
  if (Status s = f.CheckKeys(node, key, {"distribution", "cv", "fraction", "slowdown"}); !s) {
    return s;
  }
  const YAML::Node dist = node["distribution"];
  if (!dist) return f.At(node, key, "needs distribution: normal | lognormal | slow_fraction");
  Expected<std::string> d =
      f.Choice(dist, key + ".distribution", {"none", "normal", "lognormal", "slow_fraction"});
  if (!d) return d.error();
  using D = Variability::Distribution;
  Variability v;
  v.distribution = *d == "none"        ? D::kNone
                   : *d == "normal"    ? D::kNormal
                   : *d == "lognormal" ? D::kLognormal
                                       : D::kSlowFraction;
  if (const YAML::Node x = node["cv"]) {
    Expected<double> cv = f.Number(x, key + ".cv", 0, v.distribution == D::kLognormal ? 1.0 : 0.25);
    if (!cv) return cv.error();
    v.cv = *cv;
  }
  struct Param {
    const char* name;
    double lo, hi;
    const char* what;
    double* value;
  };
  for (const Param& p : {Param{"fraction", 0, 1, "the share of slow ranks", &v.fraction},
                         Param{"slowdown", 1, 100, "their time factor", &v.slowdown}}) {
    const std::string at = key + "." + p.name;
    const YAML::Node x = node[p.name];
    if (v.distribution != D::kSlowFraction) {
      if (x) return f.At(x, at, "is a key of distribution: slow_fraction only");
      continue;
    }
    if (!x) {
      char range[64];
      std::snprintf(range, sizeof range, ", in [%g, %g])", p.lo, p.hi);
      return f.At(node, at,
                  std::string("required with distribution: slow_fraction (") + p.what + range);
    }
    Expected<double> y = f.Number(x, at, p.lo, p.hi);
    if (!y) return y.error();
    *p.value = *y;
  }
  *out = v;
  return OkStatus();
}

std::string_view ToString(Variability::Distribution d) {
  switch (d) {
    case Variability::Distribution::kNone:
      return "none";
    case Variability::Distribution::kNormal:
      return "normal";
    case Variability::Distribution::kLognormal:
      return "lognormal";
    case Variability::Distribution::kSlowFraction:
      return "slow_fraction";
  }
  return "?";
}

namespace {

// Simpson's rule with an even number of steps.
template <class F>
double Simpson(F&& fn, double lo, double hi, int steps) {
  const double h = (hi - lo) / steps;
  double sum = fn(lo) + fn(hi);
  for (int i = 1; i < steps; ++i) sum += (i % 2 ? 4 : 2) * fn(lo + i * h);
  return sum * h / 3;
}

// E[max of n] for slow_fraction: a share p of the ranks at s, the rest at 1, each times a normal
// factor of coefficient of variation cv.
double SlowFractionExpectedMax(const Variability& v, double n) {
  const double p = v.fraction, s = v.slowdown;
  if (v.cv <= 0) {
    // P(at least one of n is slow) = 1 - (1 - p)^n.
    const double any_slow = p >= 1 ? 1 : -std::expm1(n * std::log1p(-p));
    return 1 + (s - 1) * any_slow;
  }
  const double cv = v.cv;
  // E[X] = lo + integral over [lo, hi] of P(X > x), with X the largest of n.
  const double lo = 1 - 12 * cv, hi = s * (1 + 12 * cv);
  auto tail = [&](double x) {
    const double fast = std::exp(LogNormalCdf((x - 1) / cv));
    const double slow = std::exp(LogNormalCdf((x - s) / (s * cv)));
    const double cdf = (1 - p) * fast + p * slow;
    if (cdf <= 0) return 1.0;
    return -std::expm1(n * std::log(std::min(cdf, 1.0)));
  };
  return lo + Simpson(tail, lo, hi, 24000);
}

double ComputeExpectedMaxFactor(const Variability& v, long long n) {
  using D = Variability::Distribution;
  if (v.distribution == D::kSlowFraction) {
    return SlowFractionExpectedMax(v, static_cast<double>(std::max(n, 1LL)));
  }
  if (n <= 1) return 1;
  const double sigma = std::sqrt(std::log1p(v.cv * v.cv));
  const double mu = -sigma * sigma / 2;
  auto g = [&](double z) {
    return v.distribution == D::kNormal ? 1 + v.cv * z : std::exp(mu + sigma * z);
  };
  // Density of the maximum of n standard normals: n phi(z) Phi(z)^(n-1).
  const double nn = static_cast<double>(n);
  const double inv_sqrt_2pi = 1 / std::sqrt(2 * std::acos(-1.0));
  auto integrand = [&](double z) {
    const double log_density = std::log(nn) - z * z / 2 + (nn - 1) * LogNormalCdf(z);
    return g(z) * inv_sqrt_2pi * std::exp(log_density);
  };
  return Simpson(integrand, -12, 12, 24000);  // step 1e-3
}

}  // namespace

double ExpectedMaxFactor(const Variability& v, long long n) {
  if (!v.active()) return 1;
  // The integrals take about a millisecond; `plan` asks for the same few (v, n) for thousands of
  // layouts, so each thread keeps the answers it has computed.
  struct Key {
    Variability v;
    long long n;
    bool operator==(const Key&) const = default;
  };
  thread_local std::vector<std::pair<Key, double>> cache;
  const Key key{v, n};
  for (const auto& [k, x] : cache) {
    if (k == key) return x;
  }
  const double x = ComputeExpectedMaxFactor(v, n);
  if (cache.size() >= 64) cache.erase(cache.begin());
  cache.emplace_back(key, x);
  return x;
}

Expected<ClusterConfig> ParseClusterConfig(const YAML::Node& node, const YamlFields& f,
                                           int world_size) {
  ClusterConfig c;
  c.device = *FindDevice("a100-sxm-80gb");
  c.variability = c.device.variability;
  bool nodes_given = false;
  if (node && !node.IsNull()) {
    if (Status s = f.CheckKeys(node, "cluster",
                               {"device", "gpus_per_node", "nodes", "intra_node", "inter_node",
                                "rank_order", "dp_reduction", "parameter_servers", "compute",
                                "variability", "nics_per_node", "fabric"});
        !s) {
      return s.error();
    }
    if (const YAML::Node v = node["device"]) {
      Expected<std::string> x = f.Choice(v, "cluster.device", DeviceNames());
      if (!x) return x.error();
      c.device = *FindDevice(*x);
      c.variability = c.device.variability;
    }
    c.gpus_per_node = c.device.gpus_per_node;
    if (const YAML::Node v = node["gpus_per_node"]) {
      Expected<long long> x = f.Int(v, "cluster.gpus_per_node", 1, 1024);
      if (!x) return x.error();
      c.gpus_per_node = static_cast<int>(*x);
    }
    if (const YAML::Node v = node["nics_per_node"]) {
      Expected<long long> x = f.Int(v, "cluster.nics_per_node", 1, 1024);
      if (!x) return x.error();
      c.nics_per_node = static_cast<int>(*x);
    }
    if (const YAML::Node v = node["nodes"]) {
      Expected<long long> x = f.Int(v, "cluster.nodes", 1, 1 << 20);
      if (!x) return x.error();
      c.nodes = static_cast<int>(*x);
      nodes_given = true;
    }
    if (const YAML::Node v = node["dp_reduction"]) {
      Expected<std::string> x =
          f.Choice(v, "cluster.dp_reduction", {"ring", "tree", "parameter-server", "auto"});
      if (!x) return x.error();
      using R = ClusterConfig::DpReduction;
      c.dp_reduction = *x == "ring"   ? R::kRing
                       : *x == "tree" ? R::kTree
                       : *x == "auto" ? R::kAuto
                                      : R::kParameterServer;
    }
    if (const YAML::Node v = node["parameter_servers"]) {
      Expected<long long> x = f.Int(v, "cluster.parameter_servers", 1, 1 << 20);
      if (!x) return x.error();
      c.parameter_servers = static_cast<int>(*x);
    }
    if (const YAML::Node v = node["rank_order"]) {
      Expected<std::string> x = f.String(v, "cluster.rank_order");
      if (!x) return x.error();
      Expected<DimOrder> order = ParseDimOrder(*x);
      if (!order) return f.At(v, "cluster.rank_order", order.error().message);
      c.rank_order = *order;
    }
    if (Status s =
            ParseLink(node["intra_node"], f, "cluster.intra_node", &c.device.nvlink_bytes_per_s,
                      &c.device.nvlink_latency_s, &c.device.nvlink_efficiency);
        !s) {
      return s.error();
    }
    if (Status s = ParseLink(node["inter_node"], f, "cluster.inter_node", &c.device.ib_bytes_per_s,
                             &c.device.ib_latency_s, &c.device.ib_efficiency);
        !s) {
      return s.error();
    }
    if (Status s = ParseCompute(node["compute"], f, &c.device); !s) return s.error();
    if (Status s = ParseFabric(node["fabric"], f, &c.fabric); !s) return s.error();
    if (Status s = ParseVariability(node["variability"], f, "cluster.variability", &c.variability);
        !s) {
      return s.error();
    }
  }
  c.device.gpus_per_node = c.gpus_per_node;
  c.nodes_given = nodes_given;
  if (!nodes_given) c.nodes = std::max(1, (world_size + c.gpus_per_node - 1) / c.gpus_per_node);
  if (static_cast<long long>(c.nodes) * c.gpus_per_node < world_size) {
    return internal::AtOrFile(
        f, node && node.IsMap() ? node["nodes"] : YAML::Node(), "cluster.nodes",
        std::to_string(c.nodes) + " nodes x " + std::to_string(c.gpus_per_node) +
            " GPUs hold fewer than the job's " + std::to_string(world_size) +
            " ranks (pp x dp x tp x cp)");
  }
  c.intra = {c.device.nvlink_bytes_per_s * c.device.nvlink_efficiency, c.device.nvlink_latency_s};
  // One GPU's share of the node's NICs (all of a node's GPUs reduce at the same time).
  const int nics = c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node;
  const double share = std::min(1.0, static_cast<double>(nics) / c.gpus_per_node);
  c.inter = {c.device.ib_bytes_per_s * c.device.ib_efficiency * share, c.device.ib_latency_s};
  return c;
}

namespace {

double Efficiency(const DeviceSpec& d, double m, double n, double k, double mnk_half) {
  const double mnk = m * n * k;
  if (mnk <= 0) return d.gemm_efficiency;
  // t = (2 mnk / narrow + 2 mnk_half) / (e peak): the narrow factors slow the GEMM's work,
  // not its fixed overhead t0 = 2 mnk_half / (e peak).
  // Held at the measured range's edge below it (kGemmNarrowMinK, kGemmNarrowMinN).
  const double kk = std::max(k, kGemmNarrowMinK), nn = std::max(n, kGemmNarrowMinN);
  const double narrow = (kk / (kk + d.gemm_k_half)) * (nn / (nn + d.gemm_n_half));
  return d.gemm_efficiency * narrow * mnk / (mnk + narrow * mnk_half);
}

}  // namespace

double GemmEfficiency(const DeviceSpec& d, double m, double n, double k) {
  return Efficiency(d, m, n, k, d.gemm_mnk_half);
}

double GemmMs(const DeviceSpec& d, Precision p, double m, double n, double k) {
  const double flops = 2 * m * n * k;
  if (flops <= 0) return 0;
  // The per-GEMM overhead t0 is a time: gemm_mnk_half is its size at the bf16 rate, so at
  // FP8's rate it stands for proportionally more FLOPs and at fp32's for fewer (the
  // half-efficiency size scales with the achieved rate, peak x efficiency).
  const double factor = p == Precision::kFp8 ? d.fp8_gemm_factor : 1.0;
  const double mnk_half = d.gemm_mnk_half * factor * d.PeakFlops(p) / d.peak_bf16_flops;
  const double compute_ms =
      1e3 * flops / (d.PeakFlops(p) * factor * Efficiency(d, m, n, k, mnk_half));
  return std::max(compute_ms, GemmMemoryFloorMs(d, p, m, n, k));
}

// The roofline's memory-bound region: the operands read once and the result written once
// (fp8 inputs 1 byte, bf16/fp16 2, fp32 4; the result in bf16, fp32 for an fp32 GEMM).
// Transformer training's GEMMs sit above the ridge point (an H100's bf16 ridge is 295 FLOP per
// byte at peak, 233 at the model's achieved rates; a 4,096-token GEMM with k = 4,096 and a
// tensor-parallel n = 512 does 410), so this floor binds only for skinny shapes: a few tokens
// per micro-batch, a matrix-vector product. (Not one row of results/published.md moves.)
double GemmMemoryFloorMs(const DeviceSpec& d, Precision p, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double in_bytes = p == Precision::kFp8 ? 1 : p == Precision::kFp32 ? 4 : 2;
  const double out_bytes = p == Precision::kFp32 ? 4 : 2;
  return MemoryBoundMs(d, in_bytes * (m * k + k * n) + out_bytes * m * n);
}

double AttentionMs(const DeviceSpec& d, Precision p, double flops, double mnk, bool backward,
                   double work_factor) {
  if (flops <= 0) return 0;
  const double e = backward ? d.attn_bwd_efficiency : d.attn_fwd_efficiency;
  // The GEMMs' saturating form with the same per-kernel overhead t0 at the attention's own
  // rate: mnk_half = e_attn x peak x t0 / 2 (gemm_mnk_half is e_gemm x peak x t0 / 2), so the
  // overhead does not grow with e_gemm / e_attn.
  // (At fp32's rate, as the GEMMs, proportionally fewer FLOPs.)
  const double mnk_half =
      (d.gemm_efficiency > 0 ? d.gemm_mnk_half * e / d.gemm_efficiency : d.gemm_mnk_half) *
      d.PeakFlops(p) / d.peak_bf16_flops;
  // t = flops / (e peak) x (mnk + mnk_half) / mnk: the work, then the overhead.
  const double work_ms = 1e3 * flops / (d.PeakFlops(p) * e);
  return work_ms * work_factor + work_ms * mnk_half / mnk;
}

double MemoryBoundMs(const DeviceSpec& d, double bytes) {
  if (bytes <= 0) return 0;
  return 1e3 * bytes / (d.hbm_bytes_per_s * d.hbm_efficiency);
}

double CommHbmShare(const DeviceSpec& d, double bytes_sent, double ms) {
  if (bytes_sent <= 0 || ms <= 0 || d.comm_hbm_touches <= 0) return 0;
  const double rate = bytes_sent / (ms * 1e-3);
  return std::min(1.0, d.comm_hbm_touches * rate / (d.hbm_bytes_per_s * d.hbm_efficiency));
}

double DropoutAddExtraMs(const DeviceSpec& d, double bytes) {
  return MemoryBoundMs(d, bytes) * (d.dropout_add_factor - 1);
}

}  // namespace pipetwin::models
