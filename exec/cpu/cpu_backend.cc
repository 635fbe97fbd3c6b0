#include "exec/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "exec/cpu/gemm.h"
#include "exec/cpu/memory.h"
#include "exec/cpu/roofline.h"
#include "models/comm.h"

namespace pipetwin::exec {
namespace {

// Bytes one rank sends in a ring collective over `elems` floats: the one table of collective
// formulas (models/comm.h), so that predicted and measured bytes agree by construction.
std::int64_t RingBytes(models::Collective c, std::size_t elems, int n) {
  return models::RingBytesSentPerRank(c, static_cast<std::int64_t>(elems * sizeof(float)), n);
}

// A chunk's ZeRO-1 blocks over `ranks` (models/cpu_inventory.h): its copy of the tied
// embedding, if it holds one that is summed with another stage's, sharded apart.
models::Zero1Layout ChunkZero1Layout(const cpu::Chunk& c, bool tied_copy, int ranks) {
  std::int64_t offset = 0, tied = 0;
  if (tied_copy) {
    const gpt::ParamInfo& p = c.layout().Find("embed.tok");
    offset = static_cast<std::int64_t>(p.offset);
    tied = static_cast<std::int64_t>(p.size());
  }
  return models::MakeZero1Layout(static_cast<std::int64_t>(c.params().size()), ranks, offset, tied);
}

// Copies `flat` into the blocks of `padded` (its padding left as it is), or back.
void PackZero1(const models::Zero1Layout& z, std::span<const float> flat, std::span<float> padded) {
  for (const models::Zero1Layout::Run& r : z.Runs()) {
    std::copy_n(flat.begin() + r.flat, r.length, padded.begin() + r.pos);
  }
}
void UnpackZero1(const models::Zero1Layout& z, std::span<const float> padded,
                 std::span<float> flat) {
  for (const models::Zero1Layout::Run& r : z.Runs()) {
    std::copy_n(padded.begin() + r.pos, r.length, flat.begin() + r.flat);
  }
}

}  // namespace

MpiCollectives::MpiCollectives(MPI_Comm comm, double timeout_s)
    : comm_(comm), timeout_s_(timeout_s) {
  PT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  PT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
}

void MpiCollectives::Wait(MPI_Request* req, const char* what) {
  WaitRequest(req, timeout_s_, [&] {
    return std::string("tensor-parallel ") + what + " (a peer of the TP group stopped)";
  });
}

void MpiCollectives::AllReduceSum(std::span<float> data) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                              MPI_SUM, comm_, &req));
  Wait(&req, "all-reduce");
  bytes_sent_ += RingBytes(models::Collective::kAllReduceRing, data.size(), size_);
}

void MpiCollectives::AllGather(std::span<const float> in, std::span<float> out) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallgather(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(),
                              static_cast<int>(in.size()), MPI_FLOAT, comm_, &req));
  Wait(&req, "all-gather");
  bytes_sent_ += RingBytes(models::Collective::kAllGather, out.size(), size_);
}

void MpiCollectives::ReduceScatterSum(std::span<const float> in, std::span<float> out) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Ireduce_scatter_block(in.data(), out.data(), static_cast<int>(out.size()),
                                         MPI_FLOAT, MPI_SUM, comm_, &req));
  Wait(&req, "reduce-scatter");
  bytes_sent_ += RingBytes(models::Collective::kReduceScatter, in.size(), size_);
}

MpiRing::MpiRing(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
  PT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  PT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
}

MpiRing::~MpiRing() {
  for (auto& [h, req] : reqs_) {
    if (req == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
}

int MpiRing::Add(MPI_Request req) {
  reqs_.emplace(next_handle_, req);
  return next_handle_++;
}

int MpiRing::SendTo(int dst, std::span<const float> data, int tag) {
  MPI_Request req;
  PT_MPI_CHECK(
      MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, dst, tag, comm_, &req));
  bytes_sent_ += static_cast<std::int64_t>(data.size() * sizeof(float));
  return Add(req);
}

int MpiRing::RecvFrom(int src, std::span<float> data, int tag) {
  MPI_Request req;
  PT_MPI_CHECK(
      MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, src, tag, comm_, &req));
  return Add(req);
}

void MpiRing::Wait(int handle) {
  auto it = reqs_.find(handle);
  if (it == reqs_.end()) throw std::logic_error("ring attention: wait on an unknown transfer");
  WaitRequest(&it->second, timeout_s_, [] {
    return std::string("ring attention transfer in the CP group (a peer stopped)");
  });
  reqs_.erase(it);
}

CpuBackend::CpuBackend(const BackendConfig& cfg)
    : cfg_(cfg),
      data_({.vocab = cfg.model.vocab,
             .seq_len = cfg.model.seq_len,
             .micro_batch = cfg.model.micro_batch,
             .seed = cfg.data_seed,
             .noise = 0.0f}),
      p2p_(cfg.pp_comm, cfg.microbatches),
      dp_reduce_(cfg.grad_comm, cfg.grad_size, cfg.timeout_s) {
  cpu::RetainFreedMemory();
  cpu::SetGemmThreads(cfg_.threads);  // execution.threads (default 1: ranks share the cores)
  if (cfg_.tp.size > 1) tp_coll_ = std::make_unique<MpiCollectives>(cfg_.tp_comm, cfg_.timeout_s);
  if (cfg_.cp.size > 1) cp_ring_ = std::make_unique<MpiRing>(cfg_.cp_comm, cfg_.timeout_s);
  const cpu::CpContext cp{cfg_.cp, cp_ring_.get(), cfg_.test_cp_unmasked};
  const int stages = static_cast<int>(cfg_.layers_per_stage.size());
  int first_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const int n = cfg_.layers_per_stage[static_cast<std::size_t>(s)];
    if (cfg_.stage_to_rank[static_cast<std::size_t>(s)] == cfg_.pp_rank) {
      cpu::ChunkSpec spec{.first_layer = first_layer,
                          .num_layers = n,
                          .first = s == 0,
                          .last = s == stages - 1,
                          .recompute = cfg_.recompute};
      auto chunk =
          std::make_unique<cpu::Chunk>(cfg_.model, spec, cfg_.tp, acc_, tp_coll_.get(), cp);
      chunk->set_loss_scale(1.0f / static_cast<float>(cfg_.microbatches * cfg_.dp));
      // Under ZeRO-1 each rank keeps the optimizer state of its block only.
      const std::size_t np =
          cfg_.zero1 ? static_cast<std::size_t>(
                           ChunkZero1Layout(*chunk, HoldsTiedCopy(s), cfg_.grad_size).shard())
                     : chunk->params().size();
      if (cfg_.ps != nullptr) {
        // The servers hold the optimizer state of every shard.
      } else if (cfg_.adam) {
        optimizers_[s] =
            std::make_unique<cpu::Adam>(np, cpu::AdamConfig{.lr = cfg_.learning_rate}, acc_);
      } else {
        optimizers_[s] = std::make_unique<cpu::Sgd>(
            np, cpu::SgdConfig{.lr = cfg_.learning_rate, .momentum = cfg_.momentum}, acc_);
      }
      chunks_[s] = std::move(chunk);
    }
    first_layer += n;
  }
  tokens_.resize(data_.tokens_per_microbatch());
  labels_.resize(data_.tokens_per_microbatch());
  if (cfg_.ps != nullptr) {
    ps_ = cfg_.ps;
    if (cfg_.dp_rank == 0) {
      for (auto& [s, c] : chunks_) ps_->SendInitial(s, std::as_const(*c).params());
    }
  }
}

// Requests still posted when a step fails: p2p_ cancels the receives, MPI_Finalize or abort
// takes care of the rest.
CpuBackend::~CpuBackend() = default;

cpu::Chunk& CpuBackend::chunk(int stage) {
  auto it = chunks_.find(stage);
  if (it == chunks_.end()) {
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }
  return *it->second;
}

cpu::Tensor& CpuBackend::NewBuffer(Key k) {
  const int stage = std::get<1>(k);
  const cpu::Index rows = chunk(stage).activation_rows();
  auto [it, inserted] = buffers_.try_emplace(
      k, cpu::Tensor(acc_, cpu::MemCategory::kComm, rows, chunk(stage).dims().hidden));
  if (!inserted) throw std::logic_error("buffer allocated twice");
  return it->second;
}

cpu::Tensor CpuBackend::Take(Key k) {
  auto it = buffers_.find(k);
  if (it == buffers_.end()) {
    throw std::logic_error("missing buffer for stage " + std::to_string(std::get<1>(k)) +
                           ", microbatch " + std::to_string(std::get<2>(k)));
  }
  cpu::Tensor t = std::move(it->second);
  buffers_.erase(it);
  return t;
}

void CpuBackend::BeginStep(std::int64_t step) {
  step_ = step;
  step_loss_ = 0;
  tied_synced_ = false;
  for (auto& [s, c] : chunks_) {
    c->ZeroGrads();
    sp_synced_[s] = false;
  }
}

void CpuBackend::Compute(const Action& a) {
  const int s = a.stage;
  const int mb = a.microbatch;
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  const auto local = [&](int stage) {
    return stage >= 0 && stage <= last &&
           cfg_.stage_to_rank[static_cast<std::size_t>(stage)] == cfg_.pp_rank;
  };
  cpu::Chunk& c = chunk(s);
  const std::int64_t global_mb = static_cast<std::int64_t>(cfg_.dp_rank) * cfg_.microbatches + mb;
  switch (a.kind) {
    case ActionKind::kForward: {
      cpu::Chunk::ForwardArgs args;
      args.step = step_;
      args.sample = global_mb;
      cpu::Tensor input;
      if (s == 0 || s == last) data_.Fill(step_, global_mb, tokens_, labels_);
      if (s == 0) {
        args.tokens = tokens_;
      } else {
        input = Take({local(s - 1) ? kActOut : kActIn, local(s - 1) ? s - 1 : s, mb});
        args.input = input.span();
      }
      if (s == last) {
        args.labels = labels_;
      } else {
        args.output = NewBuffer({kActOut, s, mb}).span();
      }
      step_loss_ += static_cast<double>(c.Forward(mb, args));
      break;  // `input` is released here: the chunk saved what it needs
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput: {
      cpu::Tensor grad_output;
      if (s != last) {
        grad_output = Take({local(s + 1) ? kGradOut : kGradIn, local(s + 1) ? s + 1 : s, mb});
      }
      std::span<float> grad_input;
      if (s != 0) grad_input = NewBuffer({kGradOut, s, mb}).span();
      if (a.kind == ActionKind::kBackward) {
        c.Backward(mb, grad_output.span(), grad_input);
      } else {
        c.BackwardInput(mb, grad_output.span(), grad_input);
      }
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
      if (ps_) break;  // the servers stepped it; REDUCE_GRAD pulled the parameters
      if (HoldsTiedCopy(s) && !tied_synced_) SumTiedEmbeddingGrads(a);
      if (!cfg_.zero1) {
        optimizers_.at(s)->Step(c.params(), c.grads());
        break;
      }
      {
        // Step this rank's block, then all-gather the parameters (in a padded buffer).
        const models::Zero1Layout z = ZeroLayout(s);
        const auto shard = static_cast<std::size_t>(z.shard());
        const std::size_t begin = shard * static_cast<std::size_t>(cfg_.grad_rank);
        cpu::Tensor& g = zero_grads_.at(s);
        cpu::Tensor gathered(acc_, cpu::MemCategory::kComm, 1, static_cast<cpu::Index>(z.padded()));
        PackZero1(z, c.params(), gathered.span());
        optimizers_.at(s)->Step(gathered.span().subspan(begin, shard), g.span().subspan(0, shard));
        reduced_shard_[s].assign(g.data(), g.data() + shard);
        dp_reduce_.AllGather(gathered.span(), shard, [&] {
          return a.ToString() + ": ZeRO-1 parameter all-gather over data parallelism";
        });
        UnpackZero1(z, gathered.span(), c.params());
        zero_grads_.erase(s);
      }
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
      throw std::logic_error("CpuBackend::Compute called with " + a.ToString());
  }
}

void CpuBackend::PostSend(const Action& a, int peer) {
  const Key k{a.kind == ActionKind::kSendF ? kActOut : kGradOut, a.stage, a.microbatch};
  auto it = buffers_.find(k);
  if (it == buffers_.end()) throw std::logic_error("nothing to send for " + a.ToString());
  p2p_.PostSend(a, peer, it->second.span(), k);
  // From here the transport holds the buffer until the send completes, a moment that
  // depends on timing: it is counted apart from the communication buffers, whose lifetime
  // follows the program (and which the simulator predicts byte for byte).
  it->second.Recategorize(cpu::MemCategory::kSending);
}

void CpuBackend::PostRecv(const Action& a, int peer) {
  const Key k{a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch};
  p2p_.PostRecv(a, peer, NewBuffer(k).span(), k);
}

bool CpuBackend::TestRecv(const Action& a) {
  return p2p_.TestRecv({a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch}, a);
}

bool CpuBackend::TestSends() {
  return p2p_.TestSends([&](const Key& k) { Take(k); });  // releases the buffer
}

void CpuBackend::StartReduceGrad(int stage) {
  cpu::Chunk& c = chunk(stage);
  if (cfg_.tp.sequence_parallel && !sp_synced_[stage]) {
    c.SyncSequenceParallelGrads();
    sp_synced_[stage] = true;
  }
  const std::span<float> g = c.grads();
  if (ps_) {
    ps_->Push(stage, g, c.params());
    return;
  }
  const GradReduction r = Reduction(stage);
  if (!r.reduce_scatter) {
    dp_reduce_.Start(stage, g, r);
    return;
  }
  // Reduce-scatter in place in a padded copy: this rank's reduced shard lands in front.
  auto [it, inserted] = zero_grads_.try_emplace(
      stage, cpu::Tensor(acc_, cpu::MemCategory::kComm, 1, static_cast<cpu::Index>(r.elements)));
  if (!inserted) throw std::logic_error("REDUCE_GRAD twice for stage " + std::to_string(stage));
  PackZero1(ZeroLayout(stage), g, it->second.span());
  dp_reduce_.Start(stage, it->second.span(), r);
}

std::span<float> CpuBackend::TiedEmbeddingGrads(int stage) {
  if (cfg_.zero1) {  // this rank's slice, reduced over DP, at the front of its block
    return zero_grads_.at(stage).span().subspan(
        0, static_cast<std::size_t>(ZeroLayout(stage).tied_shard));
  }
  cpu::Chunk& c = chunk(stage);
  const gpt::ParamInfo& p = c.layout().Find("embed.tok");
  return c.grads().subspan(p.offset, static_cast<std::size_t>(p.size()));
}

void CpuBackend::SumTiedEmbeddingGrads(const Action& a) {
  // After the data-parallel reduction (OPT waits for every REDUCE_GRAD of the rank), as
  // Megatron-LM all-reduces the word embeddings' gradients over its embedding group once the
  // DP reduction is done. Both sides add the same two numbers, so the copies stay identical.
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  const int other = a.stage == 0 ? last : 0;
  const std::span<float> mine = TiedEmbeddingGrads(a.stage);
  const int peer = cfg_.stage_to_rank[static_cast<std::size_t>(other)];
  if (peer == cfg_.pp_rank) {  // both copies on this rank (a V-shaped placement)
    const std::span<float> theirs = TiedEmbeddingGrads(other);
    for (std::size_t i = 0; i < mine.size(); ++i) theirs[i] = mine[i] = mine[i] + theirs[i];
    tied_synced_ = true;
    return;
  }
  // The partner's copy arrives in a buffer that lives inside this OPT (workspace).
  cpu::Tensor theirs(acc_, cpu::MemCategory::kWorkspace, 1, static_cast<cpu::Index>(mine.size()));
  const int tag = TiedEmbeddingTag();
  const int n = static_cast<int>(mine.size());
  MPI_Request reqs[2];
  PT_MPI_CHECK(MPI_Irecv(theirs.data(), n, MPI_FLOAT, peer, tag, cfg_.pp_comm, &reqs[0]));
  PT_MPI_CHECK(MPI_Isend(mine.data(), n, MPI_FLOAT, peer, tag, cfg_.pp_comm, &reqs[1]));
  for (MPI_Request& r : reqs) {
    WaitRequest(&r, cfg_.timeout_s, [&] {
      return a.ToString() + ": the tied embedding's gradient sum with pipeline rank " +
             std::to_string(peer) + " (stage " + std::to_string(other) + ")";
    });
  }
  const float* t = theirs.data();
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] += t[i];
  tied_bytes_sent_ += static_cast<std::int64_t>(mine.size() * sizeof(float));
  tied_synced_ = true;
}

int CpuBackend::TiedEmbeddingTag() const {
  // Past every tag of the pipeline transfers (HostTransfers::Tag) on the same communicator.
  return 2 * static_cast<int>(cfg_.layers_per_stage.size()) * cfg_.microbatches;
}

GradReduction CpuBackend::Reduction(int stage) const {
  if (!cfg_.zero1) {
    return HostGradReduce::Describe(chunks_.at(stage)->params().size(), false, cfg_.grad_size);
  }
  const auto padded = static_cast<std::size_t>(ZeroLayout(stage).padded());
  return {padded, true, RingBytes(models::Collective::kReduceScatter, padded, cfg_.grad_size)};
}

bool CpuBackend::HoldsTiedCopy(int stage) const {
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  return cfg_.model.tied_embeddings && last > 0 && (stage == 0 || stage == last);
}

models::Zero1Layout CpuBackend::ZeroLayout(int stage) const {
  return ChunkZero1Layout(*chunks_.at(stage), HoldsTiedCopy(stage), cfg_.grad_size);
}

bool CpuBackend::TestReduceGrad(int stage) {
  return ps_ ? ps_->Test(stage) : dp_reduce_.Test(stage);
}

MemoryBytes CpuBackend::PeakMemory() const {
  MemoryBytes m;
  auto peak = [&](cpu::MemCategory c) { return static_cast<std::int64_t>(acc_.peak(c)); };
  m.params = peak(cpu::MemCategory::kParams);
  m.grads = peak(cpu::MemCategory::kGrads);
  m.optimizer = peak(cpu::MemCategory::kOptimizer);
  m.activations = peak(cpu::MemCategory::kActivations);
  m.comm_buffers = peak(cpu::MemCategory::kComm);
  return m;
}

// The peak of the categories above together (not workspace inside an action, not buffers
// the transport still holds after a send).
std::int64_t CpuBackend::PeakMemoryTotal() const {
  return static_cast<std::int64_t>(acc_.peak_accounted());
}

std::int64_t CpuBackend::BytesSent(CommGroup group) const {
  switch (group) {
    case CommGroup::kPp:
      return p2p_.bytes_sent() + tied_bytes_sent_;
    case CommGroup::kDp:
      return ps_ ? ps_->bytes_sent() : dp_reduce_.bytes_sent();
    case CommGroup::kTp:
      return tp_coll_ ? tp_coll_->bytes_sent() : 0;
    case CommGroup::kCp:
      return cp_ring_ ? cp_ring_->bytes_sent() : 0;
  }
  return 0;
}

const gpt::ParamLayout& CpuBackend::StageLayout(int stage) const {
  auto it = chunks_.find(stage);
  if (it == chunks_.end()) {
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }
  return it->second->layout();
}

std::vector<float> CpuBackend::StageGrads(int stage) const {
  auto it = chunks_.find(stage);
  if (it == chunks_.end()) {
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }
  const std::span<const float> g = std::as_const(*it->second).grads();
  if (!cfg_.zero1) return {g.begin(), g.end()};
  // ZeRO-1: the reduced gradients exist only as shards; gather them (a collective over DP:
  // every rank of the DP × CP group must ask for the same stages in the same order).
  const std::vector<float>& mine = reduced_shard_.at(stage);
  std::vector<float> all(mine.size() * static_cast<std::size_t>(cfg_.grad_size));
  PT_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                             static_cast<int>(mine.size()), MPI_FLOAT, cfg_.grad_comm));
  std::vector<float> flat(g.size());
  UnpackZero1(ZeroLayout(stage), all, flat);
  return flat;
}

std::optional<Roofline> CpuBackend::MeasureRoofline() {
  const int threads = cpu::GemmThreads();
  cpu::SetGemmThreads(1);
  Roofline r;
  r.gemm_gflops = cpu::GemmGflops(cpu::GemmImpl::kBackend, 3);
  r.memory_gb_s = cpu::TriadGbPerS(cpu::kTriadElementsCalibrate, 3);
  cpu::SetGemmThreads(threads);
  return r;
}

double CpuBackend::GradNormSquared() const {
  double sum = 0;
  for (const auto& [s, c] : chunks_) {
    for (float g : c->grads()) sum += static_cast<double>(g) * static_cast<double>(g);
  }
  return sum;
}

}  // namespace pipetwin::exec
