// training.h — the job file's `training:` section and the microbatch count it implies.
//
//   training: {global_batch: 1536, micro_batch: 1, precision: bf16, optimizer: adam,
//              recompute: selective, flash_attention: false,
//              overlap: {tp_comm: false, grad_reduce: false, param_gather: false,
//                        tp_dgrad_reduce: true},
//              grad_reduce_dtype: fp32, grad_bucket_mb: 160, zero3_prefetch: 1,
//              cross_entropy: unfused, dp_sync: stale, staleness: 2,
//              master_weights: fp32, fp8_params: false, pp_scatter_gather: true}
//
//   Expected<TrainingConfig> t = ParseTrainingConfig(job.training, YamlFields{job.path});
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string_view>

#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {

// bf16/fp16: mixed precision with fp32 master weights. fp8: TransformerEngine's FP8 recipe on
// top of bf16 mixed precision: the decoder layers' GEMMs (forward, input and weight gradients)
// run on FP8 tensor cores, their inputs quantized first; everything else is bf16.
enum class Precision { kBf16, kFp16, kFp32, kFp8 };
enum class Optimizer { kAdam, kSgd, kSgdMomentum };
enum class Recompute { kNone, kSelective, kFull };  // Korthikanti et al. 2022
// Element type of the DP gradient reduction: fp32, or 16-bit in the compute type (`bf16`; a job
// that trains in fp16 may write `fp16`, the same 2 bytes: TrainingConfig::grad_reduce_name).
enum class GradReduceDtype { kFp32, kBf16 };
// How the loss runs over the logits (models/README.md, "Cross entropy"): Megatron-LM's eager
// vocabulary-parallel cross entropy (its default), or a fused one (Megatron-Core's
// --cross-entropy-loss-fusion, NeMo's default; llm-foundry's fused_crossentropy).
enum class CrossEntropy { kUnfused, kFused };

enum class Zero3Unit { kLayer, kModule };
// How many NICs ZeRO-3's gathers and reduce-scatters drive on a node they span (models/README.md,
// "ZeRO-3 at scale"): kRank, each rank its own NIC (its share of one, with fewer NICs than GPUs);
// kNode, the k NICs of the group's k ranks on the node, as every other collective; kAuto, kRank
// for zero3_unit: module (DeepSpeed's stage 3) and kNode for zero3_unit: layer (FSDP).
enum class Zero3Nics { kAuto, kRank, kNode };
// Whose pipeline engine runs the stages' sends (models/README.md, "Pipeline engines"):
// Megatron-LM's, which issues them asynchronously (the compute goes on), or DeepSpeed's
// PipelineEngine (Megatron-DeepSpeed), which waits for each send before its next instruction.
enum class PipelineEngine { kMegatron, kDeepSpeed };
// How data-parallel workers synchronise through parameter servers (models/dp_sync.h): sync
// (every worker waits for the step's update), async (no wait: pull the latest parameters),
// stale (a worker runs at most `staleness` steps ahead of the slowest).
enum class DpSync { kSync, kAsync, kStale };
// How mixed precision keeps Adam's master weights (models/README.md, "Memory"): a full fp32
// copy (Megatron-LM, Megatron-Core, DeepSpeed: 4 bytes a parameter), or only the 16 low bits
// of the fp32 value beside the bf16 weight, which holds the high 16 (Apex's
// DistributedFusedAdam with store_param_remainders, NeMo 1.0's default for bf16: 2 bytes).
enum class MasterWeights { kFp32, kRemainders };

// Communication overlapped with compute, as Megatron-Core's --tp-comm-overlap,
// --overlap-grad-reduce and --overlap-param-gather (all off by default there, and here).
struct Overlap {
  bool tp_comm = false;       // TP/SP collectives chunked under the GEMMs they feed
  bool grad_reduce = false;   // DP gradient reduction by bucket under the last backward
  bool param_gather = false;  // ZeRO 1/2 parameter all-gather under the next forward
  // The reduction of the column-parallel layers' input gradients beside their weight-gradient
  // GEMMs (Megatron-LM's asynchronous tensor-parallel all-reduce: its training script's default
  // from September 2021, Megatron-Core's ModelParallelConfig default false until 2024, always
  // on in Megatron-Core since; TransformerEngine's linear layers). Absent: what the layout
  // says, on with sequence parallelism (the code that has SP, Megatron-LM's since 2022 and
  // TransformerEngine's, overlaps the input gradient's reduce-scatter with the weight
  // gradient), off without (TrainingConfig::tp_dgrad_overlap).
  std::optional<bool> tp_dgrad_reduce;
  bool operator==(const Overlap&) const = default;
};

struct TrainingConfig {
  int global_batch = 0;  // sequences per iteration; 0 = derived from `microbatches`
  int micro_batch = 1;   // sequences per microbatch (b)
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  Recompute recompute = Recompute::kNone;
  // Fused (FlashAttention) attention: the s x s score matrices are never stored and the
  // softmax is not a separate memory-bound pass. false: the unfused attention of
  // Korthikanti et al. 2022 Table 2 (its 5as/h term). A job file that leaves it out gets
  // the device's default (job/job_file.cc: on for H100/H200, off for A100 and cpu).
  bool flash_attention = false;
  Overlap overlap;
  // Megatron-LM reduces bf16 models' gradients in fp32 (arguments.py turns on
  // accumulate_allreduce_grads_in_fp32 with --bf16): 4 bytes per element unless bf16.
  GradReduceDtype grad_reduce_dtype = GradReduceDtype::kFp32;
  // The DP gradient bucket (MB = 1e6 bytes) under overlap.grad_reduce; 0: Megatron-Core's
  // default, max(40M, 1M x dp) elements (DistributedDataParallel), at the reduction's element
  // size. Without overlap.grad_reduce Megatron-Core reduces in one bucket.
  double grad_bucket_mb = 0;
  // ZeRO-3: units (decoder layers) gathered ahead of the one computing, as FSDP's
  // BackwardPrefetch.BACKWARD_PRE default (one unit ahead); 0 gathers each unit on demand.
  int zero3_prefetch = 1;
  // ZeRO-3: what one gather fetches. kLayer: a decoder layer (FSDP wrapping each transformer
  // block); kModule: one weight matrix (QKV, attention output, fc1, fc2), as DeepSpeed's
  // stage 3 fetches each submodule's parameters: 4 gathers per layer, and only the largest
  // module (fc1) and the prefetched ones held.
  // Default kModule: `parallel.zero: 3` names DeepSpeed's ZeRO stage 3, which is what a job
  // file that says nothing more describes; FSDP jobs say `zero3_unit: layer`.
  Zero3Unit zero3_unit = Zero3Unit::kModule;
  bool zero3_unit_stated = false;  // the job file says zero3_unit (simulate's note, when not)
  // ZeRO-3: the NICs its collectives drive where the group spans nodes. kRank: one NIC per
  // rank, which is what DeepSpeed's stage 3 realised on DGX A100 nodes at 384 to 2,240 GPUs
  // (Narayanan et al. 2021, Table 2); kNode: k NICs for k ranks per node (NCCL's ring), which
  // is what FSDP realised in MosaicML's runs; kAuto (default) picks by zero3_unit.
  Zero3Nics zero3_nics = Zero3Nics::kAuto;
  // Whether ZeRO-3's collectives drive one NIC per rank (zero3_nics, resolved).
  bool zero3_one_nic_per_rank() const {
    return zero3_nics == Zero3Nics::kRank ||
           (zero3_nics == Zero3Nics::kAuto && zero3_unit == Zero3Unit::kModule);
  }
  PipelineEngine pipeline_engine = PipelineEngine::kMegatron;
  CrossEntropy cross_entropy = CrossEntropy::kUnfused;
  DpSync dp_sync = DpSync::kSync;
  int staleness = 0;  // stale only: steps a worker may run ahead of the slowest
  MasterWeights master_weights = MasterWeights::kFp32;  // remainders: bf16 or fp8 with adam
  // fp8 only: the decoder layers' GEMM weights are held in FP8 (TransformerEngine's FP8
  // primary weights: Megatron-Core's --fp8-param-gather, NeMo's fp8_params): 1 byte each, and
  // ZeRO's parameter all-gather moves them in FP8. false: they are bf16 and TransformerEngine
  // keeps a cached FP8 copy and its transpose beside each (2 bytes more). models/README.md, FP8.
  bool fp8_params = false;
  // Megatron-LM's scatter/gather of the pipeline transfer (`--scatter-gather-tensors-in-pipeline`:
  // added 2021-01-20, on by default from 2021-02-16, dropped when the p2p code moved into
  // Megatron-Core in 2023; Narayanan et al. 2021, Sec. 4.1): without sequence parallelism the
  // activation (or its gradient) is replicated over the TP ranks, so each sends only its 1/tp of
  // it and the receiving stage all-gathers the pieces over its TP group (NVLink). Absent: on
  // (TrainingConfig::pp_scatter_gather_applies). It applies only to Megatron's engine with
  // tp > 1 and no sp; DeepSpeed's PipelineEngine sends whole tensors (true is refused there).
  std::optional<bool> pp_scatter_gather;

  // Whether the DP gradient reductions wait for the rank's last backward (no
  // overlap.grad_reduce: Megatron-LM's reduction after the pipeline flush), in the simulator
  // (CostTable::reduce_after_backward) and the executor (exec::EngineOptions) alike.
  bool reduce_after_backward() const { return !overlap.grad_reduce; }
  // pp_scatter_gather, resolved: the layout sends 1/tp of each pipeline transfer and gathers
  // the rest over TP (Megatron's engine, tp > 1, no sp; on unless the job says false).
  bool pp_scatter_gather_applies(int tp, bool sp) const {
    return pipeline_engine == PipelineEngine::kMegatron && tp > 1 && !sp &&
           pp_scatter_gather.value_or(true);
  }
  // overlap.tp_dgrad_reduce, resolved: as given, else on with sequence parallelism (`sp`).
  bool tp_dgrad_overlap(bool sp) const { return overlap.tp_dgrad_reduce.value_or(sp); }

  // grad_reduce_dtype as a job file writes it: fp32, or the 16-bit compute type (fp16 or bf16).
  std::string_view grad_reduce_name() const {
    if (grad_reduce_dtype == GradReduceDtype::kFp32) return "fp32";
    return precision == Precision::kFp16 ? "fp16" : "bf16";
  }
  // Bytes of one activation / parameter / gradient element in the compute precision.
  int element_bytes() const { return precision == Precision::kFp32 ? 4 : 2; }
  bool mixed_precision() const { return precision != Precision::kFp32; }
  // Bytes of one element of the DP gradient reduction: fp32 training always reduces fp32.
  int grad_reduce_bytes() const {
    return precision == Precision::kFp32 || grad_reduce_dtype == GradReduceDtype::kFp32 ? 4 : 2;
  }
};

// Absent node: all defaults. Unknown keys and bad enum values are errors naming the file,
// the key and what is allowed.
Expected<TrainingConfig> ParseTrainingConfig(const YAML::Node& node, const YamlFields& fields);
// `{tp_comm, grad_reduce, param_gather, tp_dgrad_reduce}` (each absent: false) at `key` (for
// messages).
Expected<Overlap> ParseOverlap(const YAML::Node& node, const YamlFields& fields,
                               const std::string& key);

std::string_view ToString(Precision v);
std::string_view ToString(Optimizer v);
std::string_view ToString(Recompute v);
std::string_view ToString(GradReduceDtype v);
std::string_view ToString(DpSync v);
std::string_view ToString(CrossEntropy v);
std::string_view ToString(MasterWeights v);
std::string_view ToString(PipelineEngine v);

}  // namespace pipetwin::models
