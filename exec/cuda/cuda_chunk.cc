#include "exec/cuda/cuda_chunk.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include "exec/cuda/kernels.h"
#include "exec/cuda/layout.h"
#include "models/comm.h"

namespace pipetwin::cuda {

using gpt::MemCategory;
using I64 = std::int64_t;

template <class T>
struct CudaChunk<T>::BlockOffsets {
  std::size_t ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

template <class T>
struct CudaChunk<T>::BlockSaved {
  // From F to I.
  DT x, qkv, probs, x1, f1;
  // From F to W.
  DT a1, attn, m1, g1;
  // From I to W.
  DT d_qkv, d_proj, d_fc1, d_fc2;
};

template <class T>
struct CudaChunk<T>::State {
  bool input_done = false;
  DeviceTensor<std::int32_t> tokens, labels;
  DT embed_dy;
  std::vector<BlockSaved> blocks;
  DT head_x, head_y, dlogits;
  DeviceTensor<float> logits;
};

namespace {

template <class T>
ncclDataType_t NcclType();
template <>
ncclDataType_t NcclType<float>() {
  return ncclFloat32;
}
template <>
ncclDataType_t NcclType<__nv_bfloat16>() {
  return ncclBfloat16;
}

enum TpKind { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2 };

}  // namespace

template <class T>
CudaChunk<T>::CudaChunk(const gpt::ModelConfig& model, const gpt::ChunkSpec& spec,
                        const gpt::TpConfig& tp, DeviceContext& ctx, const OptimizerConfig& opt,
                        gpt::Recompute recompute)
    : model_(model), spec_(spec), tp_(tp), recompute_(recompute), ctx_(&ctx), opt_(opt) {
  if (auto err = gpt::Validate(model, spec, tp)) throw std::invalid_argument(*err);
  if (tp.size > 1 && ctx.tp_comm == nullptr) {
    throw std::invalid_argument("cuda chunk: tp > 1 needs the TP communicator");
  }
  dims_ = gpt::MakeLocalDims(model, tp);
  layout_ = ChunkParamLayout(model, spec, tp);
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    auto off = [&](const char* w) { return layout_.Find(BlockParamName(l, w)).offset; };
    blocks_.push_back({off("ln1_g"), off("ln1_b"), off("qkv_w"), off("qkv_b"), off("proj_w"),
                       off("proj_b"), off("ln2_g"), off("ln2_b"), off("fc1_w"), off("fc1_b"),
                       off("fc2_w"), off("fc2_b")});
  }
  const I64 n = num_params();
  DeviceAllocator& a = *ctx.alloc;
  params_ = DT(a, MemCategory::kParams, 1, n);
  grads_ = DT(a, MemCategory::kGrads, 1, n);
  // Initial values: exactly the CPU's (gpt::InitParam), uploaded in float32.
  // On the host's cores (a GPU node has tens; one core takes about a minute for 1B values).
  std::vector<float> host(static_cast<std::size_t>(n));
  gpt::InitParams(layout_, tp, model, host.data(),
                  static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  DeviceTensor<float> staging(a, MemCategory::kWorkspace, 1, n);
  PT_CUDA_CHECK(cudaMemcpyAsync(staging.data(), host.data(), staging.bytes(),
                                cudaMemcpyHostToDevice, ctx.compute));
  LaunchCastFromFloat<T>(staging.data(), params_.data(), n, ctx.compute);
  // Optimizer state (models/memory.h): bf16 keeps a float32 master copy; Adam adds m and v.
  constexpr bool kMaster = !std::is_same_v<T, float>;
  if (kMaster) {
    master_ = std::move(staging).As(MemCategory::kOptimizer);
  }
  if (opt.adam) {
    adam_m_ = DeviceTensor<float>(a, MemCategory::kOptimizer, 1, n);
    adam_v_ = DeviceTensor<float>(a, MemCategory::kOptimizer, 1, n);
    PT_CUDA_CHECK(cudaMemsetAsync(adam_m_.data(), 0, adam_m_.bytes(), ctx.compute));
    PT_CUDA_CHECK(cudaMemsetAsync(adam_v_.data(), 0, adam_v_.bytes(), ctx.compute));
  }
  ln_stats_ = DeviceTensor<float>(a, MemCategory::kWorkspace, 1, 2 * dims_.tokens);
  ZeroGrads();
  // `host` is pageable: the copy above completed from the host's point of view on return.
}

template <class T>
CudaChunk<T>::~CudaChunk() = default;

template <class T>
typename CudaChunk<T>::DT CudaChunk<T>::New(I64 rows, I64 cols) const {
  return DT(*ctx_->alloc, MemCategory::kWorkspace, rows, cols);
}

// Workspace for `sums` column sums over `rows` rows (kernels.h, ColumnSumWorkspace), freed in
// stream order once the statement that launched the sums ends.
template <class T>
DeviceTensor<float> CudaChunk<T>::ColumnWork(I64 rows, I64 cols, int sums) const {
  return DeviceTensor<float>(*ctx_->alloc, MemCategory::kWorkspace, 1,
                             sums * ColumnSumWorkspace(rows, cols));
}

template <class T>
void CudaChunk<T>::Mm(const RowMajorGemm& g, const T* a, const T* b, void* c, DType c_type) {
  ctx_->gemm->Run(g, DTypeOf<T>(), a, b, c_type, c);
}

// The TP collective on the TP stream, after the compute stream's work so far; the compute
// stream then waits for it. No host synchronisation.
template <class T>
void CudaChunk<T>::TpCollective(int kind, const T* in, T* out, std::size_t count) {
  cudaEvent_t ready = nullptr, done = nullptr;
  PT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  PT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  PT_CUDA_CHECK(cudaEventRecord(ready, ctx_->compute));
  PT_CUDA_CHECK(cudaStreamWaitEvent(ctx_->tp_stream, ready, 0));
  // Bytes this rank sends, from the one table of collective formulas (models/comm.h).
  const auto sent = [&](models::Collective c, std::size_t elements) {
    return models::RingBytesSentPerRank(c, static_cast<I64>(elements * sizeof(T)), tp_.size);
  };
  const auto n = static_cast<std::size_t>(tp_.size);
  switch (kind) {
    case kAllReduce:
      PT_NCCL_CHECK(
          ncclAllReduce(in, out, count, NcclType<T>(), ncclSum, ctx_->tp_comm, ctx_->tp_stream));
      ctx_->tp_bytes += sent(models::Collective::kAllReduceRing, count);
      break;
    case kReduceScatter:  // count: elements of each rank's output
      PT_NCCL_CHECK(ncclReduceScatter(in, out, count, NcclType<T>(), ncclSum, ctx_->tp_comm,
                                      ctx_->tp_stream));
      ctx_->tp_bytes += sent(models::Collective::kReduceScatter, n * count);
      break;
    default:  // kAllGather; count: elements of each rank's input
      PT_NCCL_CHECK(ncclAllGather(in, out, count, NcclType<T>(), ctx_->tp_comm, ctx_->tp_stream));
      ctx_->tp_bytes += sent(models::Collective::kAllGather, n * count);
      break;
  }
  PT_CUDA_CHECK(cudaEventRecord(done, ctx_->tp_stream));
  PT_CUDA_CHECK(cudaStreamWaitEvent(ctx_->compute, done, 0));
  PT_CUDA_CHECK(cudaEventDestroy(ready));  // released once complete
  PT_CUDA_CHECK(cudaEventDestroy(done));
}

// Megatron's g forward / f backward: partial sums → all-reduced (no SP) or reduce-scattered.
template <class T>
typename CudaChunk<T>::DT CudaChunk<T>::Reduce(DT partial) {
  if (tp_.size == 1) return partial;
  if (!tp_.sequence_parallel) {
    TpCollective(kAllReduce, partial.data(), partial.data(),
                 static_cast<std::size_t>(partial.size()));
    return partial;
  }
  DT local = New(partial.rows() / tp_.size, partial.cols());
  TpCollective(kReduceScatter, partial.data(), local.data(),
               static_cast<std::size_t>(local.size()));
  return local;
}

// Megatron's f forward / g backward under SP: [R, c] → [N, c] (rank-contiguous row slices).
template <class T>
typename CudaChunk<T>::DT CudaChunk<T>::Gather(DT local) {
  if (tp_.size == 1 || !tp_.sequence_parallel) return local;
  DT full = New(local.rows() * tp_.size, local.cols());
  TpCollective(kAllGather, local.data(), full.data(), static_cast<std::size_t>(local.size()));
  return full;
}

// y[N, out] = x W (+ b when b_off is not npos).
template <class T>
void CudaChunk<T>::Linear(const DT& x, std::size_t w, std::size_t b, I64 out, DT* y) {
  const I64 n = x.rows(), in = x.cols();
  *y = New(n, out);
  Mm(LinearForwardGemm(n, in, out), x.data(), P(w), y->data());
  if (b != std::size_t(-1)) LaunchAddBias<T>(y->data(), P(b), n, out, ctx_->compute);
}

// dx[N, in] = dy W^T.
template <class T>
void CudaChunk<T>::LinearInput(const DT& dy, std::size_t w, I64 in, DT* dx) {
  const I64 n = dy.rows(), out = dy.cols();
  *dx = New(n, in);
  Mm(LinearInputGemm(n, in, out), dy.data(), P(w), dx->data());
}

// dW += x^T dy; db += column sums of dy over rows [bias_row_begin, + bias_rows).
template <class T>
void CudaChunk<T>::LinearWeight(const DT& x, const DT& dy, std::size_t w, std::size_t b,
                                I64 bias_row_begin, I64 bias_rows) {
  const I64 n = x.rows(), in = x.cols(), out = dy.cols();
  Mm(LinearWeightGemm(n, in, out), x.data(), dy.data(), G(w));
  if (b != std::size_t(-1)) {
    DeviceTensor<float> work = ColumnWork(bias_rows, out, 1);
    LaunchBiasGrad<T>(dy.data(), G(b), work.data(), bias_row_begin, bias_rows, out, ctx_->compute);
  }
}

template <class T>
void CudaChunk<T>::CoreAttentionForward(const DT& qkv, DT* probs, T* out) {
  const I64 B = dims_.batch, S = dims_.seq, al = dims_.heads_local, D = dims_.head_dim;
  *probs = DT(*ctx_->alloc, saved_, B * al * S, S);
  const AttentionShape shape{.batch = B, .seq = S, .heads = al, .head_dim = D};
  for (I64 b = 0; b < B; ++b) {
    const PlacedGemm g = ScoresGemm(shape, b);
    Mm(g.g, qkv.data() + g.a_offset, qkv.data() + g.b_offset, probs->data() + g.c_offset);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  LaunchCausalSoftmaxForward<T>(probs->data(), B * al * S, S, scale, ctx_->compute);
  for (I64 b = 0; b < B; ++b) {
    const PlacedGemm g = AttnOutGemm(shape, b);
    Mm(g.g, probs->data() + g.a_offset, qkv.data() + g.b_offset, out + g.c_offset);
  }
}

template <class T>
typename CudaChunk<T>::DT CudaChunk<T>::BlockForward(const BlockOffsets& o, DT x, BlockSaved* s) {
  const I64 R = dims_.rows, h = dims_.hidden, hl = dims_.hidden_local, B = dims_.batch,
            S = dims_.seq, fl = dims_.ffn_local;
  const float eps = model_.layernorm_eps;
  cudaStream_t st = ctx_->compute;
  // Attention half.
  DT a = New(R, h);
  LaunchLayerNormForward<T>(x.data(), P(o.ln1_g), P(o.ln1_b), a.data(), R, h, eps, st);
  s->a1 = Gather(std::move(a)).As(saved_);
  Linear(s->a1, o.qkv_w, o.qkv_b, 3 * hl, &s->qkv);
  s->qkv = std::move(s->qkv).As(saved_);
  s->attn = DT(*ctx_->alloc, saved_, B * S, hl);
  CoreAttentionForward(s->qkv, &s->probs, s->attn.data());
  // Selective recompute: of the core's state only its input (Q K V) stays; I rebuilds probs.
  if (recompute_ == gpt::Recompute::kSelective) s->probs.Reset();
  DT p;
  Linear(s->attn, o.proj_w, std::size_t(-1), h, &p);
  DT x1 = Reduce(std::move(p));
  LaunchAddBias<T>(x1.data(), P(o.proj_b), R, h, st);
  LaunchAdd<T>(x1.data(), x.data(), R * h, st);
  s->x = std::move(x).As(saved_);
  // MLP half.
  DT m = New(R, h);
  LaunchLayerNormForward<T>(x1.data(), P(o.ln2_g), P(o.ln2_b), m.data(), R, h, eps, st);
  s->m1 = Gather(std::move(m)).As(saved_);
  Linear(s->m1, o.fc1_w, o.fc1_b, fl, &s->f1);
  s->f1 = std::move(s->f1).As(saved_);
  s->g1 = DT(*ctx_->alloc, saved_, s->f1.rows(), fl);
  LaunchGeluForward<T>(s->f1.data(), s->g1.data(), s->f1.size(), st);
  DT f2;
  Linear(s->g1, o.fc2_w, std::size_t(-1), h, &f2);
  DT y = Reduce(std::move(f2));
  LaunchAddBias<T>(y.data(), P(o.fc2_b), R, h, st);
  LaunchAdd<T>(y.data(), x1.data(), R * h, st);
  s->x1 = std::move(x1).As(saved_);
  return y;
}

template <class T>
typename CudaChunk<T>::DT CudaChunk<T>::BlockBackwardInput(const BlockOffsets& o, DT dy,
                                                           BlockSaved* s) {
  const I64 R = dims_.rows, h = dims_.hidden, hl = dims_.hidden_local, B = dims_.batch,
            S = dims_.seq, al = dims_.heads_local, D = dims_.head_dim, fl = dims_.ffn_local;
  const float eps = model_.layernorm_eps;
  const bool sp = tp_.size > 1 && tp_.sequence_parallel;
  cudaStream_t st = ctx_->compute;
  // MLP half. Without SP the gathered gradient is dy itself: keep it for W, read it as the
  // residual. With SP keep the gathered copy.
  const T* dy_residual = dy.data();
  DT dy_keep;  // owns dy under SP until the residual add
  if (sp) {
    dy_keep = DT(*ctx_->alloc, MemCategory::kWorkspace, dy.rows(), dy.cols());
    PT_CUDA_CHECK(
        cudaMemcpyAsync(dy_keep.data(), dy.data(), dy.bytes(), cudaMemcpyDeviceToDevice, st));
    dy_residual = dy_keep.data();
  }
  s->d_fc2 = Gather(std::move(dy)).As(MemCategory::kActivations);
  DT dg1;
  LinearInput(s->d_fc2, o.fc2_w, fl, &dg1);
  s->d_fc1 = DT(*ctx_->alloc, MemCategory::kActivations, dg1.rows(), fl);
  LaunchGeluBackward<T>(s->f1.data(), dg1.data(), s->d_fc1.data(), dg1.size(), st);
  s->f1.Reset();
  dg1.Reset();
  DT dm1;
  LinearInput(s->d_fc1, o.fc1_w, h, &dm1);
  dm1 = Reduce(std::move(dm1));
  DT dx1 = New(R, h);
  LaunchLayerNormBackward<T>(dm1.data(), s->x1.data(), P(o.ln2_g), dy_residual, dx1.data(),
                             G(o.ln2_g), G(o.ln2_b), ln_stats_.data(), ColumnWork(R, h, 2).data(),
                             R, h, eps, st);
  s->x1.Reset();
  dm1.Reset();
  dy_keep.Reset();
  // Attention half.
  const T* dx1_residual = dx1.data();
  DT dx1_keep;
  if (sp) {
    dx1_keep = DT(*ctx_->alloc, MemCategory::kWorkspace, R, h);
    PT_CUDA_CHECK(
        cudaMemcpyAsync(dx1_keep.data(), dx1.data(), dx1.bytes(), cudaMemcpyDeviceToDevice, st));
    dx1_residual = dx1_keep.data();
  }
  s->d_proj = Gather(std::move(dx1)).As(MemCategory::kActivations);
  DT d_attn;
  LinearInput(s->d_proj, o.proj_w, hl, &d_attn);
  if (recompute_ == gpt::Recompute::kSelective) {
    // The core's forward again from the kept Q K V, as Megatron-LM's checkpointed core
    // attention runs it (its output is not needed: the attention-output GEMM kept its input).
    DT out = New(B * S, hl);
    CoreAttentionForward(s->qkv, &s->probs, out.data());
  }
  s->d_qkv = DT(*ctx_->alloc, MemCategory::kActivations, B * S, 3 * hl);
  DT dp = New(al * S, S);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const AttentionShape shape{.batch = B, .seq = S, .heads = al, .head_dim = D};
  const T* qkv = s->qkv.data();
  T* dqkv = s->d_qkv.data();
  for (I64 b = 0; b < B; ++b) {
    // dV = P^T dO; dP = dO V^T; dS = softmax'(P) dP; dQ = dS K; dK = dS^T Q.
    PlacedGemm g = GradVGemm(shape, b);
    Mm(g.g, s->probs.data() + g.a_offset, d_attn.data() + g.b_offset, dqkv + g.c_offset);
    g = GradProbsGemm(shape, b);
    Mm(g.g, d_attn.data() + g.a_offset, qkv + g.b_offset, dp.data() + g.c_offset);
    LaunchCausalSoftmaxBackward<T>(s->probs.data() + b * al * S * S, dp.data(), al * S, S, scale,
                                   st);
    g = GradQGemm(shape, b);
    Mm(g.g, dp.data() + g.a_offset, qkv + g.b_offset, dqkv + g.c_offset);
    g = GradKGemm(shape, b);
    Mm(g.g, dp.data() + g.a_offset, qkv + g.b_offset, dqkv + g.c_offset);
  }
  dp.Reset();
  d_attn.Reset();
  s->qkv.Reset();
  s->probs.Reset();
  DT da1;
  LinearInput(s->d_qkv, o.qkv_w, h, &da1);
  da1 = Reduce(std::move(da1));
  DT dx = New(R, h);
  LaunchLayerNormBackward<T>(da1.data(), s->x.data(), P(o.ln1_g), dx1_residual, dx.data(),
                             G(o.ln1_g), G(o.ln1_b), ln_stats_.data(), ColumnWork(R, h, 2).data(),
                             R, h, eps, st);
  s->x.Reset();
  return dx;
}

template <class T>
void CudaChunk<T>::BlockBackwardWeight(const BlockOffsets& o, BlockSaved* s) {
  const I64 N = dims_.tokens;
  // Row-parallel biases: this rank's rows of the gathered gradient (all rows without SP).
  LinearWeight(s->g1, s->d_fc2, o.fc2_w, o.fc2_b, dims_.row_begin, dims_.rows);
  LinearWeight(s->m1, s->d_fc1, o.fc1_w, o.fc1_b, 0, N);
  LinearWeight(s->attn, s->d_proj, o.proj_w, o.proj_b, dims_.row_begin, dims_.rows);
  LinearWeight(s->a1, s->d_qkv, o.qkv_w, o.qkv_b, 0, N);
  *s = BlockSaved{};
}

template <class T>
void CudaChunk<T>::Forward(I64 mb, std::span<const std::int32_t> tokens,
                           std::span<const std::int32_t> labels, const T* input, T* output,
                           float* loss_sum) {
  if (states_.count(mb) != 0) {
    throw std::logic_error("cuda chunk: forward of microbatch " + std::to_string(mb) +
                           " while it is still in flight");
  }
  auto state = std::make_unique<State>();
  state->blocks.resize(blocks_.size());
  const I64 R = dims_.rows, h = dims_.hidden, v = dims_.vocab;
  cudaStream_t st = ctx_->compute;
  auto upload = [&](std::span<const std::int32_t> in, DeviceTensor<std::int32_t>* out) {
    *out = DeviceTensor<std::int32_t>(*ctx_->alloc, MemCategory::kComm, 1,
                                      static_cast<I64>(in.size()));
    PT_CUDA_CHECK(
        cudaMemcpyAsync(out->data(), in.data(), out->bytes(), cudaMemcpyHostToDevice, st));
  };
  DT x = New(R, h);
  if (spec_.first) {
    upload(tokens, &state->tokens);
    const gpt::ParamInfo& tok = layout_.Find("embed.tok");
    const gpt::ParamInfo& pos = layout_.Find("embed.pos");
    LaunchEmbeddingForward<T>(state->tokens.data(), P(tok.offset), P(pos.offset), x.data(), R,
                              dims_.row_begin, dims_.batch, dims_.seq, h, st);
  } else {
    PT_CUDA_CHECK(cudaMemcpyAsync(x.data(), input, x.bytes(), cudaMemcpyDeviceToDevice, st));
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (recompute_ != gpt::Recompute::kFull) {
      x = BlockForward(blocks_[i], std::move(x), &state->blocks[i]);
      continue;
    }
    // Full recompute: the block runs as usual but counts what it saves as workspace, freed
    // when `run` goes out of scope (stream-ordered); only its input is kept, as activations.
    BlockSaved run;
    saved_ = MemCategory::kWorkspace;
    DT y = BlockForward(blocks_[i], std::move(x), &run);
    saved_ = MemCategory::kActivations;
    state->blocks[i].x = std::move(run.x).As(MemCategory::kActivations);
    x = std::move(y);
  }
  if (spec_.last) {
    upload(labels, &state->labels);
    const gpt::ParamInfo& g = layout_.Find("head.ln_g");
    const gpt::ParamInfo& b = layout_.Find("head.ln_b");
    const gpt::ParamInfo& w = layout_.Find("head.out_w");
    state->head_y = DT(*ctx_->alloc, MemCategory::kActivations, R, h);
    LaunchLayerNormForward<T>(x.data(), P(g.offset), P(b.offset), state->head_y.data(), R, h,
                              model_.layernorm_eps, st);
    state->head_x = std::move(x).As(MemCategory::kActivations);
    state->logits = DeviceTensor<float>(*ctx_->alloc, MemCategory::kActivations, R, v);
    Mm({.m = R, .n = v, .k = h, .lda = h, .ldb = v, .ldc = v}, state->head_y.data(), P(w.offset),
       state->logits.data(), DType::kF32);
    const float inv_tokens = static_cast<float>(1.0 / static_cast<double>(dims_.tokens));
    LaunchCrossEntropyForward(state->logits.data(), state->labels.data(), loss_sum, inv_tokens, R,
                              dims_.row_begin, dims_.batch, dims_.seq, v, st);
  } else {
    PT_CUDA_CHECK(cudaMemcpyAsync(output, x.data(), x.bytes(), cudaMemcpyDeviceToDevice, st));
  }
  states_.emplace(mb, std::move(state));
}

template <class T>
void CudaChunk<T>::BackwardInput(I64 mb, const T* grad_output, T* grad_input) {
  auto it = states_.find(mb);
  if (it == states_.end() || it->second->input_done) {
    throw std::logic_error("cuda chunk: backward-input of microbatch " + std::to_string(mb) +
                           " without a pending forward");
  }
  State& s = *it->second;
  const I64 R = dims_.rows, h = dims_.hidden, v = dims_.vocab;
  cudaStream_t st = ctx_->compute;
  DT g = New(R, h);
  if (spec_.last) {
    const gpt::ParamInfo& lg = layout_.Find("head.ln_g");
    const gpt::ParamInfo& lb = layout_.Find("head.ln_b");
    const gpt::ParamInfo& w = layout_.Find("head.out_w");
    const auto grad_scale =
        static_cast<float>(static_cast<double>(loss_scale_) / static_cast<double>(dims_.tokens));
    s.dlogits = DT(*ctx_->alloc, MemCategory::kActivations, R, v);
    LaunchCrossEntropyBackward<T>(s.logits.data(), s.labels.data(), s.dlogits.data(), grad_scale, R,
                                  dims_.row_begin, dims_.batch, dims_.seq, v, st);
    s.logits.Reset();
    s.labels.Reset();
    DT dy;
    LinearInput(s.dlogits, w.offset, h, &dy);
    LaunchLayerNormBackward<T>(dy.data(), s.head_x.data(), P(lg.offset), nullptr, g.data(),
                               G(lg.offset), G(lb.offset), ln_stats_.data(),
                               ColumnWork(R, h, 2).data(), R, h, model_.layernorm_eps, st);
    s.head_x.Reset();
  } else {
    PT_CUDA_CHECK(cudaMemcpyAsync(g.data(), grad_output, g.bytes(), cudaMemcpyDeviceToDevice, st));
  }
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    if (recompute_ == gpt::Recompute::kFull) {
      // The block's forward again from its kept input, saving everything (the input stays in
      // the state as before); its output is not needed.
      DT input = std::move(s.blocks[i].x);
      (void)BlockForward(blocks_[i], std::move(input), &s.blocks[i]);
    }
    g = BlockBackwardInput(blocks_[i], std::move(g), &s.blocks[i]);
  }
  if (spec_.first) {
    s.embed_dy = std::move(g).As(MemCategory::kActivations);
  } else {
    PT_CUDA_CHECK(cudaMemcpyAsync(grad_input, g.data(), g.bytes(), cudaMemcpyDeviceToDevice, st));
  }
  s.input_done = true;
}

template <class T>
void CudaChunk<T>::BackwardWeight(I64 mb) {
  auto it = states_.find(mb);
  if (it == states_.end() || !it->second->input_done) {
    throw std::logic_error("cuda chunk: backward-weight of microbatch " + std::to_string(mb) +
                           " before its backward-input");
  }
  State& s = *it->second;
  if (spec_.last) {
    const gpt::ParamInfo& w = layout_.Find("head.out_w");
    LinearWeight(s.head_y, s.dlogits, w.offset, std::size_t(-1), 0, 0);
  }
  for (std::size_t i = blocks_.size(); i-- > 0;) BlockBackwardWeight(blocks_[i], &s.blocks[i]);
  if (spec_.first) {
    const gpt::ParamInfo& tok = layout_.Find("embed.tok");
    const gpt::ParamInfo& pos = layout_.Find("embed.pos");
    LaunchEmbeddingBackward<T>(s.tokens.data(), s.embed_dy.data(), G(tok.offset), G(pos.offset),
                               dims_.rows, dims_.row_begin, dims_.batch, dims_.seq, dims_.hidden,
                               ctx_->compute);
  }
  states_.erase(it);
}

template <class T>
void CudaChunk<T>::ZeroGrads() {
  PT_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), ctx_->compute));
}

template <class T>
void CudaChunk<T>::SyncSequenceParallelGrads() {
  if (tp_.size == 1 || !tp_.sequence_parallel || layout_.replicated == 0) return;
  TpCollective(kAllReduce, grads_.data(), grads_.data(), layout_.replicated);
}

template <class T>
void CudaChunk<T>::OptimizerStep() {
  const I64 n = num_params();
  float* master = master_.empty() ? nullptr : master_.data();
  if (opt_.adam) {
    ++adam_t_;
    const double t = static_cast<double>(adam_t_);
    const ew::AdamScalars a{opt_.lr,
                            opt_.beta1,
                            opt_.beta2,
                            opt_.eps,
                            0.0f,
                            static_cast<float>(1.0 - std::pow(static_cast<double>(opt_.beta1), t)),
                            static_cast<float>(1.0 - std::pow(static_cast<double>(opt_.beta2), t))};
    LaunchAdam<T>(params_.data(), master, adam_m_.data(), adam_v_.data(), grads_.data(), n, a,
                  ctx_->compute);
  } else {
    LaunchSgd<T>(params_.data(), master, grads_.data(), n, opt_.lr, ctx_->compute);
  }
}

template <class T>
void CudaChunk<T>::AddGradNormSquared(double* out) {
  LaunchSumSquares<T>(grads_.data(), num_params(), out, ctx_->compute);
}

template <class T>
std::vector<float> CudaChunk<T>::DownloadGrads() const {
  DeviceTensor<float> f(*ctx_->alloc, MemCategory::kWorkspace, 1, grads_.size());
  LaunchCastToFloat<T>(grads_.data(), f.data(), grads_.size(), ctx_->compute);
  std::vector<float> host(static_cast<std::size_t>(grads_.size()));
  PT_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), f.data(), f.bytes(), cudaMemcpyDeviceToHost, ctx_->compute));
  PT_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
  return host;
}

template class CudaChunk<float>;
template class CudaChunk<__nv_bfloat16>;

}  // namespace pipetwin::cuda
