#include "models/cpu_inventory.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/comm.h"
#include "models/param_server.h"

namespace pipetwin::models {

CpuChunkMemory PredictCpuChunkMemory(const CpuChunkShape& c) {
  constexpr std::int64_t kF = 4;  // bytes per float32 / int32
  const std::int64_t n = c.micro_batch * c.seq_len / c.cp;
  const std::int64_t r = c.sp ? n / c.tp : n;
  const std::int64_t h = c.hidden;
  const std::int64_t hl = h / c.tp;
  const std::int64_t fl = c.ffn_hidden / c.tp;
  // fc1's output, the activation's input: SwiGLU's [gate | up] is twice the MLP's width.
  const std::int64_t f1 = c.swiglu ? 2 * fl : fl;
  const std::int64_t v = c.vocab;
  // What the attention core saves beside qkv: the blocked (flash-style) attention's output and
  // log-sum-exp per row and head (cp > 1, or recompute none or full), or the probabilities
  // (selective recompute at cp 1). Selective recompute keeps neither until I, where the core's
  // forward runs again (with cp > 1 the ring's forward, K/V exchanges included).
  const bool blocked = c.cp > 1 || c.recompute != Recompute::kSelective;
  const std::int64_t probs = blocked ? n * hl + n * (c.heads / c.tp)
                                     : c.micro_batch * (c.heads / c.tp) * c.seq_len * c.seq_len;
  const std::int64_t layers = c.layers;
  // The QKV layer's output: Q of this rank's heads, K and V of its kv heads (grouped-query
  // attention: fewer). Every attention core keeps it as it is and the CP exchanges pass K and V
  // of the kv heads only.
  const std::int64_t kv_heads = c.kv_heads > 0 ? c.kv_heads : c.heads;
  const std::int64_t kvw = (kv_heads / c.tp) * (h / c.heads);
  const std::int64_t qw = hl + 2 * kvw;
  const std::int64_t core_qkv = n * qw;

  // Tied embeddings: a chunk that is first and last uses the embedding as its output layer; a
  // last chunk alone keeps a copy of it, as many elements as an untied output layer.
  const std::int64_t output = c.tied && c.first ? 0 : h * v;
  // A norm holds gamma and beta (LayerNorm) or gamma alone (RMSNorm); the linear layers' biases
  // (model.bias): QKV's and fc1's split over TP, the row-parallel ones' whole on every rank.
  const std::int64_t norm = c.rms_norm ? h : 2 * h;
  const std::int64_t col_biases = c.bias ? qw + f1 : 0;
  const std::int64_t row_biases = c.bias ? 2 * h : 0;
  const std::int64_t positions = c.rope ? 0 : c.seq_len * h;
  std::int64_t params = 0;
  if (c.first) params += v * h + positions;
  params += layers * (2 * norm + h * qw + hl * h + h * f1 + fl * h + col_biases + row_biases);
  if (c.last) params += norm + output;

  std::int64_t full = 0;
  std::int64_t pending = 0;
  const std::int64_t block_full =
      (r * h + r) + n * h + (core_qkv + probs) + n * hl + (r * h + r) + n * h + n * f1 + n * fl;
  const std::int64_t block_pending =
      (n * h + n * qw) + (n * hl + n * h) + (n * h + n * f1) + (n * fl + n * h);
  const bool selective = c.recompute == Recompute::kSelective;
  const bool recompute_full = c.recompute == Recompute::kFull;
  // What F of a block keeps under the recompute mode: everything; all but the probabilities;
  // the block's input (R rows).
  const std::int64_t block_kept = recompute_full ? r * h
                                  : selective    ? block_full - probs
                                                 : block_full;
  full += layers * block_kept;
  pending += layers * block_pending;
  if (c.first) {
    full += r;
    pending += r + r * h;
  }
  if (c.last) {
    full += (r * h + r) + r * h + r * v;
    pending += r * h + r * v;
  }

  // The order in which I keeps (+) and frees (−) saved tensors, replayed for its peak.
  std::vector<std::int64_t> events;
  if (c.last) events.push_back(-(r * h + r));
  for (std::int64_t l = 0; l < layers; ++l) {
    // Full: the forward again (everything saved, the input still held), then the input freed.
    if (recompute_full) events.insert(events.end(), {+block_full, -r * h});
    events.insert(events.end(), {+n * h, -n * f1, +n * f1, -(r * h + r), +n * h});
    if (selective) events.push_back(+probs);  // the attention core's forward again
    events.insert(events.end(), {-(core_qkv + probs), +n * qw, -(r * h + r)});
  }
  if (c.first) events.push_back(+r * h);
  std::int64_t level = 0;
  std::int64_t peak = 0;
  for (std::int64_t e : events) {
    level += e;
    peak = std::max(peak, level);
  }

  // Tensor-parallel traffic, call by call as exec/cpu issues it. Per block, F and I each
  // run two collectives around the attention and two around the MLP: all-reduces of the
  // N·h partial sums, or under SP an all-gather into and a reduce-scatter out of each
  // region. The last chunk under SP adds the loss's one-float all-reduce; once a step, SP
  // all-reduces the replicated gradients (norms, row-parallel biases, embedding, head).
  // Whole bytes per call, as the executor counts them (comm.h).
  const auto sent = [&](Collective k, std::int64_t elems) {
    return RingBytesSentPerRank(k, elems * kF, static_cast<int>(c.tp));
  };
  const std::int64_t per_pass =
      c.sp ? 2 * (sent(Collective::kAllGather, n * h) + sent(Collective::kReduceScatter, n * h))
           : 2 * sent(Collective::kAllReduceRing, n * h);
  // Full recompute runs each block's forward collectives again in I.
  std::int64_t tp_mb = layers * (recompute_full ? 3 : 2) * per_pass;
  if (c.last && c.sp) tp_mb += sent(Collective::kAllReduceRing, 1);
  std::int64_t replicated = layers * (2 * norm + row_biases);
  if (c.first) replicated += v * h + positions;
  if (c.last) replicated += norm + output;

  CpuChunkMemory m;
  m.tp_bytes_per_microbatch = tp_mb;
  // Both recompute modes run each block's attention forward (its exchanges) again in I: the
  // all-to-alls' (A − 1)/A of n × (2 hl + 2 kvw), and the ring's (cp / A − 1) K/V blocks of
  // n × 2 kvw.
  const std::int64_t passes = c.recompute != Recompute::kNone ? 1 : 0;
  const std::int64_t a = c.cp_a2a, rings = c.cp / c.cp_a2a;
  m.cp_bytes_per_microbatch = layers * (2 + passes) * (a - 1) * n * (2 * hl + 2 * kvw) / a * kF +
                              layers * (3 + passes) * (rings - 1) * n * 2 * kvw * kF;
  m.tp_bytes_per_iteration = c.sp ? sent(Collective::kAllReduceRing, replicated) : 0;
  m.params = params;
  m.param_bytes = params * kF;
  m.grad_bytes = m.param_bytes;
  m.activations_full = full * kF;
  m.activations_pending_w = pending * kF;
  m.activations_i_transient = peak * kF;
  m.boundary_bytes = r * h * kF;
  return m;
}

std::optional<ModelMismatch> ExecutorModelMismatch(const ModelConfig& m) {
  auto differs = [](std::string key, const std::string& what) {
    return ModelMismatch{std::move(key),
                         "the executor's decoder (what run and calibrate execute on every "
                         "backend, and what cluster.device cpu predicts) " +
                             what};
  };
  if (m.position == Position::kRope && (m.hidden / m.heads) % 2 != 0) {
    return differs("model.position",
                   "turns pairs of dimensions with rotary positions: the head dimension "
                   "(hidden / heads = " +
                       std::to_string(m.hidden / m.heads) +
                       ") must be even; write position: learned or change hidden or heads");
  }
  return std::nullopt;
}

Zero1Layout MakeZero1Layout(std::int64_t elements, std::int64_t ranks, std::int64_t tied_offset,
                            std::int64_t tied) {
  Zero1Layout z{.elements = elements, .ranks = ranks, .tied_offset = tied_offset, .tied = tied};
  z.tied_shard = (tied + ranks - 1) / ranks;
  z.rest_shard = (elements - tied + ranks - 1) / ranks;
  return z;
}

std::vector<Zero1Layout::Run> Zero1Layout::Runs() const {
  std::vector<Run> runs;
  const auto add = [&](std::int64_t pos, std::int64_t flat, std::int64_t length) {
    if (length > 0) runs.push_back({pos, flat, length});
  };
  const std::int64_t rest = elements - tied;
  for (std::int64_t r = 0; r < ranks; ++r) {
    const std::int64_t pos = r * shard();
    // The embedding's slice r.
    const std::int64_t e0 = std::min(tied, r * tied_shard);
    const std::int64_t e1 = std::min(tied, e0 + tied_shard);
    add(pos, tied_offset + e0, e1 - e0);
    // The rest's slice r: rest index k is flat k before the embedding, k + tied after it.
    const std::int64_t k0 = std::min(rest, r * rest_shard);
    const std::int64_t k1 = std::min(rest, k0 + rest_shard);
    const std::int64_t split = std::clamp(tied_offset, k0, k1);
    add(pos + tied_shard, k0, split - k0);
    add(pos + tied_shard + (split - k0), split + tied, k1 - split);
  }
  return runs;
}

std::optional<ModelMismatch> ExecutorTiedMismatch(const ModelConfig& m, const ParallelConfig& par,
                                                  const ClusterConfig& cluster) {
  if (!m.tied_embeddings || par.pp == 1) return std::nullopt;
  if (ParameterServerRanks(cluster, par) > 0) {
    return ModelMismatch{"model.tied_embeddings",
                         "the executor sums the tied embedding's two copies (first and last "
                         "stage) after the data-parallel reduction, and parameter servers step "
                         "the optimizer before it: with pp > 1 and cluster.dp_reduction: "
                         "parameter-server write tied_embeddings: false"};
  }
  return std::nullopt;
}

std::optional<ModelMismatch> CpuExecutorTrainingMismatch(const TrainingConfig& t) {
  auto differs = [](std::string key, const std::string& what) {
    return ModelMismatch{std::move(key),
                         "the CPU executor (run --backend cpu, and what "
                         "cluster.device cpu predicts) " +
                             what};
  };
  if (t.precision != Precision::kFp32) {
    return differs("training.precision",
                   "computes and keeps everything in float32: write precision: fp32 (the cpu "
                   "device's default; bf16 runs on --backend cuda); got " +
                       std::string(ToString(t.precision)));
  }
  if (t.master_weights != MasterWeights::kFp32) {
    return differs("training.master_weights",
                   "keeps fp32 master weights (remainders is Apex's GPU optimizer): write fp32");
  }
  if (t.grad_reduce_dtype != GradReduceDtype::kFp32) {
    return differs("training.grad_reduce_dtype",
                   "reduces its float32 gradients in float32: write grad_reduce_dtype: fp32");
  }
  if (t.overlap.tp_comm) {
    return differs("training.overlap.tp_comm",
                   "runs its tensor-parallel collectives in series with the GEMMs: write "
                   "tp_comm: false");
  }
  if (t.overlap.param_gather) {
    return differs("training.overlap.param_gather",
                   "gathers ZeRO-1's parameters inside the optimizer step: write param_gather: "
                   "false");
  }
  if (t.overlap.tp_dgrad_reduce.value_or(false)) {
    return differs("training.overlap.tp_dgrad_reduce",
                   "runs the all-reduce of its column-parallel layers' input gradients in series "
                   "with the weight-gradient GEMMs: write tp_dgrad_reduce: false, or leave it "
                   "out");
  }
  return std::nullopt;
}

}  // namespace pipetwin::models
