// costs.h — the one entry point the simulator calls: from a job's `model:`, `training:`,
// `cluster:` and `parallel:` to the time, bytes and memory of every pipeline stage.
//
//   CostInputs in{.parallel = par, .model = *FindPreset("gpt3-175b"), ...};
//   Expected<JobCosts> c = models::BuildJobCosts(in, /*num_stages=*/par.pp * 1);
//   if (!c) return c.error();                       // bad input: names file, key, allowed
//   const models::StageCost& s0 = c->stages[0];     // embedding + first layers
//   double f = s0.forward_ms;                       // one microbatch's F on one rank
//   std::int64_t act = s0.activation_bytes_per_microbatch;   // times the in-flight count
//
// A stage is a model chunk: `num_stages` = pp x chunks per rank (vpp, or 2 for V-shaped
// schedules). Layers are split evenly over the stages unless `model.layers_per_stage` lists
// them; the first stage also holds the embedding, the last the final norm, the output
// layer and the loss. Every number is for ONE rank of the stage's TP x CP group and ONE
// microbatch, except the per-iteration DP and optimizer terms.
//
// Times include the TP / SP / CP collectives on the critical path (Megatron-LM runs them on
// the compute stream between the GEMMs); the *_comm_ms fields give the exposed part for the
// step breakdown. CP's ring-attention transfers overlap the attention compute, so only the
// part longer than the compute is exposed. Under sequence parallelism the all-gather that W
// needs again overlaps W's GEMMs. ZeRO-3 gathers each layer's parameters before F and I,
// training.zero3_prefetch layers ahead. training.overlap hides parts of the TP collectives,
// the DP reduction and ZeRO's parameter gather (the *_overlapped_ms / *_hidden_ms fields);
// cluster.variability scales the compute by the expected slowest rank (straggler_factor).
#pragma once

#include <cstdint>
#include <vector>

#include "models/cluster.h"
#include "models/model.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/config.h"
#include "schedule/expected.h"

namespace pipetwin::models {

struct StageCost {  // one pipeline stage (model chunk), one microbatch, one rank
  int first_layer = 0, layers = 0;
  bool has_embedding = false, has_output = false;

  double forward_ms = 0, backward_input_ms = 0, backward_weight_ms = 0;
  double forward_tp_comm_ms = 0, backward_tp_comm_ms = 0;  // exposed TP/SP collectives
  // Of backward_tp_comm_ms, what is in backward_weight_ms, not backward_input_ms: the
  // embedding's all-gather of the output gradient under SP, which its W needs.
  double backward_weight_tp_comm_ms = 0;
  // TP/SP collective time hidden under the GEMMs (training.overlap.tp_comm); not in the times.
  double forward_tp_comm_overlapped_ms = 0, backward_tp_comm_overlapped_ms = 0;
  double forward_cp_comm_ms = 0, backward_cp_comm_ms = 0;  // exposed ring-attention transfers
  // fp8 (delayed scaling): the amax all-reduce over the stage's tp x cp x dp ranks that ends
  // each F and each I (or B); in forward_ms and backward_input_ms, exposed.
  double fp8_amax_forward_ms = 0, fp8_amax_backward_ms = 0;
  // Of backward_tp_comm_ms, what a fused B (I and W in one action) hides under its W GEMMs
  // (training.overlap.tp_dgrad_reduce); a fused B takes I + W minus this.
  double fused_backward_tp_hidden_ms = 0;
  double p2p_bytes = 0;  // activation (and, same size, gradient) sent to the next/previous stage
  // What one rank puts on the pipeline link for it: p2p_bytes, or its 1/tp under Megatron's
  // scatter/gather (training.pp_scatter_gather), whose receiver all-gathers the rest over TP.
  double p2p_send_bytes = 0;
  // One such transfer over the worst pipeline link (latency + bytes / bandwidth).
  double p2p_ms = 0;
  // The same transfer where its two pipeline ranks share a node (NVLink): what a boundary
  // that JobCosts::pp_boundary_inter marks 0 takes (sim/model_costs.cc).
  double p2p_intra_ms = 0;

  // Per iteration.
  double dp_reduce_ms = 0;     // gradient all-reduce (ZeRO 0) or reduce-scatter (ZeRO >= 1)
  double dp_reduce_bytes = 0;  // bytes one rank sends in it; 0 if dp x cp == 1
  // Part of dp_reduce_ms hidden under the stage's last backward (training.overlap.grad_reduce:
  // all buckets but the last reduce while the backward still runs); the simulator plays
  // dp_reduce_ms - dp_reduce_hidden_ms after the stage's last gradient.
  double dp_reduce_hidden_ms = 0;
  double param_allgather_ms = 0;  // ZeRO 1/2: parameters gathered after the optimizer step
  // Part of param_allgather_ms hidden under the next step's first forward
  // (training.overlap.param_gather); the rest stays in series with the optimizer step.
  double param_allgather_hidden_ms = 0;
  double embedding_sync_ms = 0;     // tied embeddings over > 1 stage: first/last grads summed
  double embedding_sync_bytes = 0;  // what this rank sends in that sum (pipeline traffic)
  // What the compute loses beside the hidden parts of dp_reduce_ms and param_allgather_ms
  // (DeviceSpec::comm_hbm_touches, CommHbmShare): the backward (or the next forward) runs
  // longer by its share of HBM times the overlap, less what the exposed remainder of the
  // collective covered; once a step, played with the optimizer step.
  double overlap_slowdown_ms = 0;
  double optimizer_ms = 0;  // memory-bound optimizer step over this rank's shard
  // training.pipeline_engine: deepspeed with bf16 and ZeRO 0: its BF16 optimizer's fp32
  // accumulation of each microbatch's gradients, memory-bound; included in backward_weight_ms.
  double grad_accum_ms = 0;
  // ZeRO 2/3 reducing in fp32: each microbatch's 16-bit gradients cast to fp32 (and, under
  // FSDP, pre-divided) before the reduce-scatter, memory-bound; included in backward_weight_ms.
  double grad_cast_ms = 0;

  // FLOPs of one microbatch of this stage, summed over its TP x CP group.
  double model_flops_per_microbatch = 0;             // Narayanan et al.: F + B, no recompute
  double hardware_flops_per_microbatch = 0;          // what runs, recompute included
  double model_flops_per_microbatch_per_device = 0;  // the above / (tp x cp)
  // The hardware FLOPs of ONE rank of the TP x CP group, by action: F, I (the input gradient,
  // with training.recompute's recomputed forward) and W (the weight gradient); a fused B runs
  // I + W. Same convention as the fields above (Narayanan et al.: every GEMM and the non-causal
  // attention core; the embedding lookup has none; the last stage's logit GEMM in each), so
  // (forward_flops + backward_input_flops + backward_weight_flops) x tp x cp equals
  // hardware_flops_per_microbatch. What calibrate divides by the measured medians (GFLOP/s).
  double forward_flops = 0, backward_input_flops = 0, backward_weight_flops = 0;

  std::int64_t params = 0;  // parameters this rank holds for the stage before ZeRO
  std::int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0, comm_buffer_bytes = 0;
  std::int64_t activation_bytes_per_microbatch = 0;  // held from F until I (or B) is done
  std::int64_t activation_bytes_pending_w = 0;       // held from I until W is done
  std::int64_t activation_transient_bytes = 0;       // recompute's working set in I
  std::int64_t tp_bytes_per_iteration = 0;           // TP bytes once a step (SP gradient sync)
  std::int64_t zero1_padded_bytes =
      0;  // CPU executor, ZeRO-1: its padded gradient/parameter buffers
  std::int64_t tp_bytes_per_microbatch = 0;            // bytes one rank sends in TP/SP collectives
  std::int64_t cp_bytes_per_microbatch = 0;            // bytes one rank sends in ring attention
  std::int64_t zero3_gather_bytes_per_microbatch = 0;  // ZeRO-3 parameter gathers (F and I)

  // ZeRO-3 / FSDP per-unit collectives (parallel.zero 3, dp x cp > 1), per microbatch. Each of
  // `units` units is gathered before its F and again before its I, and reduce-scattered after
  // its W. ZeRO-2 uses the same passes with nothing to gather: `units` gradient buckets
  // reduce-scattered after each microbatch's W. forward_ms, backward_input_ms and
  // backward_weight_ms include the part of a pass's collectives that its compute does not hide
  // (*_exposed_ms); the rest (*_hidden_ms) runs on the collective stream under the compute and is
  // in no stage time.
  struct Zero3 {
    bool applies = false;
    double units = 0;      // collectives per pass
    double gather_ms = 0;  // one unit's all-gather
    double reduce_ms = 0;  // one unit's reduce-scatter
    bool prefetch = true;  // training.zero3_prefetch >= 1: ahead on the collective stream
    // CommHbmShare of one gather and of one reduce-scatter: the compute beside them (with
    // prefetch) runs that much longer per unit of overlap; in the pass times.
    double gather_hbm_share = 0, reduce_hbm_share = 0;
    // What each pass's compute lost to them: share x min(compute, units x one); in the pass.
    double forward_slowdown_ms = 0, backward_input_slowdown_ms = 0, backward_weight_slowdown_ms = 0;
    double forward_exposed_ms = 0, backward_input_exposed_ms = 0, backward_weight_exposed_ms = 0;
    double forward_hidden_ms = 0, backward_input_hidden_ms = 0, backward_weight_hidden_ms = 0;
  } zero3;

  // Schedules with UNSHARD/RESHARD actions (torch's runtime; FSDP units are whole stages): under
  // ZeRO-3 with dp x cp > 1 the stage's parameters are all-gathered once at UNSHARD and held
  // until RESHARD; while they are held, F, I and W gather nothing, and the gradients are
  // reduce-scattered once, at REDUCE_GRAD, not in every W. Without ZeRO-3 (`applies` false)
  // UNSHARD and RESHARD cost nothing, as on torch's runtime without FSDP.
  struct Unshard {
    bool applies = false;
    double gather_ms = 0;           // one all-gather of the stage's parameters
    std::int64_t gather_bytes = 0;  // bytes one rank sends in it
    std::int64_t held_bytes = 0;    // the gathered parameters, from UNSHARD until RESHARD
    // Their gradients, unsharded (torch defers FSDP's reduction to REDUCE_GRAD): from the
    // stage's first backward until REDUCE_GRAD.
    std::int64_t held_grad_bytes = 0;
    double forward_ms = 0, backward_input_ms = 0, backward_weight_ms = 0;  // no gathers
    double reduce_ms = 0;           // one reduce-scatter of the stage's gradients
    std::int64_t reduce_bytes = 0;  // bytes one rank sends in it
  } unshard;
};

struct JobCosts {
  std::vector<StageCost> stages;                              // size num_stages, in model order
  double p2p_latency_ms = 0, p2p_bandwidth_bytes_per_ms = 0;  // worst pipeline link
  // Per pipeline boundary b (pipeline ranks b and (b + 1) mod pp): 1 where, in any replica, the
  // two sit on different nodes (the worst link above), 0 where they share one (NVLink). Empty
  // with pp 1.
  std::vector<char> pp_boundary_inter;
  double sync_ms = 0;  // all-rank reduction before the optimizer step (grad norm, inf check)
  // cluster.variability: the expected slowest of the ranks that synchronise, as a factor on
  // every stage's compute (1 without variability); already applied to the stage times.
  double straggler_factor = 1;
  // training.pipeline_engine: deepspeed. A stage's compute waits for each of its sends.
  bool blocking_sends = false;
  // Without training.overlap.grad_reduce, every reduction waits for the rank's last gradient:
  // Megatron-LM before --overlap-grad-reduce (and DeepSpeed's pipeline engine) reduce after the
  // pipeline flush, so an interleaved rank's first chunks do not reduce beside its last ones'
  // backward; pipetwin's executor does the same (exec/engine.h; sim/costs.h,
  // CostTable::reduce_after_backward).
  bool reduce_after_backward = false;
  long long straggler_ranks = 1;  // the ranks it is the maximum over
  std::int64_t hbm_bytes = 0;
  double peak_flops_per_device = 0;  // dense, in the training precision
  int world_size = 1;
  std::int64_t tokens_per_microbatch = 0;  // micro_batch x seq_len
  int micro_batch = 1;
  int microbatches = 1;
  std::int64_t total_parameters = 0;
  ModelConfig model;
  TrainingConfig training;
  ClusterConfig cluster;
  DimOrder rank_order = kMegatronOrder;
  // `cluster.device: cpu`: the memory fields follow the CPU executor's own inventory
  // (cpu_inventory.h), float32, and its communication buffers are left to the simulator,
  // which replays the executor's receive window over the program.
  bool cpu_executor = false;
};

// Everything the cost model needs, typed (job/ fills it from the resolved job). Sweeps over
// configurations edit it directly.
struct CostInputs {
  ParallelConfig parallel;
  ModelConfig model;
  TrainingConfig training;
  ClusterConfig cluster;
  int microbatches = 1;
  // Who waits for whom each step (cluster.variability): every rank with optimizer_sync, else
  // the tp x cp x dp ranks of a stage (its collectives and gradient reduction).
  bool optimizer_sync = true;
};
Expected<JobCosts> BuildJobCosts(const CostInputs& inputs, int num_stages);

// The checks of BuildJobCosts that need no schedule and take no time: the cluster holds the
// ranks, the model is valid, tp and cp divide what they shard and the layers split over
// `num_stages` (0: not known yet, e.g. a CSV schedule; not checked). ResolveJob runs them
// before it builds the schedule, so that a job both inconsistent and huge fails at once.
Status CheckCostInputs(const CostInputs& inputs, int num_stages);

// The number of layers of each stage: `model.layers_per_stage` when given (length
// num_stages, sum layers), else an even split; where layers do not divide but layers + 2 do,
// the first and last stage hold one layer fewer (Megatron-Core's split that counts the
// embedding and the loss as layers); an error otherwise.
Expected<std::vector<int>> SplitLayers(const ModelConfig& m, int num_stages);
// Whether SplitLayers splits `layers` over `num_stages` without model.layers_per_stage: an
// even split or Megatron-Core's (no allocation: plan asks it of every layout).
bool LayersSplit(int layers, int num_stages);

// The share of the non-causal attention FLOPs (4bs²h forward) that a causal attention kernel
// executes: with flash attention the key blocks of kFlashBlock tokens wholly above the
// diagonal are skipped, (n + 1) / 2n of n x n blocks; without it the whole score matrix is
// computed (1). FlashAttention-2's forward tile is 128 tokens (Dao 2023, Sec. 3.3).
inline constexpr double kFlashBlock = 128;
double CausalBlockFraction(int seq_len, bool flash_attention);
// The same share for the CPU executor (cluster.device cpu), whose attention is what it is
// whatever training.flash_attention says. Its two cores compute score blocks of at most
// kCpuAttentionBlock query and key positions and skip the key blocks after a query block's
// last position: per query block [q0, q0 + n) of a causal span, n (q0 + n) scores.
//  - unsplit (CausalSelfAttention: selective recompute at cp = 1): that over the sequence s;
//  - ring (RingAttention: every other case): the sequence cut into 2R chunks of c = s / 2R
//    (R = cp / cp_a2a ranks on the ring; 1 at cp = 1 and under Ulysses' a2a), every chunk pair
//    below the diagonal in full (R (2R − 1) of them), each diagonal pair (2R) as above over c.
// Over s² (the non-causal share; a rank's share is that over cp, the ranks being balanced).
inline constexpr int kCpuAttentionBlock = 64;  // exec/cpu: RingAttention::kBlock, kAttnBlock
double CpuAttentionFraction(int seq_len, int ring_ranks, bool unsplit);

// Bytes the loss moves per logit element (memory-bound, on the last stage), forward and
// backward, by training.cross_entropy. Unfused, Megatron-LM's eager vocabulary-parallel cross
// entropy (megatron/core/tensor_parallel/cross_entropy.py): the 16-bit logits converted to
// fp32 (read e, write 4), the max (read 4), the max subtracted in place (8), exp in place (8),
// the sum (4), the division by it in place (8), which is saved for the backward; its backward
// multiplies in place (8) and converts d(logits) back (read 4, write e): 38 and 14 bytes for
// bf16 (fp32 logits skip the conversion: 32 and 8). Fused, Megatron-Core's jit-fused version
// (megatron/core/fusions/fused_cross_entropy.py, June 2024): the conversion with the max (read
// e, write 4), the subtraction with exp and sum (8), the division (8); its backward reads the
// softmax and writes d(logits) (4 + e): 22 and 6 for bf16.
struct CrossEntropyBytes {
  double forward = 0, backward = 0;
};
CrossEntropyBytes CrossEntropyBytesPerLogit(const TrainingConfig& t);

}  // namespace pipetwin::models
