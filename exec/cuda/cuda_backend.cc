#include "exec/cuda/cuda_backend.h"

#include <mpi.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exec/backend_registry.h"
#include "exec/cuda/check.h"
#include "exec/cuda/cuda_chunk.h"
#include "exec/cuda/nccl_comms.h"
#include "exec/cuda/p2p_plan.h"
#include "exec/model/data.h"
#include "models/comm.h"
#include "models/training.h"

namespace pipetwin::exec {
namespace {

using cuda::CudaChunk;
using cuda::DeviceTensor;
using I64 = std::int64_t;

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

cudaEvent_t NewEvent(bool timing) {
  cudaEvent_t e = nullptr;
  PT_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

// `waiter` runs its later work only after everything issued so far on `producer`.
void StreamAfter(cudaStream_t waiter, cudaStream_t producer) {
  cudaEvent_t e = NewEvent(false);
  PT_CUDA_CHECK(cudaEventRecord(e, producer));
  PT_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
  PT_CUDA_CHECK(cudaEventDestroy(e));
}

class CudaBackendBase : public Backend {
 public:
  virtual std::int64_t driver_bytes_at_peak() const = 0;
};

template <class T>
class CudaBackend final : public CudaBackendBase {
 public:
  using DT = DeviceTensor<T>;
  explicit CudaBackend(const BackendConfig& cfg);
  ~CudaBackend() override;

  void BeginStep(std::int64_t step) override;
  void Compute(const Action& a) override;
  void PostSend(const Action& send, int peer) override;
  void PostRecv(const Action& recv, int peer) override;
  bool TestRecv(const Action& recv) override;
  bool TestSends() override;
  void StartReduceGrad(int stage) override;
  bool TestReduceGrad(int stage) override;
  double StepLoss() const override { return step_loss_; }
  MemoryBytes PeakMemory() const override;
  std::int64_t PeakMemoryTotal() const override {
    return static_cast<std::int64_t>(acc_.peak_total());
  }
  void ResetPeakMemory() override { alloc_->ResetPeaks(); }
  std::int64_t BytesSent(CommGroup group) const override;
  double GradNormSquared() const override;
  const gpt::ParamLayout& StageLayout(int stage) const override { return chunk(stage).layout(); }
  std::vector<float> StageGrads(int stage) const override { return chunk(stage).DownloadGrads(); }
  void FinishStep(std::vector<TimelineEvent>& events) override;
  std::int64_t driver_bytes_at_peak() const override { return alloc_->driver_bytes_at_peak(); }

 private:
  using Key = std::tuple<int, int, int>;  // (buffer kind, stage, microbatch), as CpuBackend
  enum BufKind { kActOut = 0, kActIn = 1, kGradOut = 2, kGradIn = 3 };
  CudaChunk<T>& chunk(int stage) const;
  DT& NewBuffer(Key k);
  DT Take(Key k);
  bool Local(int stage) const;
  void PostChannelRecvs(int channel, int up_to);

  BackendConfig cfg_;
  gpt::Accountant acc_;
  cudaStream_t compute_ = nullptr, tp_stream_ = nullptr, dp_stream_ = nullptr;
  std::vector<cudaStream_t> channel_streams_;
  std::unique_ptr<cuda::DeviceAllocator> alloc_;
  std::unique_ptr<cuda::Gemm> gemm_;
  cuda::P2pPlan plan_;
  std::unique_ptr<cuda::NcclComms> comms_;
  cuda::DeviceContext ctx_;
  std::map<int, std::unique_ptr<CudaChunk<T>>> chunks_;
  std::map<int, bool> sp_synced_;
  std::map<Key, DT> buffers_;
  std::vector<int> posted_;  // receives posted per channel
  std::map<Key, cudaEvent_t> recv_done_;
  struct Send {
    cudaEvent_t done;
    Key key;
  };
  std::vector<Send> sends_;
  std::map<int, cudaEvent_t> reduce_done_;
  DeviceTensor<float> loss_dev_;
  DeviceTensor<double> norm_dev_;
  float* loss_host_ = nullptr;
  double* norm_host_ = nullptr;
  cudaEvent_t step_start_ = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timing_;
  std::size_t timing_used_ = 0;
  gpt::SyntheticData data_;
  std::vector<std::int32_t> tokens_, labels_;
  std::int64_t step_ = 0;
  double step_loss_ = 0;
  std::int64_t bytes_pp_ = 0, bytes_dp_ = 0;
  bool in_step_ = false;  // a step was begun and not finished: abort on destruction
};

template <class T>
CudaBackend<T>::CudaBackend(const BackendConfig& cfg)
    : cfg_(cfg),
      plan_(cuda::P2pPlan::Build(*cfg.schedule)),
      data_({.vocab = cfg.model.vocab,
             .seq_len = cfg.model.seq_len,
             .micro_batch = cfg.model.micro_batch,
             .seed = cfg.data_seed,
             .noise = 0.0f}) {
  const BackendConfig& b = cfg_;
  PT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  PT_CUDA_CHECK(cudaStreamCreateWithFlags(&tp_stream_, cudaStreamNonBlocking));
  PT_CUDA_CHECK(cudaStreamCreateWithFlags(&dp_stream_, cudaStreamNonBlocking));
  alloc_ = std::make_unique<cuda::DeviceAllocator>(compute_, acc_);
  gemm_ = std::make_unique<cuda::Gemm>(compute_, *alloc_);
  comms_ = std::make_unique<cuda::NcclComms>(b.pp_comm, b.dp_comm, b.tp_comm, plan_, b.pp_rank);
  for (std::size_t i = 0; i < plan_.channels().size(); ++i) {
    cudaStream_t s = nullptr;
    if (comms_->channel(static_cast<int>(i)) != nullptr) {
      PT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    channel_streams_.push_back(s);
  }
  posted_.assign(plan_.channels().size(), 0);
  ctx_ = {compute_, tp_stream_, alloc_.get(), gemm_.get(), comms_->tp(), 0};

  const int stages = static_cast<int>(b.layers_per_stage.size());
  int first_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const int n = b.layers_per_stage[static_cast<std::size_t>(s)];
    if (Local(s)) {
      gpt::ChunkSpec spec{
          .first_layer = first_layer, .num_layers = n, .first = s == 0, .last = s == stages - 1};
      typename CudaChunk<T>::OptimizerConfig opt;
      opt.adam = b.adam;
      opt.lr = b.learning_rate;
      auto c = std::make_unique<CudaChunk<T>>(b.model, spec, b.tp, ctx_, opt, b.recompute);
      c->set_loss_scale(1.0f / static_cast<float>(b.microbatches * b.dp));
      chunks_[s] = std::move(c);
    }
    first_layer += n;
  }
  loss_dev_ = DeviceTensor<float>(*alloc_, gpt::MemCategory::kWorkspace, 1, 1);
  norm_dev_ = DeviceTensor<double>(*alloc_, gpt::MemCategory::kWorkspace, 1, 1);
  PT_CUDA_CHECK(cudaMallocHost(&loss_host_, sizeof(float)));
  PT_CUDA_CHECK(cudaMallocHost(&norm_host_, sizeof(double)));
  step_start_ = NewEvent(true);
  tokens_.resize(data_.tokens_per_microbatch());
  labels_.resize(data_.tokens_per_microbatch());
  PT_CUDA_CHECK(cudaStreamSynchronize(compute_));  // parameters initialised before step 0
}

template <class T>
CudaBackend<T>::~CudaBackend() {
  if (in_step_) {
    // The step failed (timeout, peer error): make sure no NCCL kernel keeps this or any other
    // rank waiting, and free nothing that would wait for the device.
    comms_->Abort();
    alloc_->Abandon();
    return;  // members go without freeing device memory: the process is about to exit
  }
  for (cudaStream_t s : {compute_, tp_stream_, dp_stream_}) cudaStreamSynchronize(s);
  for (cudaStream_t s : channel_streams_) {
    if (s != nullptr) cudaStreamSynchronize(s);
  }
  chunks_.clear();
  buffers_.clear();
  loss_dev_.Reset();
  norm_dev_.Reset();
  cudaFreeHost(loss_host_);
  cudaFreeHost(norm_host_);
}

template <class T>
bool CudaBackend<T>::Local(int stage) const {
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  return stage >= 0 && stage <= last &&
         cfg_.stage_to_rank[static_cast<std::size_t>(stage)] == cfg_.pp_rank;
}

template <class T>
CudaChunk<T>& CudaBackend<T>::chunk(int stage) const {
  auto it = chunks_.find(stage);
  if (it == chunks_.end()) {
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }
  return *it->second;
}

template <class T>
typename CudaBackend<T>::DT& CudaBackend<T>::NewBuffer(Key k) {
  const CudaChunk<T>& c = chunk(std::get<1>(k));
  auto [it, inserted] = buffers_.try_emplace(
      k, DT(*alloc_, gpt::MemCategory::kComm, c.activation_rows(), c.hidden()));
  if (!inserted) throw std::logic_error("buffer allocated twice");
  return it->second;
}

template <class T>
typename CudaBackend<T>::DT CudaBackend<T>::Take(Key k) {
  auto it = buffers_.find(k);
  if (it == buffers_.end()) {
    throw std::logic_error("missing buffer for stage " + std::to_string(std::get<1>(k)) +
                           ", microbatch " + std::to_string(std::get<2>(k)));
  }
  DT t = std::move(it->second);
  buffers_.erase(it);
  return t;
}

template <class T>
void CudaBackend<T>::BeginStep(std::int64_t step) {
  in_step_ = true;
  step_ = step;
  step_loss_ = 0;
  timing_used_ = 0;
  PT_CUDA_CHECK(cudaEventRecord(step_start_, compute_));
  PT_CUDA_CHECK(cudaMemsetAsync(loss_dev_.data(), 0, sizeof(float), compute_));
  for (auto& [s, c] : chunks_) {
    c->ZeroGrads();
    sp_synced_[s] = false;
  }
}

template <class T>
void CudaBackend<T>::Compute(const Action& a) {
  const int s = a.stage;
  const int mb = a.microbatch;
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  CudaChunk<T>& c = chunk(s);
  if (timing_used_ == timing_.size()) timing_.emplace_back(NewEvent(true), NewEvent(true));
  auto& [ev_start, ev_end] = timing_[timing_used_++];
  PT_CUDA_CHECK(cudaEventRecord(ev_start, compute_));
  const std::int64_t global_mb = static_cast<std::int64_t>(cfg_.dp_rank) * cfg_.microbatches + mb;
  switch (a.kind) {
    case ActionKind::kForward: {
      if (s == 0 || s == last) data_.Fill(step_, global_mb, tokens_, labels_);
      DT input;
      if (s != 0) input = Take({Local(s - 1) ? kActOut : kActIn, Local(s - 1) ? s - 1 : s, mb});
      T* out = s == last ? nullptr : NewBuffer({kActOut, s, mb}).data();
      c.Forward(mb, tokens_, labels_, input.data(), out, loss_dev_.data());
      break;  // `input` goes back to the pool (stream-ordered after the forward)
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      DT grad_output;
      if (s != last) {
        grad_output = Take({Local(s + 1) ? kGradOut : kGradIn, Local(s + 1) ? s + 1 : s, mb});
      }
      T* grad_input = s == 0 ? nullptr : NewBuffer({kGradOut, s, mb}).data();
      c.BackwardInput(mb, grad_output.data(), grad_input);
      if (a.kind == ActionKind::kBackward) c.BackwardWeight(mb);
      break;
    }
    case ActionKind::kBackwardWeight:
      c.BackwardWeight(mb);
      break;
    case ActionKind::kOptimizer:
      if (cfg_.tp.sequence_parallel && !sp_synced_[s]) {
        c.SyncSequenceParallelGrads();
        sp_synced_[s] = true;
      }
      if (auto it = reduce_done_.find(s); it != reduce_done_.end()) {
        PT_CUDA_CHECK(cudaStreamWaitEvent(compute_, it->second, 0));
      } else {
        StreamAfter(compute_, dp_stream_);
      }
      c.OptimizerStep();
      break;
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
    case ActionKind::kReduceGrad:
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kWaitReduceGrad:
      throw std::logic_error("CudaBackend::Compute called with " + a.ToString());
  }
  PT_CUDA_CHECK(cudaEventRecord(ev_end, compute_));
}

template <class T>
void CudaBackend<T>::PostSend(const Action& a, int /*peer*/) {
  const bool fwd = a.kind == ActionKind::kSendF;
  const Key k{fwd ? kActOut : kGradOut, a.stage, a.microbatch};
  auto it = buffers_.find(k);
  if (it == buffers_.end()) throw std::logic_error("nothing to send for " + a.ToString());
  const cuda::P2pPlan::Slot slot = plan_.SendSlot(a);
  cudaStream_t st = channel_streams_[static_cast<std::size_t>(slot.channel)];
  ncclComm_t comm = comms_->channel(slot.channel);
  if (comm == nullptr) throw std::logic_error("no channel for " + a.ToString());
  StreamAfter(st, compute_);  // the buffer was written by the compute stream
  PT_NCCL_CHECK(ncclGroupStart());
  PT_NCCL_CHECK(ncclSend(it->second.data(), static_cast<std::size_t>(it->second.size()),
                         NcclType<T>(), 1, comm, st));
  PT_NCCL_CHECK(ncclGroupEnd());
  cudaEvent_t done = NewEvent(false);
  PT_CUDA_CHECK(cudaEventRecord(done, st));
  bytes_pp_ += static_cast<std::int64_t>(it->second.bytes());
  sends_.push_back({done, k});
}

// Posts the channel's receives, in the sender's order, up to and including position up_to,
// as one NCCL group.
template <class T>
void CudaBackend<T>::PostChannelRecvs(int channel, int up_to) {
  const cuda::Channel& ch = plan_.channels()[static_cast<std::size_t>(channel)];
  int& posted = posted_[static_cast<std::size_t>(channel)];
  if (posted > up_to) return;
  cudaStream_t st = channel_streams_[static_cast<std::size_t>(channel)];
  ncclComm_t comm = comms_->channel(channel);
  std::vector<Key> keys;
  for (int p = posted; p <= up_to; ++p) {
    const Action& r = ch.order[static_cast<std::size_t>(p)];
    keys.push_back({r.kind == ActionKind::kRecvF ? kActIn : kGradIn, r.stage, r.microbatch});
    NewBuffer(keys.back());
  }
  StreamAfter(st, compute_);  // the buffers were allocated on the compute stream
  PT_NCCL_CHECK(ncclGroupStart());
  for (const Key& k : keys) {
    DT& buf = buffers_.at(k);
    PT_NCCL_CHECK(
        ncclRecv(buf.data(), static_cast<std::size_t>(buf.size()), NcclType<T>(), 0, comm, st));
  }
  PT_NCCL_CHECK(ncclGroupEnd());
  // One completion event per receive (they complete together: one group on one stream).
  for (const Key& k : keys) {
    cudaEvent_t done = NewEvent(false);
    PT_CUDA_CHECK(cudaEventRecord(done, st));
    recv_done_[k] = done;
  }
  posted = up_to + 1;
}

template <class T>
void CudaBackend<T>::PostRecv(const Action& a, int /*peer*/) {
  const cuda::P2pPlan::Slot slot = plan_.RecvSlot(a);
  PostChannelRecvs(slot.channel, slot.position);
}

template <class T>
bool CudaBackend<T>::TestRecv(const Action& a) {
  const Key k{a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch};
  auto it = recv_done_.find(k);
  if (it == recv_done_.end()) throw std::logic_error("receive not posted: " + a.ToString());
  const cudaError_t q = cudaEventQuery(it->second);
  if (q == cudaErrorNotReady) {
    comms_->CheckAsync();
    return false;
  }
  PT_CUDA_CHECK(q);
  PT_CUDA_CHECK(cudaStreamWaitEvent(compute_, it->second, 0));
  PT_CUDA_CHECK(cudaEventDestroy(it->second));
  recv_done_.erase(it);
  return true;
}

template <class T>
bool CudaBackend<T>::TestSends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    const cudaError_t q = cudaEventQuery(it->done);
    if (q == cudaErrorNotReady) {
      ++it;
      continue;
    }
    PT_CUDA_CHECK(q);
    PT_CUDA_CHECK(cudaEventDestroy(it->done));
    Take(it->key);  // the send is complete: the buffer goes back to the pool
    it = sends_.erase(it);
  }
  if (!sends_.empty()) comms_->CheckAsync();
  return sends_.empty();
}

template <class T>
void CudaBackend<T>::StartReduceGrad(int stage) {
  CudaChunk<T>& c = chunk(stage);
  if (cfg_.tp.sequence_parallel && !sp_synced_[stage]) {
    c.SyncSequenceParallelGrads();
    sp_synced_[stage] = true;
  }
  if (comms_->dp() == nullptr) return;  // dp == 1: nothing to reduce
  StreamAfter(dp_stream_, compute_);    // after the stage's last W
  const auto n = static_cast<std::size_t>(c.num_params());
  PT_NCCL_CHECK(
      ncclAllReduce(c.grads(), c.grads(), n, NcclType<T>(), ncclSum, comms_->dp(), dp_stream_));
  cudaEvent_t done = NewEvent(false);
  PT_CUDA_CHECK(cudaEventRecord(done, dp_stream_));
  if (auto it = reduce_done_.find(stage); it != reduce_done_.end()) {
    PT_CUDA_CHECK(cudaEventDestroy(it->second));
  }
  reduce_done_[stage] = done;
  bytes_dp_ += models::RingBytesSentPerRank(models::Collective::kAllReduceRing,
                                            static_cast<std::int64_t>(n * sizeof(T)), cfg_.dp);
}

template <class T>
bool CudaBackend<T>::TestReduceGrad(int stage) {
  auto it = reduce_done_.find(stage);
  if (it == reduce_done_.end()) return true;
  const cudaError_t q = cudaEventQuery(it->second);
  if (q == cudaErrorNotReady) {
    comms_->CheckAsync();
    return false;
  }
  PT_CUDA_CHECK(q);
  return true;  // the event stays: the optimizer's stream waits on it
}

template <class T>
double CudaBackend<T>::GradNormSquared() const {
  // Called before the optimizer step (the engine has drained the reductions): one stream
  // synchronisation of the compute stream, as Megatron's norm all-reduce needs the value.
  PT_CUDA_CHECK(cudaMemsetAsync(norm_dev_.data(), 0, sizeof(double), compute_));
  for (const auto& [s, c] : chunks_) {
    if (auto it = reduce_done_.find(s); it != reduce_done_.end()) {
      PT_CUDA_CHECK(cudaStreamWaitEvent(compute_, it->second, 0));
    }
    c->AddGradNormSquared(norm_dev_.data());
  }
  PT_CUDA_CHECK(cudaMemcpyAsync(norm_host_, norm_dev_.data(), sizeof(double),
                                cudaMemcpyDeviceToHost, compute_));
  PT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  return *norm_host_;
}

template <class T>
void CudaBackend<T>::FinishStep(std::vector<TimelineEvent>& events) {
  const BackendConfig& b = cfg_;
  if (b.tp.size > 1 && b.tp.sequence_parallel && comms_->tp() != nullptr) {
    // Under SP each TP rank holds its rows' share of the loss.
    PT_NCCL_CHECK(ncclAllReduce(loss_dev_.data(), loss_dev_.data(), 1, ncclFloat32, ncclSum,
                                comms_->tp(), compute_));
  }
  PT_CUDA_CHECK(cudaMemcpyAsync(loss_host_, loss_dev_.data(), sizeof(float), cudaMemcpyDeviceToHost,
                                compute_));
  for (cudaStream_t s : {compute_, tp_stream_, dp_stream_}) PT_CUDA_CHECK(cudaStreamSynchronize(s));
  for (cudaStream_t s : channel_streams_) {
    if (s != nullptr) PT_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  comms_->CheckAsync();
  step_loss_ = static_cast<double>(*loss_host_);
  for (auto& [s, e] : reduce_done_) PT_CUDA_CHECK(cudaEventDestroy(e));
  reduce_done_.clear();
  // Device times of the compute actions, in issue order, from the step's start event.
  std::size_t i = 0;
  for (TimelineEvent& e : events) {
    if (e.stream != Stream::kCompute || i >= timing_used_) continue;
    float start_ms = 0, end_ms = 0;
    PT_CUDA_CHECK(cudaEventElapsedTime(&start_ms, step_start_, timing_[i].first));
    PT_CUDA_CHECK(cudaEventElapsedTime(&end_ms, step_start_, timing_[i].second));
    e.start_ns = static_cast<std::int64_t>(static_cast<double>(start_ms) * 1e6);
    e.end_ns = static_cast<std::int64_t>(static_cast<double>(end_ms) * 1e6);
    ++i;
  }
  in_step_ = false;
}

template <class T>
MemoryBytes CudaBackend<T>::PeakMemory() const {
  MemoryBytes m;
  auto peak = [&](gpt::MemCategory c) { return static_cast<std::int64_t>(acc_.peak(c)); };
  m.params = peak(gpt::MemCategory::kParams);
  m.grads = peak(gpt::MemCategory::kGrads);
  m.optimizer = peak(gpt::MemCategory::kOptimizer);
  m.activations = peak(gpt::MemCategory::kActivations);
  m.comm_buffers = peak(gpt::MemCategory::kComm);
  return m;
}

template <class T>
std::int64_t CudaBackend<T>::BytesSent(CommGroup group) const {
  switch (group) {
    case CommGroup::kPp:
      return bytes_pp_;
    case CommGroup::kDp:
      return bytes_dp_;
    case CommGroup::kTp:
      return ctx_.tp_bytes;
    case CommGroup::kCp:
      return 0;
  }
  return 0;
}

}  // namespace

// What the CUDA backend runs: bf16 or fp32, recompute none | selective | full, unfused
// multi-head attention, GeLU, LayerNorm, biases, no dropout, untied embeddings, TP collectives in
// series (no overlap.tp_comm), no ZeRO; the executor's decoder on every backend (its MLP, norm,
// positions and so on) is checked before a backend is made (models::ExecutorModelMismatch, in
// exec/run.cc).
Status CheckCudaJob(const ResolvedJob& job) {
  const JobConfig& c = job.config;
  if (c.model.dropout) {
    return c.source.At(
        "model.dropout",
        "the CUDA backend runs no dropout (the CPU backend does): use dropout: false "
        "with --backend cuda (the GPT-3 presets have it on)");
  }
  if (c.model.tied_embeddings) {
    return c.source.At("model.tied_embeddings",
                       "the CUDA backend keeps its output layer apart from the embedding (the "
                       "CPU backend ties them): use tied_embeddings: false with --backend cuda "
                       "(the GPT-3 presets tie them)");
  }
  if (c.model.norm != models::Norm::kLayerNorm) {
    return c.source.At("model.norm",
                       "the CUDA backend's kernels are LayerNorm's (the CPU backend also runs "
                       "RMSNorm): use norm: layernorm with --backend cuda");
  }
  if (c.model.position != models::Position::kLearned) {
    return c.source.At("model.position",
                       "the CUDA backend adds a learned position table (the CPU backend also runs "
                       "rotary positions): use position: learned with --backend cuda");
  }
  if (c.model.mlp != models::Mlp::kGelu) {
    return c.source.At("model.mlp",
                       "the CUDA backend's MLP is GeLU's (the CPU backend also runs SwiGLU): use "
                       "mlp: gelu with --backend cuda");
  }
  if (c.model.kv_heads != c.model.heads) {
    return c.source.At("model.kv_heads",
                       "the CUDA backend's attention is multi-head (the CPU backend also runs "
                       "grouped-query attention): use kv_heads equal to heads with --backend cuda");
  }
  if (!c.model.bias) {
    return c.source.At("model.bias",
                       "the CUDA backend's linear layers have biases (the CPU backend runs them "
                       "with or without): use bias: true with --backend cuda");
  }
  if (c.parallel.zero > 0) {
    return c.source.At("parallel.zero",
                       "ZeRO is not in the CUDA backend yet: use zero: 0 with --backend cuda");
  }
  const models::TrainingConfig& t = c.training;
  if (t.precision == models::Precision::kFp16) {
    return c.source.At("training.precision",
                       "the CUDA backend runs bf16 or fp32 (fp16 needs loss scaling, not built)");
  }
  if (t.overlap.tp_comm) {
    return c.source.At(
        "training.overlap.tp_comm",
        "the CUDA backend runs its tensor-parallel collectives in series with the "
        "GEMMs: use tp_comm: false with --backend cuda (simulate models the overlap)");
  }
  if (t.flash_attention) {
    return c.source.At("training.flash_attention",
                       "the CUDA backend's attention is unfused: use flash_attention: false "
                       "(on by default for h100-sxm-80gb and h200-sxm-141gb jobs)");
  }
  return OkStatus();
}

void RegisterCudaBackend() { RegisterBackend("cuda", MakeCudaBackend); }

std::int64_t CudaDriverBytesAtPeak(const Backend& b) {
  const auto* c = dynamic_cast<const CudaBackendBase*>(&b);
  return c == nullptr ? -1 : c->driver_bytes_at_peak();
}

Expected<std::unique_ptr<Backend>> MakeCudaBackend(const BackendConfig& cfg) {
  if (cfg.job != nullptr) {
    if (Status st = CheckCudaJob(*cfg.job); !st) return st.error();
  }
  if (cfg.zero1) {
    return Error::BadInput("ZeRO is not in the CUDA backend yet: use zero: 0 with --backend cuda");
  }
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky-free error state
    return Error::Failure(std::string("no CUDA device found (cudaGetDeviceCount: ") +
                          (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") +
                          "); use --backend cpu on this machine");
  }
  if (cfg.schedule == nullptr) return Error::Failure("cuda backend: no schedule given");
  // One process per GPU: the device is the node-local rank.
  MPI_Comm node = MPI_COMM_NULL;
  int local = 0, local_size = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
          MPI_SUCCESS ||
      MPI_Comm_rank(node, &local) != MPI_SUCCESS ||
      MPI_Comm_size(node, &local_size) != MPI_SUCCESS) {
    return Error::Failure("cuda backend: MPI_Comm_split_type(SHARED) failed");
  }
  MPI_Comm_free(&node);
  if (local_size > count) {
    return Error::Failure("cuda backend: " + std::to_string(local_size) +
                          " processes on this node but " + std::to_string(count) +
                          " visible GPUs (one process per GPU; check CUDA_VISIBLE_DEVICES and "
                          "mpirun's processes per node)");
  }
  PT_CUDA_CHECK(cudaSetDevice(local));
  if (cfg.bf16) return std::unique_ptr<Backend>(std::make_unique<CudaBackend<__nv_bfloat16>>(cfg));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend<float>>(cfg));
}

}  // namespace pipetwin::exec
