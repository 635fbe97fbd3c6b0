#include "models/costs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/comm.h"
#include "models/cpu_inventory.h"
#include "models/layer_costs.h"
#include "models/memory.h"
#include "models/param_server.h"
#include "models/yaml_util.h"

namespace pipetwin::models {
namespace {

using I64 = std::int64_t;

std::string Str(long long v) { return std::to_string(v); }

// Megatron-LM's default DDP bucket (elements) as the reduce-scatter staging buffer size.
constexpr I64 kDpBucketElements = 40'000'000;
// Megatron-Core's DistributedDataParallel grows the bucket with the DP size:
// max(40M, 1M x dp) elements (distributed_data_parallel.py).
constexpr double kDpBucketElementsPerRank = 1e6;

Status CheckSharding(const ParallelConfig& p, const ModelConfig& m) {
  auto must_divide = [&](const char* pkey, int pval, const char* mkey, long long mval) {
    return Error::BadInput(std::string("parallel.") + pkey + " (" + Str(pval) + ") must divide " +
                           mkey + " (" + Str(mval) + ")");
  };
  if (m.heads % p.tp != 0) return must_divide("tp", p.tp, "model.heads", m.heads);
  if (m.kv_heads % p.tp != 0) return must_divide("tp", p.tp, "model.kv_heads", m.kv_heads);
  if (m.ffn_hidden % p.tp != 0) return must_divide("tp", p.tp, "model.ffn_hidden", m.ffn_hidden);
  if (m.seq_len % p.cp != 0) return must_divide("cp", p.cp, "model.seq_len", m.seq_len);
  // a2a+p2p: an all-to-all level of cp_a2a ranks, a ring over the cp / cp_a2a groups.
  const bool hierarchical = p.cp > 1 && p.cp_comm == ParallelConfig::CpComm::kAllToAllP2P;
  if (hierarchical && (p.cp_a2a < 2 || p.cp_a2a >= p.cp || p.cp % p.cp_a2a != 0)) {
    return Error::BadInput("parallel.cp_a2a (" + Str(p.cp_a2a) + ") must divide parallel.cp (" +
                           Str(p.cp) +
                           ") and lie in [2, cp): the all-to-all level of cp_comm: a2a+p2p");
  }
  // Ulysses shards the heads of each TP rank over its all-to-all group (TransformerEngine
  // requires both).
  if (p.cp > 1 && (p.cp_comm == ParallelConfig::CpComm::kAllToAll || hierarchical)) {
    const int a2a = hierarchical ? p.cp_a2a : p.cp;
    const std::string what = hierarchical ? "cp_a2a" : "cp";
    for (const auto& [key, heads] :
         {std::pair{"model.heads", m.heads}, std::pair{"model.kv_heads", m.kv_heads}}) {
      if ((heads / p.tp) % a2a != 0) {
        return Error::BadInput(
            "parallel.cp_comm: " + std::string(hierarchical ? "a2a+p2p" : "a2a") +
            " splits each tensor-parallel rank's " + std::string(key) + " (" + Str(heads) +
            " / tp " + Str(p.tp) + " = " + Str(heads / p.tp) + ") over " + what + " (" + Str(a2a) +
            "), which must divide it: use cp_comm: p2p or all_gather");
      }
    }
  }
  if (p.sp && (m.seq_len / p.cp) % p.tp != 0) {
    return Error::BadInput("with parallel.sp, parallel.tp (" + Str(p.tp) +
                           ") must divide model.seq_len / parallel.cp (" + Str(m.seq_len / p.cp) +
                           ")");
  }
  return OkStatus();
}

}  // namespace

double CausalBlockFraction(int seq_len, bool flash_attention) {
  if (!flash_attention || seq_len <= 0) return 1.0;
  // n x n tiles of kFlashBlock tokens; the causal kernel runs the n(n + 1)/2 on or below
  // the diagonal (with ring attention the balanced chunks give every rank the same share).
  const double n = std::ceil(static_cast<double>(seq_len) / kFlashBlock);
  return (n + 1) / (2 * n);
}

double CpuAttentionFraction(int seq_len, int ring_ranks, bool unsplit) {
  if (seq_len <= 0 || ring_ranks <= 0) return 1.0;
  // Scores of the causal span [0, len) in blocks of at most kCpuAttentionBlock positions.
  auto causal = [](double len) {
    const double bs = std::min<double>(len, kCpuAttentionBlock);
    double scores = 0;
    for (double q0 = 0; q0 < len; q0 += bs) {
      const double n = std::min(bs, len - q0);
      scores += n * (q0 + n);
    }
    return scores;
  };
  const double s = seq_len;
  if (unsplit) return causal(s) / (s * s);
  const double r = ring_ranks, c = s / (2 * r);
  return (2 * r * causal(c) + r * (2 * r - 1) * c * c) / (s * s);
}

CrossEntropyBytes CrossEntropyBytesPerLogit(const TrainingConfig& t) {
  const double e = t.element_bytes();
  const double to_fp32 = e == 4 ? 0 : e + 4;  // .float() of the 16-bit logits (and back)
  if (t.cross_entropy == CrossEntropy::kUnfused) return {to_fp32 + 4 + 8 + 8 + 4 + 8, 8 + to_fp32};
  return {(e == 4 ? 4 : e + 4) + 8 + 8, 4 + e};
}

namespace {

// What runs outside the decoder layers' GEMMs (attention, the output layer) computes in bf16
// under fp8.
Precision NonGemmPrecision(Precision p) { return p == Precision::kFp8 ? Precision::kBf16 : p; }

// One decoder layer on one rank, one microbatch.
struct LayerTimes {
  double f = 0, i = 0, w = 0;
  double f_tp = 0, i_tp = 0, f_cp = 0, i_cp = 0;
  double f_tp_hidden = 0, i_tp_hidden = 0;  // overlap.tp_comm: hidden under the GEMMs
  double b_tp_hidden = 0;                   // overlap.tp_dgrad_reduce: of i_tp, hidden in a fused B
  double tp_bytes = 0, cp_bytes = 0;
  double cp_forward_bytes = 0;  // of cp_bytes, F's (full recompute sends them again)
};

struct Context {
  const ModelConfig& m;
  const TrainingConfig& t;
  const DeviceSpec& d;
  Sharding sh;
  Topology topo;
  GroupShape tp_group, cp_group, dp_group;  // dp_group: dp x cp (gradients reduce together)
  ParallelConfig::CpComm cp_comm;           // parallel.cp_comm
  // a2a+p2p: the all-to-all level (cp_a2a consecutive CP ranks) and the ring over the others.
  GroupShape cp_a2a_group, cp_ring_group;
  // fp8: a pipeline stage's tp x cp x dp ranks, Megatron-Core's amax reduction group (size 1
  // otherwise, and not computed).
  GroupShape amax_group;
  double e;          // element bytes
  double tokens;     // per rank
  double act_bytes;  // one full-width activation of the rank's tokens: e T h
};

// The K and V of the rank's tokens and heads: what context parallelism passes or gathers.
// The CP ranks one all-to-all spans: cp under a2a, cp_a2a under a2a+p2p, else none (1).
int CpAllToAllRanks(const ParallelConfig& p) {
  if (p.cp_comm == ParallelConfig::CpComm::kAllToAll) return p.cp;
  return p.cp_comm == ParallelConfig::CpComm::kAllToAllP2P ? p.cp_a2a : 1;
}
double CpKvBytes(const Context& c) { return c.e * c.tokens * 2 * c.m.kv_dim() / c.sh.tp; }
// The Q (and, same size, the attention's output) of the rank's tokens and heads.
double CpQBytes(const Context& c) { return c.e * c.tokens * c.m.hidden / c.sh.tp; }

// DeepSpeed-Ulysses over `g`: Q, K and V each all-to-all'd from a sequence shard to a head
// shard before the attention, its output back after it (the backward: the same four the other
// way), in series; and what one rank sends of them one way, (n - 1) / n of 2Q + K + V.
double UlyssesMs(const Context& c, const GroupShape& g) {
  auto a2a = [&](double bytes) { return CollectiveMs(Collective::kAllToAll, bytes, g, c.topo); };
  return 2 * a2a(CpQBytes(c)) + 2 * a2a(CpKvBytes(c) / 2);
}
double UlyssesBytes(const Context& c, int n) {
  return BytesSentPerRank(Collective::kAllToAll, 2 * CpQBytes(c) + CpKvBytes(c), n);
}
// Ring attention over `g`: its size - 1 steps each pass a block of `bytes`.
double RingMs(const Context& c, const GroupShape& g, double bytes) {
  return (g.size - 1) * CollectiveMs(Collective::kSendRecv, bytes, g, c.topo);
}

double Tp(const Context& c, Collective k, double bytes) {
  return CollectiveMs(k, bytes, c.tp_group, c.topo);
}
double TpSent(const Context& c, Collective k, double bytes) {
  return BytesSentPerRank(k, bytes, c.tp_group.size);
}

// overlap.tp_comm with sequence parallelism, as TransformerEngine's userbuffers run it (the
// method of each GEMM is NeMo's for H100, nemo/collections/llm/recipes/tp_overlap_configs/
// userbuffers.py; the SM counts are those configs' shares of H100's 132 SMs, used on every
// device). Each collective overlaps only the GEMM it feeds or drains:
// * all-gather, then a column-parallel GEMM (qkv and fc1 forward; the attention-output and fc2
//   input gradients): ring exchange. The GEMM runs as tp chunks of m / tp rows; chunk i starts
//   once the i-th shard has arrived (one ring step, c / (tp - 1), each; peer-to-peer copies, no
//   SMs), so what is exposed is the waiting for shards the chunks outrun.
// * a row-parallel GEMM, then a reduce-scatter (attention output and fc2 forward): pipelined in
//   4 chunks, the reduce-scatter of chunk i beside the GEMM of chunk i + 1 on SMs that the GEMM
//   gives up (24 and 16 of 132), so the GEMM runs slower by that share and the last chunk's
//   reduce-scatter is exposed.
// * the input-gradient GEMMs of qkv and fc1, then a reduce-scatter: in bulk beside the
//   weight-gradient GEMMs, on 24 and 4 SMs of theirs without a margin: it costs those GEMMs
//   that share of SMs while it runs, and what outlasts a GEMM of the same size.
// Returns the time of the pass's four GEMMs with their collectives, overlapped.
constexpr double kTpRsPipelineChunks = 4;
constexpr double kTpRsSmShareProj = 24.0 / 132, kTpRsSmShareFc2 = 16.0 / 132;
constexpr double kTpRsBulkSmShareQkv = 24.0 / 132, kTpRsBulkSmShareFc1 = 4.0 / 132;

double RingExchangeGemmMs(const Context& c, const Gemm& g, double ag_ms) {
  const double tp = c.sh.tp;
  const double chunk = GemmMs(c.d, c.t.precision, g.m / tp, g.n, g.k);
  const double step = ag_ms / (tp - 1);  // one shard over one ring step
  double t = 0;
  for (int i = 0; i < c.sh.tp; ++i) t = std::max(t, i * step) + chunk;
  return t;
}

double PipelinedReduceScatterGemmMs(const Context& c, const Gemm& g, double rs_ms, double share) {
  const double k = kTpRsPipelineChunks;
  const double chunk = GemmMs(c.d, c.t.precision, g.m / k, g.n, g.k) / (1 - share);
  double rs_end = 0;
  for (int i = 0; i < static_cast<int>(k); ++i) {
    rs_end = std::max((i + 1) * chunk, rs_end) + rs_ms / k;
  }
  return rs_end;
}

struct TpOverlapMs {
  double forward = 0, backward_input = 0;  // the four GEMMs with their collectives
};

// g: the layer's four GEMMs (DecoderLayerGemms).
TpOverlapMs UserbuffersOverlap(const Context& c, const std::vector<Gemm>& g, double ag_ms,
                               double rs_ms) {
  const Gemm &qkv = g[0], &proj = g[1], &fc1 = g[2], &fc2 = g[3];
  auto plain = [&c](const Gemm& x) { return GemmMs(c.d, c.t.precision, x.m, x.n, x.k); };
  auto bulk = [&](const Gemm& x, double share) {
    return plain(x) + rs_ms * share + std::max(0.0, rs_ms - plain(x));
  };
  TpOverlapMs t;
  t.forward = RingExchangeGemmMs(c, qkv, ag_ms) +
              PipelinedReduceScatterGemmMs(c, proj, rs_ms, kTpRsSmShareProj) +
              RingExchangeGemmMs(c, fc1, ag_ms) +
              PipelinedReduceScatterGemmMs(c, fc2, rs_ms, kTpRsSmShareFc2);
  // The input gradients: dX of proj and fc2 (k and n swapped, the same time in this model)
  // after the all-gather of their output gradients; dX of qkv and fc1 before a reduce-scatter.
  t.backward_input = RingExchangeGemmMs(c, proj, ag_ms) + RingExchangeGemmMs(c, fc2, ag_ms) +
                     bulk(qkv, kTpRsBulkSmShareQkv) + bulk(fc1, kTpRsBulkSmShareFc1);
  return t;
}

LayerTimes DecoderLayer(const Context& c) {
  LayerTimes lt;
  const Precision p = c.t.precision;
  const Precision pa = NonGemmPrecision(c.t.precision);
  // qkv, proj, fc1, fc2 and their times.
  const std::vector<Gemm> gemms = DecoderLayerGemms(c.m, c.t.micro_batch, c.sh);
  std::vector<double> gemm_ms;
  for (const Gemm& g : gemms) gemm_ms.push_back(GemmMs(c.d, p, g.m, g.n, g.k));
  const double gemm = std::accumulate(gemm_ms.begin(), gemm_ms.end(), 0.0);
  const LayerFlops fl = DecoderLayerFlops(c.m, c.t.micro_batch, c.sh);
  const double mnk = fl.attention / 4;  // each of the two batched matmuls
  // A decoder's attention is causal. Flash attention skips the key blocks above the diagonal,
  // so its kernels run the executed FLOPs only (fl.attention keeps the paper's non-causal
  // count, the MFU convention); unfused attention computes the full score matrix.
  // The CPU executor's attention skips the blocks above the diagonal, flash_attention or not
  // (CpuAttentionFraction: its unsplit core under selective recompute at cp = 1, else its
  // ring over cp / cp_a2a ranks).
  const int cp_a2a = c.cp_comm == ParallelConfig::CpComm::kAllToAll      ? c.sh.cp
                     : c.cp_comm == ParallelConfig::CpComm::kAllToAllP2P ? c.cp_a2a_group.size
                                                                         : 1;
  const double executed =
      fl.attention *
      (c.d.name == "cpu"
           ? CpuAttentionFraction(c.m.seq_len, c.sh.cp / cp_a2a,
                                  c.sh.cp == 1 && c.t.recompute == Recompute::kSelective)
           : CausalBlockFraction(c.m.seq_len, c.t.flash_attention));
  // Fused attention with dropout draws a random number per score (DeviceSpec's measured
  // factors, of kernels whose overhead t0 was negligible: they slow the work alone); unfused
  // attention pays for its dropout in DecoderLayerElementwiseBytes.
  const bool fused_dropout = c.t.flash_attention && c.m.dropout;
  const double attn_f =
      AttentionMs(c.d, pa, executed, mnk, false, fused_dropout ? c.d.attn_dropout_fwd_factor : 1.0);
  const double attn_b = AttentionMs(c.d, pa, 2 * executed, mnk, true,
                                    fused_dropout ? c.d.attn_dropout_bwd_factor : 1.0);
  const double ew_f = MemoryBoundMs(c.d, DecoderLayerElementwiseBytes(c.m, c.t, c.sh)) +
                      DropoutAddExtraMs(c.d, DecoderLayerDropoutAddBytes(c.m, c.t, c.sh));
  // fp8: each GEMM's input is quantized first, read in bf16, written in fp8 and again
  // transposed for the weight gradient (TransformerEngine keeps both); in I each output
  // gradient likewise. The weights' casts happen once a step (TE caches them).
  double cast_f = 0, cast_i = 0;
  if (c.t.precision == Precision::kFp8) {
    double in = 0, out = 0;
    for (const Gemm& g : gemms) {
      in += g.m * g.k;
      out += g.m * g.n;
    }
    cast_f = MemoryBoundMs(c.d, (c.e + 2) * in);
    cast_i = MemoryBoundMs(c.d, (c.e + 2) * out);
  }

  // Tensor (and sequence) parallel collectives: two per direction per layer.
  double tp_f = 0, tp_i = 0, tp_w = 0;
  if (c.sh.tp > 1) {
    const double a = c.act_bytes;
    if (c.sh.sp) {
      const double ag = Tp(c, Collective::kAllGather, a), rs = Tp(c, Collective::kReduceScatter, a);
      tp_f = 2 * (ag + rs);
      tp_i = 2 * (ag + rs);
      tp_w = 2 * ag;  // re-gather the sharded inputs of the column-parallel GEMMs' dW
      lt.tp_bytes =
          6 * TpSent(c, Collective::kAllGather, a) + 4 * TpSent(c, Collective::kReduceScatter, a);
    } else {
      tp_f = 2 * Tp(c, Collective::kAllReduceRing, a);
      tp_i = tp_f;
      lt.tp_bytes = 4 * TpSent(c, Collective::kAllReduceRing, a);
    }
  }
  // Context parallelism. p2p (ring attention): cp - 1 steps pass the local K and V on
  // (backward: also dK and dV), overlapped with the attention blocks. all_gather: K and V of
  // the whole sequence gathered before the attention, in series; the backward gathers them
  // again and reduce-scatters dK and dV after it. A rank sends the same 3 (cp - 1) blocks.
  double cp_f = 0, cp_b = 0;
  double cp_ring_f = 0, cp_ring_b = 0;  // a2a+p2p: its ring's transfers (cp_f, cp_b: its a2a)
  if (c.sh.cp > 1) {
    const double kv = CpKvBytes(c);
    const double steps = c.sh.cp - 1;
    switch (c.cp_comm) {
      case ParallelConfig::CpComm::kAllGather: {
        const double whole = c.sh.cp * kv;  // the nccl-tests size: the gathered K and V
        cp_f = CollectiveMs(Collective::kAllGather, whole, c.cp_group, c.topo);
        cp_b = cp_f + CollectiveMs(Collective::kReduceScatter, whole, c.cp_group, c.topo);
        lt.cp_bytes = steps * 3 * kv;
        lt.cp_forward_bytes = steps * kv;
        break;
      }
      case ParallelConfig::CpComm::kAllToAll:  // Ulysses over the CP group
        cp_f = UlyssesMs(c, c.cp_group);
        cp_b = cp_f;
        lt.cp_forward_bytes = UlyssesBytes(c, c.sh.cp);
        lt.cp_bytes = 2 * lt.cp_forward_bytes;
        break;
      case ParallelConfig::CpComm::kAllToAllP2P: {
        // Ulysses over the cp_a2a group (in series), then ring attention over the cp / cp_a2a
        // groups: each of its ranks holds s / rings tokens of heads / cp_a2a, so a block of K
        // and V is still kv bytes, passed rings - 1 times (overlapped).
        const int rings = c.cp_ring_group.size;
        cp_f = UlyssesMs(c, c.cp_a2a_group);
        cp_b = cp_f;
        cp_ring_f = RingMs(c, c.cp_ring_group, kv);
        cp_ring_b = RingMs(c, c.cp_ring_group, 2 * kv);
        const double a2a_bytes = UlyssesBytes(c, c.cp_a2a_group.size);
        lt.cp_forward_bytes = a2a_bytes + (rings - 1) * kv;
        lt.cp_bytes = 2 * a2a_bytes + (rings - 1) * 3 * kv;
        break;
      }
      case ParallelConfig::CpComm::kP2P:
        cp_f = RingMs(c, c.cp_group, kv);
        cp_b = RingMs(c, c.cp_group, 2 * kv);
        lt.cp_bytes = steps * 3 * kv;
        lt.cp_forward_bytes = steps * kv;
        break;
    }
  }
  // overlap.tp_dgrad_reduce (Megatron-LM's asynchronous TP all-reduce): the reduction of the
  // input gradients of the column-parallel GEMMs (qkv and fc1; an all-reduce, a reduce-scatter
  // under SP) runs beside their weight-gradient GEMMs, which only a fused B has at hand (a
  // split I reduces them in series). userbuffers (tp_comm) overlap them their own way; the
  // CPU executor reduces in series.
  if (c.sh.tp > 1 && !c.t.overlap.tp_comm && c.t.tp_dgrad_overlap(c.sh.sp) && c.d.name != "cpu") {
    const double red = c.sh.sp ? Tp(c, Collective::kReduceScatter, c.act_bytes)
                               : Tp(c, Collective::kAllReduceRing, c.act_bytes);
    lt.b_tp_hidden = std::min(red, gemm_ms[0]) + std::min(red, gemm_ms[2]);
  }
  // overlap.tp_comm (Megatron-Core's --tp-comm-overlap). With sequence parallelism (the only
  // way Megatron-Core offers it) TransformerEngine's userbuffers (UserbuffersOverlap above):
  // what the pass takes beyond its plain GEMMs is exposed, the rest of the collectives hidden.
  // Without it, the all-reduces split along the ring under the layer's GEMMs: only the part
  // longer than those GEMMs is exposed.
  if (c.t.overlap.tp_comm && c.sh.tp > 1) {
    double f_exposed = std::max(0.0, tp_f - gemm);
    double i_exposed = std::max(0.0, tp_i - gemm);
    if (c.sh.sp) {
      const TpOverlapMs ub =
          UserbuffersOverlap(c, gemms, Tp(c, Collective::kAllGather, c.act_bytes),
                             Tp(c, Collective::kReduceScatter, c.act_bytes));
      f_exposed = std::max(0.0, ub.forward - gemm);
      i_exposed = std::max(0.0, ub.backward_input - gemm);
    }
    lt.f_tp_hidden = std::max(0.0, tp_f - f_exposed);
    lt.i_tp_hidden = std::max(0.0, tp_i - i_exposed);
    tp_f = f_exposed;
    tp_i = i_exposed;
  }
  // The ring overlaps its transfers with the attention blocks; a gather or an all-to-all
  // must finish first (a2a+p2p: its all-to-alls in series, then its ring beside the blocks).
  const bool in_series = c.cp_comm != ParallelConfig::CpComm::kP2P;
  const double attn_f_total =
      in_series ? cp_f + std::max(attn_f, cp_ring_f) : std::max(attn_f, cp_f);
  const double attn_b_total =
      in_series ? cp_b + std::max(attn_b, cp_ring_b) : std::max(attn_b, cp_b);
  lt.f_cp = attn_f_total - attn_f;
  lt.i_cp = attn_b_total - attn_b;

  lt.f = gemm + attn_f_total + ew_f + cast_f + tp_f;
  lt.f_tp = tp_f;
  lt.i = gemm + attn_b_total + 2 * ew_f + cast_i + tp_i;
  lt.i_tp = tp_i;
  switch (c.t.recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:  // the core attention: its matmuls and the scores' passes
      // With cp > 1 the core's CP exchanges (inside the attention: Megatron-Core checkpoints
      // TransformerEngine's CP attention whole) run again with it, as under full recompute.
      lt.i += attn_f_total + MemoryBoundMs(c.d, AttentionScoresElementwiseBytes(c.m, c.t, c.sh));
      lt.i_cp += attn_f_total - attn_f;
      lt.cp_bytes += lt.cp_forward_bytes;
      break;
    case Recompute::kFull:
      lt.i += lt.f;
      lt.i_tp += tp_f;
      lt.i_tp_hidden += lt.f_tp_hidden;
      lt.i_cp += lt.f_cp;
      lt.cp_bytes += lt.cp_forward_bytes;  // the forward transfers happen twice
      if (c.sh.tp > 1) {
        lt.tp_bytes += c.sh.sp ? 2 * TpSent(c, Collective::kAllGather, c.act_bytes) +
                                     2 * TpSent(c, Collective::kReduceScatter, c.act_bytes)
                               : 2 * TpSent(c, Collective::kAllReduceRing, c.act_bytes);
      }
      break;
  }
  lt.w = std::max(gemm, tp_w);
  return lt;
}

}  // namespace

Expected<std::vector<int>> SplitLayers(const ModelConfig& m, int num_stages) {
  if (num_stages < 1) return Error::BadInput("the number of pipeline stages must be >= 1");
  if (!m.layers_per_stage.empty()) {
    const int n = static_cast<int>(m.layers_per_stage.size());
    const int sum = std::accumulate(m.layers_per_stage.begin(), m.layers_per_stage.end(), 0);
    if (n != num_stages) {
      return Error::BadInput("model.layers_per_stage: has " + Str(n) + " entries, the job has " +
                             Str(num_stages) + " pipeline stages (pp x chunks per rank)");
    }
    if (sum != m.layers) {
      return Error::BadInput("model.layers_per_stage: sums to " + Str(sum) +
                             ", must sum to model.layers (" + Str(m.layers) + ")");
    }
    return m.layers_per_stage;
  }
  if (!LayersSplit(m.layers, num_stages)) {
    return Error::BadInput(
        "model.layers (" + Str(m.layers) + ") do not split evenly over " + Str(num_stages) +
        " pipeline stages (pp x chunks per rank), nor with the first and last stage one layer "
        "fewer (layers + 2 = " +
        Str(m.layers + 2) +
        " would have to divide); give model.layers_per_stage: [...] with one count per stage");
  }
  if (m.layers % num_stages == 0) {
    return std::vector<int>(static_cast<std::size_t>(num_stages), m.layers / num_stages);
  }
  // Megatron-Core's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split: the embedding counts as a layer of the first stage
  // and the output layer with the loss as one of the last, so both hold one layer fewer
  // (Llama 3 405B's 126 layers over 16 x 8 stages: 0, 1, ..., 1, 0).
  std::vector<int> split(static_cast<std::size_t>(num_stages), (m.layers + 2) / num_stages);
  split.front() -= 1;
  split.back() -= 1;
  return split;
}

bool LayersSplit(int layers, int num_stages) {
  if (num_stages < 1) return false;
  return layers % num_stages == 0 || (num_stages >= 2 && (layers + 2) % num_stages == 0);
}

namespace {

// Phase 1: the cluster holds the job, the model and its sharding are consistent; returns the
// layers of each stage (none when num_stages is 0: not known yet).
Expected<std::vector<int>> CheckInputs(const CostInputs& in, int num_stages) {
  const ParallelConfig& par = in.parallel;
  if (in.cluster.world_size() < par.WorldSize()) {
    return Error::BadInput("cluster.nodes: " + Str(in.cluster.nodes) + " nodes x " +
                           Str(in.cluster.gpus_per_node) + " GPUs hold fewer than the job's " +
                           Str(par.WorldSize()) + " ranks (pp x dp x tp x cp)");
  }
  if (Status s = CheckModel(in.model); !s) return s.error();
  if (Status s = CheckSharding(par, in.model); !s) return s.error();
  // The cpu device is the CPU executor's machine: its decoder, its training (resolve.cc says
  // the same with the key's line; here for what prices a layout without resolving it).
  if (in.cluster.device.name == "cpu") {
    auto bad = ExecutorModelMismatch(in.model);
    if (!bad) bad = ExecutorTiedMismatch(in.model, par, in.cluster);
    if (!bad) bad = CpuExecutorTrainingMismatch(in.training);
    if (bad) return Error::BadInput(bad->key + ": " + bad->message);
  }
  if (in.training.precision == Precision::kFp8 && in.cluster.device.peak_fp8_flops <= 0) {
    return Error::BadInput(
        "training.precision: fp8 needs FP8 tensor cores (h100-sxm-80gb, "
        "h200-sxm-141gb); " +
        in.cluster.device.name + " has none: use bf16");
  }
  if (in.training.fp8_params && par.zero == 3) {
    return Error::BadInput(
        "training.fp8_params: FP8 primary weights are not sharded by ZeRO-3 (TransformerEngine "
        "supports FSDP for its cached FP8 copies only, not for FP8 weights): use parallel.zero "
        "0, 1 or 2, or fp8_params: false");
  }
  if (num_stages == 0) return std::vector<int>{};
  return SplitLayers(in.model, num_stages);
}

}  // namespace

Status CheckCostInputs(const CostInputs& inputs, int num_stages) {
  auto split = CheckInputs(inputs, num_stages);
  if (!split) return split.error();
  return OkStatus();
}

namespace {

// n equal collectives of `one` ms each, on one stream in order, beside a compute of `during` ms
// through which they become ready evenly (a reduction: the k-th after k/n of it) or by which
// they are needed evenly (a gather: the k-th before (k - 1)/n of it, the first before it
// starts): the compute and the collectives take during + PastCompute(n, one, during). The
// first or the last collective is the critical one, so what runs past the compute is
// max(one, n * one - during * (n - 1) / n), at least one collective and at most all of them
// less the compute of n - 1 pieces. The rest of the n * one is hidden.
double PastCompute(double n, double one, double during) {
  return std::max(one, n * one - during * (n - 1) / n);
}

// Phase 2: the job-wide fields, copied from the inputs or derived from them.
JobCosts JobHeader(const CostInputs& in) {
  JobCosts jc;
  jc.model = in.model;
  jc.training = in.training;
  jc.cluster = in.cluster;
  jc.microbatches = in.microbatches;
  jc.rank_order = jc.cluster.rank_order;
  jc.world_size = in.parallel.WorldSize();
  jc.hbm_bytes = jc.cluster.device.hbm_bytes;
  jc.peak_flops_per_device = jc.cluster.device.PeakFlops(jc.training.precision);
  jc.micro_batch = jc.training.micro_batch;
  jc.tokens_per_microbatch = I64{jc.training.micro_batch} * jc.model.seq_len;
  jc.total_parameters = TotalParameters(jc.model);
  return jc;
}

// Phase 3: the sharding, the topology, the worst TP, CP and DP x CP groups of the layout and
// the per-rank token and activation sizes that every later phase reads.
Context MakeContext(const JobCosts& jc, const ParallelConfig& par, const RankLayout& layout) {
  const int gpn = jc.cluster.gpus_per_node;
  Context c{jc.model,
            jc.training,
            jc.cluster.device,
            Sharding{par.tp, par.sp, par.cp},
            TopologyOf(jc.cluster),
            layout.WorstShape(Dim::kTp, gpn),
            layout.WorstShape(Dim::kCp, gpn),
            layout.WorstShape(Dim::kDp, Dim::kCp, gpn),
            par.cp_comm,
            GroupShape{},
            GroupShape{},
            GroupShape{},
            0,
            0,
            0};
  if (jc.training.precision == Precision::kFp8) {
    c.amax_group = layout.WorstShape({Dim::kTp, Dim::kCp, Dim::kDp}, gpn);
  }
  if (par.cp > 1 && par.cp_comm == ParallelConfig::CpComm::kAllToAllP2P) {
    const int a = par.cp_a2a, rings = par.cp / par.cp_a2a;
    c.cp_a2a_group = layout.WorstSubShape(Dim::kCp, a, 1, gpn);
    c.cp_ring_group = layout.WorstSubShape(Dim::kCp, rings, a, gpn);
  }
  c.e = jc.training.element_bytes();
  c.tokens = TokensPerRank(jc.model, jc.training.micro_batch, c.sh);
  c.act_bytes = c.e * c.tokens * jc.model.hidden;
  return c;
}

// Phase 4: the pipeline link (inter-node if any pair of PP neighbours sits on different
// nodes; its share of an oversubscribed fabric as a ring over the pipeline's nodes, since
// every stage sends at once) and the all-rank synchronisation before the optimizer step.
Link PipelineLink(JobCosts& jc, const RankLayout& layout, const Topology& topo) {
  const int gpn = jc.cluster.gpus_per_node;
  const bool pp_spans = layout.NeighboursSpanNodes(Dim::kPp, gpn);
  Link pp_link = jc.cluster.intra;
  if (pp_spans) {
    pp_link = jc.cluster.inter;
    pp_link.bandwidth_bytes_per_s *= FabricShare(layout.WorstShape(Dim::kPp, gpn), topo);
  }
  jc.p2p_latency_ms = 1e3 * pp_link.latency_s;
  jc.p2p_bandwidth_bytes_per_ms = pp_link.bandwidth_bytes_per_s * 1e-3;
  const int pp = layout.Size(Dim::kPp);
  jc.pp_boundary_inter.assign(pp > 1 ? static_cast<std::size_t>(pp) : 0, 0);
  for (int b = 0; pp_spans && b < pp; ++b) {
    jc.pp_boundary_inter[static_cast<std::size_t>(b)] =
        layout.PairSpansNodes(Dim::kPp, b, (b + 1) % pp, gpn) ? 1 : 0;
  }
  // The ranks fill the first nodes in order; a cluster with more nodes than the job needs
  // leaves the rest idle, and they take no part in the synchronisation.
  const int world_nodes = (jc.world_size + gpn - 1) / gpn;
  const int last_node_ranks = jc.world_size - (world_nodes - 1) * gpn;
  const GroupShape world{jc.world_size, world_nodes, last_node_ranks, world_nodes};
  jc.sync_ms = CollectiveMs(Collective::kAllReduceTree, 8, world, topo);
  return pp_link;
}

// What every stage of the job shares: one decoder layer's times, FLOPs and inventories.
struct Shared {
  const Context& c;
  const ParallelConfig& par;
  const ClusterConfig& cluster;
  Link pp_link;
  int num_stages;
  LayerTimes layer;
  double layer_recompute_fl;
  LayerFlops full_fl;  // unsharded
  double group;        // tp x cp
  ActivationInventory layer_act, emb_act, out_act;
  int n_dp;  // dp x cp: who shares (and shards, under ZeRO) the state
  double r;  // sequence sharding outside the TP region: tp under sp, else 1
  int microbatches;
};

// Computed once per job, before the stages: one decoder layer's costs and inventories.
Shared MakeShared(const Context& c, const ParallelConfig& par, const ClusterConfig& cluster,
                  const Link& pp_link, int num_stages, int microbatches) {
  const ModelConfig& m = c.m;
  const TrainingConfig& t = c.t;
  return Shared{c,
                par,
                cluster,
                pp_link,
                num_stages,
                DecoderLayer(c),
                RecomputeFlops(m, t.micro_batch, c.sh, t.recompute),
                DecoderLayerFlops(m, t.micro_batch, Sharding{}),
                static_cast<double>(par.tp) * par.cp,
                DecoderLayerActivations(m, t, c.sh),
                EmbeddingActivations(m, t, c.sh),
                OutputActivations(m, t, c.sh),
                c.dp_group.size,
                static_cast<double>(par.sp ? par.tp : 1),
                microbatches};
}

// Stage compute, first stage: the embedding lookup, its scatter-add in W and, under TP, the
// vocabulary-parallel partial rows summed over the group.
void AddEmbedding(const Shared& j, StageCost& sc, double& tp_bytes) {
  const Context& c = j.c;
  const ParallelConfig& par = j.par;
  const double h = c.m.hidden;
  double bytes = 2 * c.e * c.tokens * h;                                    // gather rows
  if (c.m.position == Position::kLearned) bytes += 3 * c.e * c.tokens * h;  // add positions
  if (c.m.dropout) bytes += (2 * c.e + 1) * c.tokens * h / j.r;
  sc.forward_ms += MemoryBoundMs(c.d, bytes);
  sc.backward_weight_ms += MemoryBoundMs(c.d, 3 * c.e * c.tokens * h);  // scatter-add
  if (par.tp > 1) {  // vocabulary-parallel lookup: partial rows are summed over tp
    const Collective k = par.sp ? Collective::kReduceScatter : Collective::kAllReduceRing;
    const double fwd = Tp(c, k, c.act_bytes);
    sc.forward_ms += fwd;
    sc.forward_tp_comm_ms += fwd;
    tp_bytes += TpSent(c, k, c.act_bytes);
    if (par.sp) {  // W needs the full output gradient back
      const double ag = Tp(c, Collective::kAllGather, c.act_bytes);
      sc.backward_weight_ms += ag;
      sc.backward_tp_comm_ms += ag;
      sc.backward_weight_tp_comm_ms += ag;
      tp_bytes += TpSent(c, Collective::kAllGather, c.act_bytes);
    }
  }
}

// Stage compute, last stage: the final norm, the output GEMM, the cross entropy and, under TP,
// the vocabulary-parallel loss's collectives.
void AddOutputHead(const Shared& j, StageCost& sc, double& tp_bytes) {
  const Context& c = j.c;
  const ParallelConfig& par = j.par;
  const Gemm g = OutputGemm(c.m, c.t.micro_batch, c.sh);
  // The output layer stays in bf16 under fp8 (TransformerEngine's recipes quantize the
  // decoder layers' GEMMs only).
  const double gemm = GemmMs(c.d, NonGemmPrecision(c.t.precision), g.m, g.n, g.k);
  const double v = g.n, h = c.m.hidden;
  const double norm = MemoryBoundMs(c.d, 2 * c.e * c.tokens * h / j.r);
  const CrossEntropyBytes ce = CrossEntropyBytesPerLogit(c.t);
  const double ce_f = MemoryBoundMs(c.d, ce.forward * c.tokens * v);
  const double ce_b = MemoryBoundMs(c.d, ce.backward * c.tokens * v);
  sc.forward_ms += norm + gemm + ce_f;
  sc.backward_input_ms += 2 * norm + gemm + ce_b;
  double w_comm = 0;
  if (par.tp > 1) {
    // Vocabulary-parallel cross entropy: max, sum-exp and target logit over tp (fp32).
    const double ce_comm = 3 * Tp(c, Collective::kAllReduceRing, 4 * c.tokens);
    tp_bytes += 3 * TpSent(c, Collective::kAllReduceRing, 4 * c.tokens);
    double fwd = ce_comm, bwd = 0;
    if (par.sp) {
      fwd += Tp(c, Collective::kAllGather, c.act_bytes);
      bwd += Tp(c, Collective::kReduceScatter, c.act_bytes);
      w_comm = Tp(c, Collective::kAllGather, c.act_bytes);
      tp_bytes += 2 * TpSent(c, Collective::kAllGather, c.act_bytes) +
                  TpSent(c, Collective::kReduceScatter, c.act_bytes);
    } else {
      bwd += Tp(c, Collective::kAllReduceRing, c.act_bytes);
      tp_bytes += TpSent(c, Collective::kAllReduceRing, c.act_bytes);
    }
    sc.forward_ms += fwd;
    sc.forward_tp_comm_ms += fwd;
    sc.backward_input_ms += bwd;
    sc.backward_tp_comm_ms += bwd;
  }
  sc.backward_weight_ms += std::max(gemm, w_comm);
}

// fp8, TransformerEngine's delayed scaling as Megatron-Core and NeMo run it: a chunk's forward
// runs inside one fp8_autocast, whose exit all-reduces (max) the amaxes of the chunk's FP8
// tensors over the amax reduction group, a stage's tp x cp x dp ranks (TE's
// FP8GlobalStateManager.reduce_and_update_fp8_tensors, async_op=False: the compute stream waits
// for it); its backward does the same once, at the end of the first FP8 module's backward.
// Per layer 4 GEMMs, each with 3 forward amaxes (input, weight, output) and 2 backward (output
// and input gradients), fp32: a latency-bound collective, the faster of NCCL's tree and ring.
// The recomputed forward of full recompute reuses the forward's scales (no reduction).
double Fp8AmaxReductionMs(const Context& c, double layers, bool forward) {
  if (c.t.precision != Precision::kFp8 || layers <= 0 || c.amax_group.size <= 1) return 0;
  const double bytes = layers * 4 * (forward ? 3 : 2) * 4;
  return std::min(CollectiveMs(Collective::kAllReduceTree, bytes, c.amax_group, c.topo),
                  CollectiveMs(Collective::kAllReduceRing, bytes, c.amax_group, c.topo));
}

// Stage phase: compute times of F, I and W with their TP/SP and CP collectives, and the bytes
// those collectives send; the decoder layers, then the embedding and the output head.
void StageCompute(const Shared& j, StageCost& sc) {
  const double L = sc.layers;
  sc.forward_ms = L * j.layer.f;
  sc.backward_input_ms = L * j.layer.i;
  sc.backward_weight_ms = L * j.layer.w;
  sc.forward_tp_comm_ms = L * j.layer.f_tp;
  sc.backward_tp_comm_ms = L * j.layer.i_tp;
  sc.forward_tp_comm_overlapped_ms = L * j.layer.f_tp_hidden;
  sc.backward_tp_comm_overlapped_ms = L * j.layer.i_tp_hidden;
  sc.fused_backward_tp_hidden_ms = L * j.layer.b_tp_hidden;
  sc.forward_cp_comm_ms = L * j.layer.f_cp;
  sc.backward_cp_comm_ms = L * j.layer.i_cp;
  sc.fp8_amax_forward_ms = Fp8AmaxReductionMs(j.c, L, true);
  sc.fp8_amax_backward_ms = Fp8AmaxReductionMs(j.c, L, false);
  sc.forward_ms += sc.fp8_amax_forward_ms;
  sc.backward_input_ms += sc.fp8_amax_backward_ms;
  double tp_bytes = L * j.layer.tp_bytes;
  if (sc.has_embedding) AddEmbedding(j, sc, tp_bytes);
  if (sc.has_output) AddOutputHead(j, sc, tp_bytes);
  sc.tp_bytes_per_microbatch = std::llround(tp_bytes);
  sc.cp_bytes_per_microbatch = std::llround(L * j.layer.cp_bytes);
}

// Stage phase: model and hardware FLOPs of one microbatch (the logits on the last stage), in
// total over the TP x CP group and, by action kind, on one of its ranks.
void StageFlops(const Shared& j, StageCost& sc) {
  const double L = sc.layers;
  const LayerFlops& fl = j.full_fl;
  // Per action, summed over the group: the layers, the recomputed forward (RecomputeFlops is
  // per rank) in I, and the logit GEMM (forward, its dX in I, its dW in W).
  double f = L * fl.F(), i = L * fl.I() + L * j.layer_recompute_fl * j.group, w = L * fl.W();
  double hw_flops = L * (fl.F() + fl.I() + fl.W()) + L * j.layer_recompute_fl * j.group;
  double model_flops = L * 3 * fl.F();
  if (sc.has_output) {
    const ModelConfig& m = j.c.m;
    const double logits_fl = 2.0 * j.c.t.micro_batch * m.seq_len * m.hidden * m.vocab;
    f += logits_fl;
    i += logits_fl;
    w += logits_fl;
    hw_flops += 3 * logits_fl;
    model_flops += 3 * logits_fl;
  }
  sc.model_flops_per_microbatch = model_flops;
  sc.hardware_flops_per_microbatch = hw_flops;
  sc.model_flops_per_microbatch_per_device = model_flops / j.group;
  sc.forward_flops = f / j.group;
  sc.backward_input_flops = i / j.group;
  sc.backward_weight_flops = w / j.group;
}

// Stage phase, memory inventory: the parameters this rank holds and the activations one
// microbatch keeps (until I, until W, and the recompute working set).
void StageActivationsAndParams(const Shared& j, StageCost& sc) {
  const ModelConfig& m = j.c.m;
  const int tp = j.par.tp;
  const double L = sc.layers;
  double act = L * j.layer_act.inflight, pending = L * j.layer_act.pending_w;
  const double transient = sc.layers > 0 ? j.layer_act.transient : 0;
  sc.params = I64{sc.layers} * DecoderLayerParamsPerRank(m, tp);
  if (sc.has_embedding) {
    act += j.emb_act.inflight;
    pending += j.emb_act.pending_w;
    sc.params += EmbeddingParamsPerRank(m, tp);
  }
  if (sc.has_output) {
    act += j.out_act.inflight;
    pending += j.out_act.pending_w;
    sc.params += OutputParamsPerRank(m, tp, j.num_stages > 1);
  }
  sc.activation_bytes_per_microbatch = std::llround(act);
  sc.activation_bytes_pending_w = std::llround(pending);
  sc.activation_transient_bytes = std::llround(transient);
}

// Stage phase, pipeline link: the stage's output activation, sequence-sharded under sp. Under
// Megatron's scatter/gather (training.pp_scatter_gather: no sp, tp > 1) each TP rank sends its
// 1/tp of the replicated activation and the receiver all-gathers it over TP before the
// consumer can run: the transfer takes both, in series (the CPU executor sends whole tensors).
void StagePipelineTransfer(const Shared& j, StageCost& sc) {
  sc.p2p_bytes = j.c.e * j.c.tokens * j.c.m.hidden / j.r;
  sc.p2p_send_bytes = sc.p2p_bytes;
  sc.p2p_ms = SendRecvMs(sc.p2p_bytes, j.pp_link);
  sc.p2p_intra_ms = SendRecvMs(sc.p2p_bytes, j.cluster.intra);
  const int tp = j.par.tp;
  if (j.num_stages > 1 && j.cluster.device.name != "cpu" &&
      j.c.t.pp_scatter_gather_applies(tp, j.par.sp)) {
    sc.p2p_send_bytes = sc.p2p_bytes / tp;
    const double gather = Tp(j.c, Collective::kAllGather, sc.p2p_bytes);
    sc.p2p_ms = SendRecvMs(sc.p2p_send_bytes, j.pp_link) + gather;
    sc.p2p_intra_ms = SendRecvMs(sc.p2p_send_bytes, j.cluster.intra) + gather;
    // The receiver's all-gathers: the activation into every stage but the first, the
    // gradient into every stage but the last.
    const int received = (sc.has_embedding ? 0 : 1) + (sc.has_output ? 0 : 1);
    sc.tp_bytes_per_microbatch +=
        std::llround(received * TpSent(j.c, Collective::kAllGather, sc.p2p_bytes));
  }
}

// Stage phase, memory inventory: the model state under ZeRO and the communication buffers
// (receive buffers for the pipeline's activation and gradient, the all-gathered input under
// sp, context parallelism's K, V, dK and dV in flight or gathered, ZeRO's reduce-scatter
// bucket and ZeRO-3's gathered parameters: the layer computing and training.zero3_prefetch
// layers ahead).
void StageStateAndBuffers(const Shared& j, StageCost& sc) {
  const ParallelConfig& par = j.par;
  const TrainingConfig& t = j.c.t;
  const StateBytes state = ModelStateBytes(sc.params, t, par.zero, j.n_dp);
  sc.param_bytes = state.params;
  if (t.precision == Precision::kFp8) {
    // The decoder layers' GEMM weights: 1 byte in FP8 with fp8_params (not under ZeRO-3); else
    // bf16, and TransformerEngine caches an FP8 copy and its transpose beside each for the
    // step's later microbatches (get_fp8_workspace, sharded like the weights under ZeRO-3).
    const I64 gemm_w = I64{sc.layers} * DecoderLayerGemmWeightsPerRank(j.c.m, par.tp);
    sc.param_bytes +=
        t.fp8_params ? -gemm_w : 2 * (par.zero == 3 ? (gemm_w + j.n_dp - 1) / j.n_dp : gemm_w);
  }
  sc.grad_bytes = state.grads;
  sc.optimizer_bytes = state.optimizer;
  const BytesPerParam bpp = StateBytesPerParam(t.precision, t.optimizer);
  double buffers = j.num_stages > 1 ? 2 * sc.p2p_bytes : 0;
  if (par.tp > 1 && par.sp) buffers += j.c.act_bytes;
  if (par.cp > 1) {  // the backward's K/V and dK/dV: two blocks each on the ring, or all gathered
    const double kv = CpKvBytes(j.c);
    switch (par.cp_comm) {
      case ParallelConfig::CpComm::kAllGather:
        buffers += 2 * kv * par.cp;
        break;
      case ParallelConfig::CpComm::kAllToAll:  // the head-sharded Q, K, V and output
        buffers += 2 * CpQBytes(j.c) + kv;
        break;
      case ParallelConfig::CpComm::kAllToAllP2P:  // both: a2a's buffers and the ring's blocks
        buffers += 2 * CpQBytes(j.c) + kv + 2 * kv * 2;
        break;
      case ParallelConfig::CpComm::kP2P:
        buffers += 2 * kv * 2;
        break;
    }
  }
  if (j.n_dp > 1 && par.zero >= 1) {
    buffers += static_cast<double>(std::min(sc.params, kDpBucketElements)) * bpp.grads;
  }
  if (j.n_dp > 1 && par.zero == 3) {  // the unit computing and the units prefetched
    buffers += (1 + t.zero3_prefetch) * static_cast<double>(Zero3UnitParams(j.c.m, t, par.tp)) *
               bpp.params;
  }
  sc.comm_buffer_bytes = std::llround(buffers);
}

// Stage phase, per iteration: the data-parallel gradient reduction, ZeRO's parameter gathers,
// the tied embeddings' gradient sum and the optimizer step over this rank's shard.
void StageDataParallel(const Shared& j, StageCost& sc) {
  const Context& c = j.c;
  const ParallelConfig& par = j.par;
  const int n_dp = j.n_dp;
  const BytesPerParam bpp = StateBytesPerParam(c.t.precision, c.t.optimizer);
  const Overlap& ov = c.t.overlap;
  // The reduction's element size (training.grad_reduce_dtype), not the gradients' in memory.
  const double grad_full = static_cast<double>(sc.params) * c.t.grad_reduce_bytes();
  // ZeRO's parameter all-gather moves the GEMM weights in FP8 with fp8_params.
  const double param_full =
      static_cast<double>(sc.params) * bpp.params -
      (c.t.fp8_params ? static_cast<double>(sc.layers) *
                            static_cast<double>(DecoderLayerGemmWeightsPerRank(c.m, par.tp))
                      : 0.0);
  // Buckets: one without overlap (Megatron-Core reduces everything at once), else
  // ceil(params / bucket) of equal size.
  const double bucket_elements =
      c.t.grad_bucket_mb > 0
          ? c.t.grad_bucket_mb * 1e6 / c.t.grad_reduce_bytes()
          : std::max(static_cast<double>(kDpBucketElements), kDpBucketElementsPerRank * n_dp);
  const bool bucketed = ov.grad_reduce || ov.param_gather;
  const double buckets =
      bucketed ? std::max(1.0, std::ceil(static_cast<double>(sc.params) / bucket_elements)) : 1.0;
  // n buckets ready (or needed) evenly through a compute of `during` ms (PastCompute): what
  // runs past the compute is exposed, the rest hidden.
  auto hidden = [&](double one, double during) {
    return buckets * one - PastCompute(buckets, one, during);
  };
  // The compute beside that hidden part runs longer by share x hidden (CommHbmShare); the
  // last bucket waits for the compute's end, so the step grows by that, less the time the
  // collectives already ran past the compute beyond their last bucket (a collective-bound
  // reduction hides the slower compute).
  auto slowdown = [&](double one, double during, double share) {
    if (share <= 0) return 0.0;
    const double hid = hidden(one, during);
    const double past_last = std::max(0.0, buckets * one - hid - one);
    return std::max(0.0, share * hid - past_last);
  };
  double reduce_slowdown = 0;
  if (n_dp > 1) {
    using DpReduction = ClusterConfig::DpReduction;
    const DpReduction how = j.cluster.dp_reduction;
    Collective k = par.zero != 0               ? Collective::kReduceScatter
                   : how == DpReduction::kTree ? Collective::kAllReduceTree
                                               : Collective::kAllReduceRing;
    const bool ps = par.zero == 0 && how == DpReduction::kParameterServer;
    // auto: the faster of ring and tree for one bucket (NCCL has no tree reduce-scatter).
    if (par.zero == 0 && how == DpReduction::kAuto &&
        CollectiveMs(Collective::kAllReduceTree, grad_full / buckets, c.dp_group, c.topo) <
            CollectiveMs(Collective::kAllReduceRing, grad_full / buckets, c.dp_group, c.topo)) {
      k = Collective::kAllReduceTree;
    }
    // Each worker pushes its gradients and pulls the parameters back.
    auto reduce_ms = [&](double bytes) {
      return ps ? ParameterServerMs(bytes, c.dp_group, j.cluster.parameter_servers, c.topo)
                : CollectiveMs(k, bytes, c.dp_group, c.topo);
    };
    const double one_bucket = reduce_ms(grad_full / buckets);
    sc.dp_reduce_ms = buckets * one_bucket;
    sc.dp_reduce_bytes = ps ? grad_full : BytesSentPerRank(k, grad_full, n_dp);
    const double reduce_share = CommHbmShare(
        c.d, ps ? grad_full / buckets : BytesSentPerRank(k, grad_full / buckets, n_dp), one_bucket);
    if (ov.grad_reduce) {
      const double during = sc.backward_input_ms + sc.backward_weight_ms;
      sc.dp_reduce_hidden_ms = hidden(one_bucket, during);
      reduce_slowdown = slowdown(one_bucket, during, reduce_share);
    }
    if (par.zero == 1 || par.zero == 2) {
      const double one =
          CollectiveMs(Collective::kAllGather, param_full / buckets, c.dp_group, c.topo);
      sc.param_allgather_ms = buckets * one;
      if (ov.param_gather) {
        sc.param_allgather_hidden_ms = hidden(one, sc.forward_ms);
        sc.overlap_slowdown_ms += slowdown(
            one, sc.forward_ms,
            CommHbmShare(c.d, BytesSentPerRank(Collective::kAllGather, param_full / buckets, n_dp),
                         one));
      }
    }
    if (par.zero == 3) {
      // Each unit (a decoder layer, or with zero3_unit: module each of its 4 weight matrices;
      // a stage without layers is one unit) is gathered before its F and again before its I,
      // and its gradients are reduce-scattered after its W, every microbatch (FSDP and
      // DeepSpeed stage 3 both reduce in each backward). With zero3_prefetch >= 1 the
      // collectives run ahead on their own stream, so a pass of compute C takes
      // max(C + c, units x c + C / units): one unit's collective that nothing hides (the
      // first gather, the last reduce-scatter) or, collective-bound, all of them and one
      // unit's compute; with 0 every one is in series with the compute (ApplyZero3Passes,
      // once the compute is final). Equal units give the exact total: the bandwidth term is
      // linear in bytes, the latency is per call. With training.zero3_nics: rank (auto's
      // choice for module units) every rank drives its own NIC where the group spans nodes,
      // not the k NICs of its k ranks on a node (models/README.md, "ZeRO-3 at scale").
      GroupShape group = c.dp_group;
      if (c.t.zero3_one_nic_per_rank()) group.ranks_per_node = 1;
      // UNSHARD/RESHARD come only from torch's FSDP runtime: its whole-stage gather drives
      // the node's NICs unless zero3_nics says rank.
      GroupShape fsdp_group = c.dp_group;
      if (c.t.zero3_nics == Zero3Nics::kRank) fsdp_group.ranks_per_node = 1;
      const double per_layer = c.t.zero3_unit == Zero3Unit::kModule ? 4 : 1;
      const double units = std::max(1.0, per_layer * sc.layers);
      sc.zero3 = {
          .applies = true,
          .units = units,
          .gather_ms = CollectiveMs(Collective::kAllGather, param_full / units, group, c.topo),
          .reduce_ms = CollectiveMs(Collective::kReduceScatter, grad_full / units, group, c.topo),
          .prefetch = c.t.zero3_prefetch >= 1};
      sc.zero3.gather_hbm_share =
          CommHbmShare(c.d, BytesSentPerRank(Collective::kAllGather, param_full / units, n_dp),
                       sc.zero3.gather_ms);
      sc.zero3.reduce_hbm_share =
          CommHbmShare(c.d, BytesSentPerRank(Collective::kReduceScatter, grad_full / units, n_dp),
                       sc.zero3.reduce_ms);
      sc.unshard = {
          .applies = true,
          .gather_ms = CollectiveMs(Collective::kAllGather, param_full, fsdp_group, c.topo),
          .gather_bytes = std::llround(BytesSentPerRank(Collective::kAllGather, param_full, n_dp)),
          .held_bytes = std::llround(param_full),
          .held_grad_bytes = sc.params * bpp.grads,
          .forward_ms = sc.forward_ms,
          .backward_input_ms = sc.backward_input_ms,
          .backward_weight_ms = sc.backward_weight_ms,
          .reduce_ms = CollectiveMs(Collective::kReduceScatter, grad_full, fsdp_group, c.topo),
          .reduce_bytes =
              std::llround(BytesSentPerRank(Collective::kReduceScatter, grad_full, n_dp))};
      sc.zero3_gather_bytes_per_microbatch =
          std::llround(2 * BytesSentPerRank(Collective::kAllGather, param_full, n_dp));
    }
    if (par.zero == 2) {
      // ZeRO-2 keeps only its shard of the gradients (DeepSpeed's stage 2, FSDP's
      // SHARD_GRAD_OP), so every microbatch's gradients are reduce-scattered after its
      // backward, not once a step: bucket by bucket beside the weight gradients with
      // overlap.grad_reduce, in one piece after them without (ApplyZero3Passes, with nothing
      // to gather).
      sc.zero3 = {.applies = true,
                  .units = buckets,
                  .gather_ms = 0,
                  .reduce_ms = one_bucket,
                  .prefetch = ov.grad_reduce};
      sc.zero3.reduce_hbm_share = reduce_share;
    }
    if (par.zero >= 2) {
      // ZeRO-2 and 3 reduce in W, per microbatch: nothing is left for the end of the step.
      sc.dp_reduce_ms = 0;
      sc.dp_reduce_hidden_ms = 0;
      sc.dp_reduce_bytes *= j.microbatches;
    } else {
      sc.overlap_slowdown_ms += reduce_slowdown;
    }
  }
  if (c.m.tied_embeddings && par.pp > 1 && (sc.has_embedding || sc.has_output)) {
    const double emb = static_cast<double>(EmbeddingParamsPerRank(c.m, par.tp)) * bpp.grads;
    sc.embedding_sync_ms = RingAllReduceMs(emb, 2, j.pp_link);
    sc.embedding_sync_bytes = emb;  // an all-reduce of two ranks: each sends its copy once
  }
  const I64 opt_params = par.zero >= 1 ? (sc.params + n_dp - 1) / n_dp : sc.params;
  sc.optimizer_ms = MemoryBoundMs(c.d, OptimizerStepBytes(opt_params, c.t));
}

// Stage phase, DeepSpeed's BF16 optimizer (training.pipeline_engine: deepspeed, precision bf16,
// ZeRO 0: what DeepSpeed runs for bf16 without its ZeRO optimizer, since 0.6.2): after every
// microbatch's backward it adds the stage's bf16 gradients into their fp32 copies, parameter
// by parameter in eager PyTorch (BF16_Optimizer.update_hp_grads: hp.add_(lp.grad.to(float32))):
// the bf16 gradient read (2 bytes), the fp32 temporary written and read (4 + 4), the fp32
// gradient read and written (4 + 4). Memory-bound, at the end of every W (or B). Megatron-LM
// fuses that accumulation into the weight-gradient GEMM; DeepSpeed's ZeRO 1/2 optimizers
// accumulate in the 16-bit gradients.
constexpr double kDeepSpeedBf16AccumBytesPerParam = 18;

void StageDeepSpeedGradAccumulation(const Shared& j, StageCost& sc) {
  const TrainingConfig& t = j.c.t;
  if (t.pipeline_engine != PipelineEngine::kDeepSpeed || t.precision != Precision::kBf16 ||
      j.par.zero != 0) {
    return;
  }
  sc.grad_accum_ms =
      MemoryBoundMs(j.c.d, kDeepSpeedBf16AccumBytesPerParam * static_cast<double>(sc.params));
  sc.backward_weight_ms += sc.grad_accum_ms;
}

// Stage phase, the per-microbatch gradient reduce-scatter of ZeRO 2/3 in fp32 over 16-bit
// gradients (parallel.zero >= 2, training.grad_reduce_dtype: fp32): every microbatch's
// unsharded gradients are produced in 16 bits by the backward's GEMMs and must be cast to fp32
// before they are reduce-scattered (read 2 bytes, write 4 per parameter). PyTorch's FSDP
// (zero: 3 with zero3_unit: layer) also divides them in place by its pre-divide factor before
// the collective (read 4, write 4: torch.distributed.fsdp _runtime_utils, _post_backward_hook's
// `flat_param.grad.to(handle._reduce_dtype)` and _reduce_grad's `_div_if_needed(
// padded_unsharded_grad, state._gradient_predivide_factor)`, a factor above 1 from 2 ranks on).
// Memory-bound, at the end of every W (or B). Megatron-LM's ZeRO 0/1 accumulates the weight
// gradients in fp32 inside the GEMM and reduces once a step, so pays neither.
constexpr double kFp32GradCastBytesPerParam = 6;
constexpr double kFsdpPredivideBytesPerParam = 8;

void StageZeroGradCast(const Shared& j, StageCost& sc) {
  const TrainingConfig& t = j.c.t;
  if (j.par.zero < 2 || t.grad_reduce_dtype != GradReduceDtype::kFp32 ||
      t.precision == Precision::kFp32 || j.par.dp * j.par.cp < 2) {
    return;
  }
  const bool fsdp = j.par.zero == 3 && t.zero3_unit == Zero3Unit::kLayer;
  const double bytes = kFp32GradCastBytesPerParam + (fsdp ? kFsdpPredivideBytesPerParam : 0);
  sc.grad_cast_ms = MemoryBoundMs(j.c.d, bytes * static_cast<double>(sc.params));
  sc.backward_weight_ms += sc.grad_cast_ms;
}

// Phase 5: every stage, in model order, through the stage phases above.
std::vector<StageCost> BuildStages(const Shared& j, const std::vector<int>& split) {
  std::vector<StageCost> stages;
  int first_layer = 0;
  for (int s = 0; s < j.num_stages; ++s) {
    StageCost sc;
    sc.first_layer = first_layer;
    sc.layers = split[static_cast<std::size_t>(s)];
    first_layer += sc.layers;
    sc.has_embedding = s == 0;
    sc.has_output = s == j.num_stages - 1;
    StageCompute(j, sc);
    StageFlops(j, sc);
    StageActivationsAndParams(j, sc);
    StagePipelineTransfer(j, sc);
    StageStateAndBuffers(j, sc);
    StageDataParallel(j, sc);
    StageDeepSpeedGradAccumulation(j, sc);
    StageZeroGradCast(j, sc);
    stages.push_back(sc);
  }
  return stages;
}

// Phase 6, `cluster.device: cpu`: the CPU executor's own tensors (float32; Adam keeps 2 floats
// per parameter, SGD with momentum 1, plain SGD none) and traffic, so that predicted memory
// and bytes equal what it allocates and counts.
void ApplyCpuExecutor(JobCosts& jc, const ParallelConfig& par, const std::vector<int>& split) {
  const ModelConfig& m = jc.model;
  const TrainingConfig& t = jc.training;
  const int num_stages = static_cast<int>(jc.stages.size());
  jc.cpu_executor = true;
  for (int s = 0; s < num_stages; ++s) {
    StageCost& sc = jc.stages[static_cast<std::size_t>(s)];
    const int layers = split[static_cast<std::size_t>(s)];
    const CpuChunkMemory cm = PredictCpuChunkMemory({.micro_batch = t.micro_batch,
                                                     .seq_len = m.seq_len,
                                                     .hidden = m.hidden,
                                                     .ffn_hidden = m.ffn_hidden,
                                                     .heads = m.heads,
                                                     .vocab = m.vocab,
                                                     .layers = layers,
                                                     .first = s == 0,
                                                     .last = s == num_stages - 1,
                                                     .tp = par.tp,
                                                     .sp = par.sp,
                                                     .cp = par.cp,
                                                     .cp_a2a = CpAllToAllRanks(par),
                                                     .recompute = t.recompute,
                                                     .tied = m.tied_embeddings,
                                                     .bias = m.bias,
                                                     .rms_norm = m.norm == Norm::kRmsNorm,
                                                     .rope = m.position == Position::kRope,
                                                     .swiglu = m.mlp == Mlp::kSwiglu,
                                                     .kv_heads = m.kv_heads});
    sc.params = cm.params;
    // The gradients are reduced over dp x cp together (as Megatron does): every CP rank holds
    // the gradients of its share of the sequence. ZeRO-1 on the CPU executor: the optimizer
    // state of one rank's block of the stage (Zero1Layout: a copy of the tied embedding is
    // sharded apart from the rest).
    const int n_dp = par.dp * par.cp;
    const bool zero1 = par.zero == 1 && n_dp > 1;
    const bool tied_copy = m.tied_embeddings && num_stages > 1 && (s == 0 || s == num_stages - 1);
    const I64 embedding = static_cast<I64>(m.vocab) * m.hidden;
    const Zero1Layout z = MakeZero1Layout(cm.params, n_dp, 0, tied_copy ? embedding : 0);
    if (sc.embedding_sync_bytes > 0) {
      // The executor's embedding is replicated over TP, without position embeddings in the
      // sum: each copy of the first and last stage sends its vocab x hidden float32 gradients,
      // under ZeRO-1 its rank's slice of them (exec/cpu/cpu_backend.h); the time scales with
      // the bytes.
      const double bytes = static_cast<double>(zero1 ? z.tied_shard : embedding) * 4;
      sc.embedding_sync_ms *= bytes / sc.embedding_sync_bytes;
      sc.embedding_sync_bytes = bytes;
    }
    sc.param_bytes = cm.param_bytes;
    sc.grad_bytes = cm.grad_bytes;
    const I64 per_param = t.optimizer == Optimizer::kAdam          ? 8
                          : t.optimizer == Optimizer::kSgdMomentum ? 4
                                                                   : 0;
    // Parameter servers (models/param_server.h) hold the optimizer state: the workers none.
    const bool ps = UsesParameterServers(jc.cluster, par);
    sc.optimizer_bytes = ps ? 0 : (zero1 ? z.shard() : cm.params) * per_param;
    sc.zero1_padded_bytes = zero1 ? z.padded() * 4 : 0;
    sc.activation_bytes_per_microbatch = cm.activations_full;
    sc.activation_bytes_pending_w = cm.activations_pending_w;
    sc.activation_transient_bytes = cm.activations_i_transient;
    sc.p2p_bytes = static_cast<double>(cm.boundary_bytes);
    sc.p2p_send_bytes = sc.p2p_bytes;
    sc.comm_buffer_bytes = 0;
    sc.tp_bytes_per_microbatch = cm.tp_bytes_per_microbatch;
    sc.tp_bytes_per_iteration = cm.tp_bytes_per_iteration;
    sc.cp_bytes_per_microbatch = cm.cp_bytes_per_microbatch;
    // Its data-parallel reduction: a ring all-reduce of the float32 gradients. ZeRO-1: a
    // reduce-scatter of the padded gradients and, after the step, an all-gather of the padded
    // parameters. Whole bytes call by call, as the executor counts them. Parameter servers:
    // each worker pushes its float32 gradients once (its shards over the servers sum to them).
    const I64 dp_bytes =
        ps      ? cm.grad_bytes
        : zero1 ? RingBytesSentPerRank(Collective::kReduceScatter, sc.zero1_padded_bytes, n_dp) +
                      RingBytesSentPerRank(Collective::kAllGather, sc.zero1_padded_bytes, n_dp)
                : RingBytesSentPerRank(Collective::kAllReduceRing, cm.grad_bytes, n_dp);
    sc.dp_reduce_bytes = static_cast<double>(dp_bytes);
  }
}

// Phase 7, cluster.variability: each step waits for the slowest of the ranks that synchronise
// in it, so every stage's compute (not its exposed communication) runs E[max] times longer.
void ApplyVariability(JobCosts& jc, const CostInputs& in) {
  const ParallelConfig& p = in.parallel;
  jc.straggler_ranks =
      in.optimizer_sync ? jc.world_size : static_cast<long long>(p.tp) * p.cp * p.dp;
  jc.straggler_factor = ExpectedMaxFactor(jc.cluster.variability, jc.straggler_ranks);
  if (jc.straggler_factor == 1) return;
  const double k = jc.straggler_factor;
  for (StageCost& sc : jc.stages) {
    const double f_comm = sc.forward_tp_comm_ms + sc.forward_cp_comm_ms + sc.fp8_amax_forward_ms;
    const double w_comm = sc.backward_weight_tp_comm_ms;
    const double i_comm =
        sc.backward_tp_comm_ms - w_comm + sc.backward_cp_comm_ms + sc.fp8_amax_backward_ms;
    sc.forward_ms = (sc.forward_ms - f_comm) * k + f_comm;
    sc.backward_input_ms = (sc.backward_input_ms - i_comm) * k + i_comm;
    sc.backward_weight_ms = (sc.backward_weight_ms - w_comm) * k + w_comm;
    sc.unshard.forward_ms = (sc.unshard.forward_ms - f_comm) * k + f_comm;
    sc.unshard.backward_input_ms = (sc.unshard.backward_input_ms - i_comm) * k + i_comm;
    sc.unshard.backward_weight_ms = (sc.unshard.backward_weight_ms - w_comm) * k + w_comm;
  }
}

// Phase 8, ZeRO-3's per-unit collectives against the final compute (after ApplyVariability,
// whose factor scales compute, not communication). With prefetch a pass of compute c beside
// u units' collectives of t each takes c + PastCompute(u, t, c) = max(c + t, u t + c / u):
// at least one unit's collective that nothing hides (the first gather, the last
// reduce-scatter), and where the collectives are the longer, all of them and one unit's
// compute; without prefetch, every collective is in series. What the pass adds to the
// compute is exposed; the rest of the collectives' time is hidden under it.
void ApplyZero3Passes(JobCosts& jc) {
  for (StageCost& sc : jc.stages) {
    StageCost::Zero3& z = sc.zero3;
    if (!z.applies) continue;
    // With prefetch the compute runs beside the collectives for as long as they are hidden
    // under it, all - PastCompute(units, one, compute) (none with one unit: its collective
    // waits for the whole compute, or the compute for it), and loses the collectives' share
    // of HBM for that long (CommHbmShare): slowed, it may still end before them.
    auto pass = [&z](double& ms, double one, double share, double& exposed, double& hidden,
                     double& slowdown) {
      const double all = z.units * one;
      slowdown = z.prefetch ? share * (all - PastCompute(z.units, one, ms)) : 0.0;
      const double compute = ms + slowdown;
      const double total = z.prefetch ? compute + PastCompute(z.units, one, compute) : ms + all;
      exposed = total - compute;
      hidden = std::max(0.0, all - exposed);
      ms = total;
    };
    pass(sc.forward_ms, z.gather_ms, z.gather_hbm_share, z.forward_exposed_ms, z.forward_hidden_ms,
         z.forward_slowdown_ms);
    pass(sc.backward_input_ms, z.gather_ms, z.gather_hbm_share, z.backward_input_exposed_ms,
         z.backward_input_hidden_ms, z.backward_input_slowdown_ms);
    // A fused B hides its TP reductions under W's GEMMs (fused_backward_tp_hidden_ms): that
    // shortens W's compute, which the W pass then takes; where the reduce-scatters are the
    // longer, W's compute is hidden under them already and the fused B gains less (1/units of
    // it). So the fused B's saving is the W pass with its full compute less the W pass with
    // the shortened one, and a faster W never lengthens the step.
    const double w = sc.backward_weight_ms;
    const double fused_hidden = sc.fused_backward_tp_hidden_ms;
    pass(sc.backward_weight_ms, z.reduce_ms, z.reduce_hbm_share, z.backward_weight_exposed_ms,
         z.backward_weight_hidden_ms, z.backward_weight_slowdown_ms);
    if (fused_hidden > 0) {
      double w_fused = w - fused_hidden, exposed = 0, hidden = 0, slowdown = 0;
      pass(w_fused, z.reduce_ms, z.reduce_hbm_share, exposed, hidden, slowdown);
      sc.fused_backward_tp_hidden_ms = sc.backward_weight_ms - w_fused;
    }
  }
}

}  // namespace

// The phases in order; each is a function above.
Expected<JobCosts> BuildJobCosts(const CostInputs& in, int num_stages) {
  Expected<std::vector<int>> split = CheckInputs(in, num_stages);
  if (!split) return split.error();
  JobCosts jc = JobHeader(in);
  const RankLayout layout(in.parallel, jc.cluster.rank_order);
  const Context c = MakeContext(jc, in.parallel, layout);
  const Link pp_link = PipelineLink(jc, layout, c.topo);
  jc.stages = BuildStages(
      MakeShared(c, in.parallel, jc.cluster, pp_link, num_stages, in.microbatches), *split);
  ApplyVariability(jc, in);
  ApplyZero3Passes(jc);
  jc.blocking_sends = in.training.pipeline_engine == PipelineEngine::kDeepSpeed;
  jc.reduce_after_backward = in.training.reduce_after_backward();
  if (jc.cluster.device.name == "cpu") ApplyCpuExecutor(jc, in.parallel, *split);
  return jc;
}

}  // namespace pipetwin::models
