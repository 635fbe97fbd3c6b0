#include "models/costs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/comm.h"
#include "models/cpu_inventory.h"
#include "models/layer_costs.h"
#include "models/memory.h"
#include "models/yaml_util.h"

namespace pipetwin::models {
namespace {

using I64 = std::int64_t;

std::string Str(long long v) { return std::to_string(v); }

// Megatron-LM's default DDP bucket (elements) as the reduce-scatter staging buffer size.
constexpr I64 kDpBucketElements = 40'000'000;

Status CheckSharding(const ParallelConfig& p, const ModelConfig& m) {
  auto must_divide = [&](const char* pkey, int pval, const char* mkey, long long mval) {
    return Error::BadInput(std::string("parallel.") + pkey + " (" + Str(pval) + ") must divide " +
                           mkey + " (" + Str(mval) + ")");
  };
  if (m.heads % p.tp != 0) return must_divide("tp", p.tp, "model.heads", m.heads);
  if (m.kv_heads % p.tp != 0) return must_divide("tp", p.tp, "model.kv_heads", m.kv_heads);
  if (m.ffn_hidden % p.tp != 0) return must_divide("tp", p.tp, "model.ffn_hidden", m.ffn_hidden);
  if (m.seq_len % p.cp != 0) return must_divide("cp", p.cp, "model.seq_len", m.seq_len);
  if (p.sp && (m.seq_len / p.cp) % p.tp != 0) {
    return Error::BadInput("with parallel.sp, parallel.tp (" + Str(p.tp) +
                           ") must divide model.seq_len / parallel.cp (" + Str(m.seq_len / p.cp) +
                           ")");
  }
  return OkStatus();
}

// One decoder layer on one rank, one microbatch.
struct LayerTimes {
  double f = 0, i = 0, w = 0;
  double f_tp = 0, i_tp = 0, f_cp = 0, i_cp = 0;
  double tp_bytes = 0, cp_bytes = 0;
};

struct Context {
  const ModelConfig& m;
  const TrainingConfig& t;
  const DeviceSpec& d;
  Sharding sh;
  Topology topo;
  GroupShape tp_group, cp_group, dp_group;  // dp_group: dp x cp (gradients reduce together)
  double e;                                 // element bytes
  double tokens;                            // per rank
  double act_bytes;                         // one full-width activation of the rank's tokens: e T h
};

double Tp(const Context& c, Collective k, double bytes) {
  return CollectiveMs(k, bytes, c.tp_group, c.topo);
}
double TpSent(const Context& c, Collective k, double bytes) {
  return BytesSentPerRank(k, bytes, c.tp_group.size);
}

LayerTimes DecoderLayer(const Context& c) {
  LayerTimes lt;
  const Precision p = c.t.precision;
  double gemm = 0;
  for (const Gemm& g : DecoderLayerGemms(c.m, c.t.micro_batch, c.sh)) {
    gemm += GemmMs(c.d, p, g.m, g.n, g.k);
  }
  const LayerFlops fl = DecoderLayerFlops(c.m, c.t.micro_batch, c.sh);
  const double mnk = fl.attention / 4;  // each of the two batched matmuls
  const double attn_f = AttentionMs(c.d, p, fl.attention, mnk, false);
  const double attn_b = AttentionMs(c.d, p, 2 * fl.attention, mnk, true);
  const double ew_f = MemoryBoundMs(c.d, DecoderLayerElementwiseBytes(c.m, c.t, c.sh));

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
  // Ring attention: cp - 1 steps pass the local K and V on (backward: also dK and dV),
  // overlapped with the attention blocks.
  double cp_f = 0, cp_b = 0;
  if (c.sh.cp > 1) {
    const double kv = c.e * c.tokens * 2 * c.m.kv_dim() / c.sh.tp;
    const double steps = c.sh.cp - 1;
    cp_f = steps * CollectiveMs(Collective::kSendRecv, kv, c.cp_group, c.topo);
    cp_b = steps * CollectiveMs(Collective::kSendRecv, 2 * kv, c.cp_group, c.topo);
    lt.cp_bytes = steps * 3 * kv;
  }
  const double attn_f_total = std::max(attn_f, cp_f);
  const double attn_b_total = std::max(attn_b, cp_b);
  lt.f_cp = attn_f_total - attn_f;
  lt.i_cp = attn_b_total - attn_b;

  lt.f = gemm + attn_f_total + ew_f + tp_f;
  lt.f_tp = tp_f;
  lt.i = gemm + attn_b_total + 2 * ew_f + tp_i;
  lt.i_tp = tp_i;
  switch (c.t.recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      lt.i += attn_f_total;
      lt.i_cp += attn_f_total - attn_f;
      break;
    case Recompute::kFull:
      lt.i += lt.f;
      lt.i_tp += tp_f;
      lt.i_cp += lt.f_cp;
      if (c.sh.cp > 1) lt.cp_bytes *= 4.0 / 3.0;  // the forward transfers happen twice
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
  if (m.layers % num_stages != 0) {
    return Error::BadInput("model.layers (" + Str(m.layers) + ") do not split evenly over " +
                           Str(num_stages) +
                           " pipeline stages (pp x chunks per rank); give "
                           "model.layers_per_stage: [...] with one count per stage");
  }
  return std::vector<int>(static_cast<std::size_t>(num_stages), m.layers / num_stages);
}

Expected<JobCosts> BuildJobCosts(const CostInputs& in, int num_stages) {
  const ParallelConfig& par = in.parallel;
  JobCosts jc;
  jc.model = in.model;
  jc.training = in.training;
  jc.cluster = in.cluster;
  jc.microbatches = in.microbatches;
  if (jc.cluster.world_size() < par.WorldSize()) {
    return Error::BadInput("cluster.nodes: " + Str(jc.cluster.nodes) + " nodes x " +
                           Str(jc.cluster.gpus_per_node) + " GPUs hold fewer than the job's " +
                           Str(par.WorldSize()) + " ranks (pp x dp x tp x cp)");
  }
  if (Status s = CheckModel(jc.model); !s) return s.error();
  if (Status s = CheckSharding(par, jc.model); !s) return s.error();
  Expected<std::vector<int>> split = SplitLayers(jc.model, num_stages);
  if (!split) return split.error();

  const ModelConfig& m = jc.model;
  const TrainingConfig& t = jc.training;
  const DeviceSpec& dev = jc.cluster.device;
  const int gpn = jc.cluster.gpus_per_node;
  const RankLayout layout(par, jc.cluster.rank_order);

  jc.rank_order = jc.cluster.rank_order;
  jc.world_size = par.WorldSize();
  jc.hbm_bytes = dev.hbm_bytes;
  jc.peak_flops_per_device = dev.PeakFlops(t.precision);
  jc.micro_batch = t.micro_batch;
  jc.tokens_per_microbatch = I64{t.micro_batch} * m.seq_len;
  jc.total_parameters = TotalParameters(m);

  Context c{m,
            t,
            dev,
            Sharding{par.tp, par.sp, par.cp},
            Topology{jc.cluster.intra, jc.cluster.inter},
            layout.WorstShape(Dim::kTp, gpn),
            layout.WorstShape(Dim::kCp, gpn),
            layout.WorstShape(Dim::kDp, Dim::kCp, gpn),
            0,
            0,
            0};
  c.e = t.element_bytes();
  c.tokens = TokensPerRank(m, t.micro_batch, c.sh);
  c.act_bytes = c.e * c.tokens * m.hidden;

  // Pipeline link: inter-node if any pair of PP neighbours sits on different nodes.
  const bool pp_spans = layout.NeighboursSpanNodes(Dim::kPp, gpn);
  const Link pp_link = pp_spans ? jc.cluster.inter : jc.cluster.intra;
  jc.p2p_latency_ms = 1e3 * pp_link.latency_s;
  jc.p2p_bandwidth_bytes_per_ms = pp_link.bandwidth_bytes_per_s * 1e-3;
  {
    const GroupShape world{jc.world_size, jc.cluster.nodes, std::min(gpn, jc.world_size)};
    jc.sync_ms = CollectiveMs(Collective::kAllReduceTree, 8, world, c.topo);
  }

  const LayerTimes layer = DecoderLayer(c);
  const double layer_recompute_fl = RecomputeFlops(m, t.micro_batch, c.sh, t.recompute);
  const LayerFlops full_fl = DecoderLayerFlops(m, t.micro_batch, Sharding{});
  const double group = static_cast<double>(par.tp) * par.cp;
  const ActivationInventory layer_act = DecoderLayerActivations(m, t, c.sh);
  const ActivationInventory emb_act = EmbeddingActivations(m, t, c.sh);
  const ActivationInventory out_act = OutputActivations(m, t, c.sh);
  const int n_dp = c.dp_group.size;  // dp x cp: who shares (and shards, under ZeRO) the state
  const double r = par.sp ? par.tp : 1;
  const Precision prec = t.precision;

  int first_layer = 0;
  for (int s = 0; s < num_stages; ++s) {
    StageCost sc;
    sc.first_layer = first_layer;
    sc.layers = (*split)[static_cast<std::size_t>(s)];
    first_layer += sc.layers;
    sc.has_embedding = s == 0;
    sc.has_output = s == num_stages - 1;
    const double L = sc.layers;

    sc.forward_ms = L * layer.f;
    sc.backward_input_ms = L * layer.i;
    sc.backward_weight_ms = L * layer.w;
    sc.forward_tp_comm_ms = L * layer.f_tp;
    sc.backward_tp_comm_ms = L * layer.i_tp;
    sc.forward_cp_comm_ms = L * layer.f_cp;
    sc.backward_cp_comm_ms = L * layer.i_cp;
    double tp_bytes = L * layer.tp_bytes;
    const double cp_bytes = L * layer.cp_bytes;

    double act = L * layer_act.inflight, pending = L * layer_act.pending_w;
    double transient = sc.layers > 0 ? layer_act.transient : 0;
    double hw_flops =
        L * (full_fl.F() + full_fl.I() + full_fl.W()) + L * layer_recompute_fl * group;
    double model_flops = L * 3 * full_fl.F();
    sc.params = I64{sc.layers} * DecoderLayerParamsPerRank(m, par.tp);

    if (sc.has_embedding) {
      const double h = m.hidden;
      double bytes = 2 * c.e * c.tokens * h;                                  // gather rows
      if (m.position == Position::kLearned) bytes += 3 * c.e * c.tokens * h;  // add positions
      if (m.dropout) bytes += (2 * c.e + 1) * c.tokens * h / r;
      sc.forward_ms += MemoryBoundMs(dev, bytes);
      sc.backward_weight_ms += MemoryBoundMs(dev, 3 * c.e * c.tokens * h);  // scatter-add
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
          tp_bytes += TpSent(c, Collective::kAllGather, c.act_bytes);
        }
      }
      act += emb_act.inflight;
      pending += emb_act.pending_w;
      sc.params += EmbeddingParamsPerRank(m, par.tp);
    }
    if (sc.has_output) {
      const Gemm g = OutputGemm(m, t.micro_batch, c.sh);
      const double gemm = GemmMs(dev, prec, g.m, g.n, g.k);
      const double v = g.n, h = m.hidden;
      const double norm = MemoryBoundMs(dev, 2 * c.e * c.tokens * h / r);
      // Cross entropy: write fp32 logits, max / exp / sum passes; backward writes d(logits).
      const double ce_f = MemoryBoundMs(dev, (c.e + 3 * 4) * c.tokens * v);
      const double ce_b = MemoryBoundMs(dev, (4 + c.e) * c.tokens * v);
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
      act += out_act.inflight;
      pending += out_act.pending_w;
      const double logits_fl = 2.0 * t.micro_batch * m.seq_len * m.hidden * m.vocab;
      hw_flops += 3 * logits_fl;
      model_flops += 3 * logits_fl;
      sc.params += OutputParamsPerRank(m, par.tp, num_stages > 1);
    }
    sc.tp_bytes_per_microbatch = std::llround(tp_bytes);
    sc.cp_bytes_per_microbatch = std::llround(cp_bytes);
    sc.activation_bytes_per_microbatch = std::llround(act);
    sc.activation_bytes_pending_w = std::llround(pending);
    sc.activation_transient_bytes = std::llround(transient);
    sc.model_flops_per_microbatch = model_flops;
    sc.hardware_flops_per_microbatch = hw_flops;
    sc.model_flops_per_microbatch_per_device = model_flops / group;

    // Pipeline transfer: the stage's output activation, sequence-sharded under sp.
    sc.p2p_bytes = c.e * c.tokens * m.hidden / r;
    sc.p2p_ms = SendRecvMs(sc.p2p_bytes, pp_link);

    // Model state and its data-parallel reduction.
    const StateBytes state = ModelStateBytes(sc.params, t, par.zero, n_dp);
    sc.param_bytes = state.params;
    sc.grad_bytes = state.grads;
    sc.optimizer_bytes = state.optimizer;
    const BytesPerParam bpp = StateBytesPerParam(t.precision, t.optimizer);
    const double grad_full = static_cast<double>(sc.params) * bpp.grads;
    const double param_full = static_cast<double>(sc.params) * bpp.params;
    if (n_dp > 1) {
      using DpReduction = ClusterConfig::DpReduction;
      const DpReduction how = jc.cluster.dp_reduction;
      const Collective k = par.zero != 0               ? Collective::kReduceScatter
                           : how == DpReduction::kTree ? Collective::kAllReduceTree
                                                       : Collective::kAllReduceRing;
      if (par.zero == 0 && how == DpReduction::kParameterServer) {
        // Each worker pushes its gradients and pulls the parameters back.
        sc.dp_reduce_ms =
            ParameterServerMs(grad_full, c.dp_group, jc.cluster.parameter_servers, c.topo);
        sc.dp_reduce_bytes = grad_full;
      } else {
        sc.dp_reduce_ms = CollectiveMs(k, grad_full, c.dp_group, c.topo);
        sc.dp_reduce_bytes = BytesSentPerRank(k, grad_full, n_dp);
      }
      if (par.zero == 1 || par.zero == 2) {
        sc.param_allgather_ms =
            CollectiveMs(Collective::kAllGather, param_full, c.dp_group, c.topo);
      }
      if (par.zero == 3) {  // gather before F and again before I, prefetched under compute
        const double gather = CollectiveMs(Collective::kAllGather, param_full, c.dp_group, c.topo);
        sc.forward_ms = std::max(sc.forward_ms, gather);
        sc.backward_input_ms = std::max(sc.backward_input_ms, gather);
        sc.zero3_gather_bytes_per_microbatch =
            std::llround(2 * BytesSentPerRank(Collective::kAllGather, param_full, n_dp));
      }
    }
    if (m.tied_embeddings && par.pp > 1 && (sc.has_embedding || sc.has_output)) {
      const double emb = static_cast<double>(EmbeddingParamsPerRank(m, par.tp)) * bpp.grads;
      sc.embedding_sync_ms = RingAllReduceMs(emb, 2, pp_link);
    }
    const I64 opt_params = par.zero >= 1 ? (sc.params + n_dp - 1) / n_dp : sc.params;
    sc.optimizer_ms = MemoryBoundMs(dev, OptimizerStepBytes(opt_params, t));

    // Communication buffers: receive buffers for the pipeline's activation and gradient,
    // the all-gathered input under sp, ZeRO's reduce-scatter bucket and ZeRO-3's prefetched
    // parameters (two layers).
    double buffers = num_stages > 1 ? 2 * sc.p2p_bytes : 0;
    if (par.tp > 1 && par.sp) buffers += c.act_bytes;
    if (n_dp > 1 && par.zero >= 1) {
      buffers += static_cast<double>(std::min(sc.params, kDpBucketElements)) * bpp.grads;
    }
    if (n_dp > 1 && par.zero == 3) {
      buffers += 2 * static_cast<double>(DecoderLayerParamsPerRank(m, par.tp)) * bpp.params;
    }
    sc.comm_buffer_bytes = std::llround(buffers);
    jc.stages.push_back(sc);
  }
  if (dev.name == "cpu") {
    // The CPU executor's own tensors (float32; Adam keeps 2 floats per parameter, SGD with
    // momentum 1, plain SGD none): predicted memory then equals what it allocates.
    jc.cpu_executor = true;
    for (int s = 0; s < num_stages; ++s) {
      StageCost& sc = jc.stages[static_cast<std::size_t>(s)];
      const int layers = (*split)[static_cast<std::size_t>(s)];
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
                                                       .sp = par.sp});
      sc.params = cm.params;
      sc.param_bytes = cm.param_bytes;
      sc.grad_bytes = cm.grad_bytes;
      const I64 per_param = t.optimizer == Optimizer::kAdam          ? 8
                            : t.optimizer == Optimizer::kSgdMomentum ? 4
                                                                     : 0;
      // ZeRO-1 on the CPU executor: the optimizer state of a ceil(params / dp) shard.
      const bool zero1 = par.zero == 1 && par.dp > 1;
      const I64 shard = (cm.params + par.dp - 1) / par.dp;
      sc.optimizer_bytes = (zero1 ? shard : cm.params) * per_param;
      sc.zero1_padded_bytes = zero1 ? shard * par.dp * 4 : 0;
      sc.activation_bytes_per_microbatch = cm.activations_full;
      sc.activation_bytes_pending_w = cm.activations_pending_w;
      sc.activation_transient_bytes = cm.activations_i_transient;
      sc.p2p_bytes = static_cast<double>(cm.boundary_bytes);
      sc.comm_buffer_bytes = 0;
      sc.tp_bytes_per_microbatch = cm.tp_bytes_per_microbatch;
      sc.tp_bytes_per_iteration = cm.tp_bytes_per_iteration;
      // Its data-parallel reduction: a ring all-reduce of the float32 gradients.
      // ZeRO-1: a reduce-scatter of the padded gradients and, after the step, an all-gather
      // of the padded parameters, call by call as the executor counts them.
      const auto ring = [&](double factor, I64 bytes) {
        return static_cast<double>(static_cast<I64>(factor * static_cast<double>(par.dp - 1) /
                                                    static_cast<double>(par.dp) *
                                                    static_cast<double>(bytes)));
      };
      sc.dp_reduce_bytes = par.dp <= 1 ? 0
                           : zero1     ? 2 * ring(1.0, sc.zero1_padded_bytes)
                                       : ring(2.0, cm.grad_bytes);
    }
  }
  return jc;
}

}  // namespace pipetwin::models
