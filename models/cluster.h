// cluster.h — the hardware: device presets, the two-level network (NVLink inside a node,
// InfiniBand between nodes, one NIC per GPU), the job file's `cluster:` section, and the
// compute-efficiency model that turns FLOPs and bytes into milliseconds.
//
//   cluster: {device: a100-sxm-80gb, gpus_per_node: 8, nodes: 192,
//             intra_node: {bandwidth_gb_s: 300, latency_us: 2},
//             inter_node: {bandwidth_gb_s: 25, latency_us: 5}}
//
//   Expected<ClusterConfig> c = ParseClusterConfig(job.cluster, YamlFields{job.path}, 64);
//   double ms = GemmMs(c->device, Precision::kBf16, 2048, 12288, 12288);   // one GEMM
//
// Efficiency model (numbers and sources in models/README.md):
//   GEMM of m x n x k:     t = 2mnk / (peak * e_gemm * mnk / (mnk + mnk_half))
//                          i.e. achieved fraction saturates at e_gemm for large GEMMs, and is
//                          half of that at mnk = mnk_half (small GEMMs run far below peak).
//   attention (fused or not): the same saturating form with e_attn_fwd / e_attn_bwd.
//   elementwise / optimizer / any memory-bound pass: t = bytes / (hbm_bw * e_hbm).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/placement.h"
#include "models/training.h"
#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {

// One direction of a link, as used by the alpha-beta model: t = latency + bytes / bandwidth.
struct Link {
  double bandwidth_bytes_per_s = 0;  // effective (nominal x efficiency)
  double latency_s = 0;
};

// Per-rank speed variability at scale (`variability: {distribution: normal, cv: 0.02}`): each
// rank's compute time is the nominal time times an independent factor of mean 1 and
// coefficient of variation cv, drawn per step; a step waits for the slowest rank of the
// ranks that synchronise in it.
// `slow_fraction` (`{distribution: slow_fraction, fraction: 0.005, slowdown: 1.1, cv}`) is a
// cluster where a share `fraction` of the ranks runs `slowdown` times slower than the nominal
// (healthy) speed, and every rank, slow or not, spreads around its speed by a normal factor
// of coefficient of variation cv (default 0). Its mean is 1 + fraction (slowdown - 1), not 1.
struct Variability {
  enum class Distribution { kNone, kNormal, kLognormal, kSlowFraction };
  Distribution distribution = Distribution::kNone;
  double cv = 0;
  double fraction = 0;  // slow_fraction: the share of slow ranks, in [0, 1]
  double slowdown = 1;  // slow_fraction: their time factor, >= 1
  bool operator==(const Variability&) const = default;

  // Whether any rank can run off its nominal speed.
  bool active() const {
    switch (distribution) {
      case Distribution::kNone:
        return false;
      case Distribution::kSlowFraction:
        return cv > 0 || (fraction > 0 && slowdown > 1);
      default:
        return cv > 0;
    }
  }
};
std::string_view ToString(Variability::Distribution d);
// `{distribution: none | normal | lognormal | slow_fraction, cv, fraction, slowdown}` at `key`
// (cluster.variability, execution.stragglers.variability): cv in [0, 0.25] for normal and
// slow_fraction (a negative time stays 4 sigma out of reach), [0, 1] for lognormal; fraction
// (required) in [0, 1] and slowdown (required) in [1, 100] with slow_fraction only; absent:
// unchanged.
Status ParseVariability(const YAML::Node& node, const YamlFields& f, const std::string& key,
                        Variability* out);

struct DeviceSpec {
  std::string name;
  double peak_bf16_flops = 0;  // dense tensor-core bf16/fp16 FLOP/s
  double peak_fp32_flops = 0;  // non-tensor-core fp32 FLOP/s
  double peak_fp8_flops = 0;   // dense tensor-core fp8 FLOP/s; 0: no FP8 tensor cores
  std::int64_t hbm_bytes = 0;
  double hbm_bytes_per_s = 0;
  // Network of the node this device sits in (per direction, per GPU).
  double nvlink_bytes_per_s = 0;  // nominal
  double nvlink_latency_s = 0;
  double nvlink_efficiency = 1;  // achievable fraction of nominal (busbw / nominal)
  double ib_bytes_per_s = 0;     // one NIC per GPU
  double ib_latency_s = 0;
  double ib_efficiency = 1;
  int gpus_per_node = 8;
  // Compute efficiency model.
  double gemm_efficiency = 1;  // e_gemm: large-GEMM fraction of peak
  double gemm_mnk_half = 0;    // mnk at which half of e_gemm is reached
  // A GEMM's short inner dimension k and its narrow output dimension n cost efficiency of their
  // own (each output tile's prologue and epilogue against its k loop; few tiles for the SMs):
  // factors k / (k + gemm_k_half) and n / (n + gemm_n_half); 0 = none.
  double gemm_k_half = 0, gemm_n_half = 0;
  // FP8 GEMMs reach this fraction of the bf16 GEMMs' efficiency (both against their own peak);
  // 1 = the same. See models/README.md, FP8.
  double fp8_gemm_factor = 1;
  double attn_fwd_efficiency = 1;  // e_attn_fwd
  double attn_bwd_efficiency = 1;  // e_attn_bwd
  // Fused (flash) attention with dropout on the probabilities (model.dropout) takes this many
  // times its time without: the kernel draws a random number per score. Measured, forward and
  // backward (bench/gpu_kernels.py --only dropout); 1 = no cost. Unfused attention pays its
  // dropout as memory-bound passes over the scores instead.
  double attn_dropout_fwd_factor = 1, attn_dropout_bwd_factor = 1;
  double hbm_efficiency = 1;  // e_hbm: achievable fraction of HBM bandwidth
  // HBM accesses per byte a collective moves (a ring's received chunk written to its buffer,
  // read back, written to the output or forwarded): while a DP or ZeRO collective runs hidden
  // under compute, the compute runs that share of the achievable HBM bandwidth slower
  // (models/README.md, "Compute beside hidden collectives"). 0: no interference (cpu).
  double comm_hbm_touches = 0;
  // The fused bias-dropout-add passes (DecoderLayerDropoutAddBytes) take this many times a
  // memory-bound pass of their bytes: a random number per element costs more than its byte of
  // mask. 1 = no more (a cluster.compute.hbm_efficiency override scales them with the rest).
  double dropout_add_factor = 1;
  // training.flash_attention when a job leaves it out: on for Hopper, whose training stacks
  // all compute attention fused (TransformerEngine's fused attention under Megatron-Core and
  // NeMo, PyTorch's SDPA); off for A100, whose published runs mostly predate fused attention
  // in Megatron-LM and DeepSpeed, and for the cpu executor, whose attention is unfused.
  bool fused_attention_by_default = false;
  // cluster.variability when a job leaves it out: the GPUs' slow_fraction (models/README.md,
  // "Per-rank variability"; share fitted on the A100 rows with e_gemm), none for the cpu.
  Variability variability;

  double PeakFlops(Precision p) const {
    return p == Precision::kFp32  ? peak_fp32_flops
           : p == Precision::kFp8 ? peak_fp8_flops
                                  : peak_bf16_flops;
  }
};

const std::vector<std::string>& DeviceNames();
Expected<DeviceSpec> FindDevice(std::string_view name);

// E[max of n factors] (order statistics): for the normal, 1 + cv E[max of n standard
// normals]; for the lognormal of mean 1, E[exp(mu + sigma Z_max)] with sigma^2 = ln(1 + cv^2),
// mu = -sigma^2 / 2. Both are the integral of g(z) n phi(z) Phi(z)^(n-1) over z, evaluated
// numerically (Simpson's rule on [-12, 12], step 1e-3). 1 without variability or for n <= 1.
// slow_fraction without cv: 1 + (slowdown - 1) (1 - (1 - fraction)^n), the chance that one of
// the n is slow; with cv, x_lo + the integral of 1 - F(x)^n over [x_lo, x_hi] for the mixture's
// CDF F(x) = (1 - fraction) Phi((x - 1) / cv) + fraction Phi((x - s) / (s cv)) (Simpson,
// 24,000 steps over 12 cv beyond both modes). n <= 1 counts as one rank (its mean).
double ExpectedMaxFactor(const Variability& v, long long n);

// The network above the nodes (`fabric: {block_nodes, oversubscription}`): blocks of
// block_nodes nodes whose NICs have full bisection among themselves (a leaf switch, a
// scalable unit, a pod), joined by uplinks with 1/oversubscription of the block's NIC
// bandwidth. block_nodes 0 or oversubscription 1: non-blocking throughout (DGX SuperPOD).
// Where the NICs attach (rail-optimised or one switch per rack) only moves the blocks'
// size: NCCL keeps rings and trees on rails and sends across rails through NVLink (PXN).
struct Fabric {
  int block_nodes = 0;
  double oversubscription = 1;
};

struct ClusterConfig {
  DeviceSpec device;
  int gpus_per_node = 8;
  // NICs per node (`nics_per_node`, default gpus_per_node: DGX A100/H100 have one ConnectX
  // per GPU). Each NIC runs at inter_node.bandwidth_gb_s; with fewer NICs than GPUs the GPUs
  // of a node share them, all communicating at once: `inter` is one GPU's share.
  int nics_per_node = 0;  // 0: gpus_per_node
  int nodes = 1;
  bool nodes_given = false;  // false: ceil(world size / gpus_per_node), re-derived per layout
  Link intra;                // NVLink, per GPU per direction
  Link inter;                // InfiniBand, one GPU's share of its node's NICs, per direction
  DimOrder rank_order = kMegatronOrder;  // `rank_order: tp-cp-dp-pp`, innermost first
  // How data parallelism reduces gradients without ZeRO (`dp_reduction:`): ring all-reduce
  // (NCCL's default for large buffers), tree all-reduce, or `parameter_servers` parameter
  // servers (push gradients, pull parameters), for the comparison users ask for.
  // kAuto (default): the faster of ring and tree for each reduction's size and rank count,
  // as NCCL's tuner picks the algorithm with the lowest modelled time (src/graph/tuning.cc):
  // the ring's 2(n-1) latency steps lose to the tree's 2 ceil(log2 n) at thousands of ranks.
  enum class DpReduction { kRing, kTree, kParameterServer, kAuto };
  DpReduction dp_reduction = DpReduction::kAuto;
  int parameter_servers = 1;
  Variability variability;
  Fabric fabric;
  int world_size() const { return gpus_per_node * nodes; }
};

// `cluster:`; absent: an a100-sxm-80gb cluster just large enough for `world_size` ranks.
// Keys: device, gpus_per_node, nodes, intra_node, inter_node ({bandwidth_gb_s, latency_us,
// efficiency}), rank_order (default tp-cp-dp-pp), compute ({gemm_efficiency,
// fp8_gemm_factor, attention_forward_efficiency, attention_backward_efficiency,
// hbm_efficiency}: the
// efficiency model's constants, each in (0, 1]), variability ({distribution: normal |
// lognormal, cv: in [0, 0.25] for normal (so that a negative time stays out of reach,
// 4 sigma), [0, 1] for lognormal}), fabric ({block_nodes: >= 1, oversubscription: in
// [1, 1024]}). `nodes` defaults to ceil(world_size /
// gpus_per_node) and must hold them.
Expected<ClusterConfig> ParseClusterConfig(const YAML::Node& node, const YamlFields& fields,
                                           int world_size);

// --- Compute-efficiency model (all times in milliseconds) ---------------------------------
// Achieved fraction of peak for a GEMM of m x n x k (saturating in mnk).
double GemmEfficiency(const DeviceSpec& d, double m, double n, double k);
double GemmMs(const DeviceSpec& d, Precision p, double m, double n, double k);
// The least time of that GEMM on the roofline's memory side: its operands read and its result
// written once at the HBM rate (GemmMs never returns less).
double GemmMemoryFloorMs(const DeviceSpec& d, Precision p, double m, double n, double k);
// Attention core (QK^T, softmax, AV) given its FLOPs and the total size m*n*k of one of its
// batched matmuls (summed over heads and sequences), forward or backward. work_factor slows
// the kernels' work, not their per-kernel overhead t0 (dropout's random numbers: one per score).
double AttentionMs(const DeviceSpec& d, Precision p, double flops, double mnk, bool backward,
                   double work_factor = 1.0);
// A memory-bound pass over `bytes` of HBM traffic (read + write).
double MemoryBoundMs(const DeviceSpec& d, double bytes);
// The share of the achievable HBM bandwidth a collective takes that sends `bytes_sent` bytes
// per rank in `ms`: comm_hbm_touches x its rate / (hbm_bytes_per_s x hbm_efficiency), at most
// 1; 0 for an empty or instant collective. Compute running beside it hidden runs that much
// longer per unit of overlap (models/README.md, "Compute beside hidden collectives").
double CommHbmShare(const DeviceSpec& d, double bytes_sent, double ms);
// What the fused bias-dropout-add passes over `bytes` take beyond MemoryBoundMs of them: 0
// unless the device prices their random numbers (dropout_add_factor).
double DropoutAddExtraMs(const DeviceSpec& d, double bytes);

}  // namespace pipetwin::models
