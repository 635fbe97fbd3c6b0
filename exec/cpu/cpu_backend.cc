#include "exec/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "models/comm.h"

namespace pipetwin::exec {
namespace {

// Bytes one rank sends in a ring collective over `elems` floats: the one table of collective
// formulas (models/comm.h), so that predicted and measured bytes agree by construction.
std::int64_t RingBytes(models::Collective c, std::size_t elems, int n) {
  return models::RingBytesSentPerRank(c, static_cast<std::int64_t>(elems * sizeof(float)), n);
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

CpuBackend::CpuBackend(const BackendConfig& cfg)
    : cfg_(cfg),
      data_({.vocab = cfg.model.vocab,
             .seq_len = cfg.model.seq_len,
             .micro_batch = cfg.model.micro_batch,
             .seed = cfg.data_seed,
             .noise = 0.0f}) {
  if (cfg_.tp.size > 1) tp_coll_ = std::make_unique<MpiCollectives>(cfg_.tp_comm, cfg_.timeout_s);
  const int stages = static_cast<int>(cfg_.layers_per_stage.size());
  int first_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const int n = cfg_.layers_per_stage[static_cast<std::size_t>(s)];
    if (cfg_.stage_to_rank[static_cast<std::size_t>(s)] == cfg_.pp_rank) {
      cpu::ChunkSpec spec{
          .first_layer = first_layer, .num_layers = n, .first = s == 0, .last = s == stages - 1};
      auto chunk = std::make_unique<cpu::Chunk>(cfg_.model, spec, cfg_.tp, acc_, tp_coll_.get());
      chunk->set_loss_scale(1.0f / static_cast<float>(cfg_.microbatches * cfg_.dp));
      // Under ZeRO-1 each rank keeps the optimizer state of its shard only.
      const std::size_t np =
          cfg_.zero1 ? (chunk->params().size() + static_cast<std::size_t>(cfg_.dp) - 1) /
                           static_cast<std::size_t>(cfg_.dp)
                     : chunk->params().size();
      if (cfg_.adam) {
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
}

CpuBackend::~CpuBackend() {
  // Requests still posted when a step fails: cancel receives, let MPI_Finalize or abort
  // take care of the rest.
  for (auto& [k, req] : recv_req_) {
    if (req != MPI_REQUEST_NULL) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
    }
  }
}

cpu::Chunk& CpuBackend::chunk(int stage) {
  auto it = chunks_.find(stage);
  if (it == chunks_.end()) {
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }
  return *it->second;
}

int CpuBackend::Tag(int kind, int stage, int mb) const {
  return (stage * cfg_.microbatches + mb) * 2 + kind;
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
      if (!cfg_.zero1) {
        optimizers_.at(s)->Step(c.params(), c.grads());
        break;
      }
      {
        // Step this rank's shard, then all-gather the parameters (in a padded buffer).
        const std::size_t n = c.params().size();
        const std::size_t shard = Shard(s);
        const std::size_t begin = shard * static_cast<std::size_t>(cfg_.dp_rank);
        cpu::Tensor& g = zero_grads_.at(s);
        cpu::Tensor gathered(acc_, cpu::MemCategory::kComm, 1,
                             static_cast<cpu::Index>(shard * static_cast<std::size_t>(cfg_.dp)));
        std::copy(c.params().begin(), c.params().end(), gathered.data());
        optimizers_.at(s)->Step(gathered.span().subspan(begin, shard), g.span().subspan(0, shard));
        reduced_shard_[s].assign(g.data(), g.data() + shard);
        MPI_Request req;
        PT_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(),
                                    static_cast<int>(shard), MPI_FLOAT, cfg_.dp_comm, &req));
        WaitRequest(&req, cfg_.timeout_s, [&] {
          return a.ToString() + ": ZeRO-1 parameter all-gather over data parallelism";
        });
        bytes_dp_ += RingBytes(models::Collective::kAllGather, gathered.span().size(), cfg_.dp);
        std::copy(gathered.data(), gathered.data() + n, c.params().begin());
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
  const bool fwd = a.kind == ActionKind::kSendF;
  const Key k{fwd ? kActOut : kGradOut, a.stage, a.microbatch};
  auto it = buffers_.find(k);
  if (it == buffers_.end()) throw std::logic_error("nothing to send for " + a.ToString());
  MPI_Request req;
  // The tag names the receiving side's (kind, stage, microbatch).
  const int tag = fwd ? Tag(0, a.stage + 1, a.microbatch) : Tag(1, a.stage - 1, a.microbatch);
  const std::span<float> data = it->second.span();
  PT_MPI_CHECK(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag,
                         cfg_.pp_comm, &req));
  bytes_pp_ += static_cast<std::int64_t>(data.size() * sizeof(float));
  // From here the transport holds the buffer until the send completes, a moment that
  // depends on timing: it is counted apart from the communication buffers, whose lifetime
  // follows the program (and which the simulator predicts byte for byte).
  it->second.Recategorize(cpu::MemCategory::kSending);
  sends_.push_back({req, k});
}

void CpuBackend::PostRecv(const Action& a, int peer) {
  const bool fwd = a.kind == ActionKind::kRecvF;
  const Key k{fwd ? kActIn : kGradIn, a.stage, a.microbatch};
  cpu::Tensor& buf = NewBuffer(k);
  MPI_Request req;
  PT_MPI_CHECK(MPI_Irecv(buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, peer,
                         Tag(fwd ? 0 : 1, a.stage, a.microbatch), cfg_.pp_comm, &req));
  recv_req_[k] = req;
}

bool CpuBackend::TestRecv(const Action& a) {
  const Key k{a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch};
  auto it = recv_req_.find(k);
  if (it == recv_req_.end()) throw std::logic_error("receive not posted: " + a.ToString());
  int done = 0;
  PT_MPI_CHECK(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE));
  if (done) recv_req_.erase(it);
  return done != 0;
}

bool CpuBackend::TestSends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    PT_MPI_CHECK(MPI_Test(&it->req, &done, MPI_STATUS_IGNORE));
    if (done) {
      Take(it->key);  // releases the buffer
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  return sends_.empty();
}

void CpuBackend::StartReduceGrad(int stage) {
  cpu::Chunk& c = chunk(stage);
  if (cfg_.tp.sequence_parallel && !sp_synced_[stage]) {
    c.SyncSequenceParallelGrads();
    sp_synced_[stage] = true;
  }
  MPI_Request req;
  const std::span<float> g = c.grads();
  const GradReduction r = Reduction(stage);
  if (r.reduce_scatter) {
    // Reduce-scatter in place in a padded copy: this rank's reduced shard lands in front.
    auto [it, inserted] = zero_grads_.try_emplace(
        stage, cpu::Tensor(acc_, cpu::MemCategory::kComm, 1, static_cast<cpu::Index>(r.elements)));
    if (!inserted) throw std::logic_error("REDUCE_GRAD twice for stage " + std::to_string(stage));
    std::copy(g.begin(), g.end(), it->second.data());
    PT_MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, it->second.data(),
                                           static_cast<int>(Shard(stage)), MPI_FLOAT, MPI_SUM,
                                           cfg_.dp_comm, &req));
  } else {
    PT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, g.data(), static_cast<int>(r.elements), MPI_FLOAT,
                                MPI_SUM, cfg_.dp_comm, &req));
  }
  bytes_dp_ += r.bytes_sent;
  reduce_req_[stage] = req;
}

GradReduction CpuBackend::Reduction(int stage) const {
  if (cfg_.zero1) {
    const std::size_t padded = Shard(stage) * static_cast<std::size_t>(cfg_.dp);
    return {padded, true, RingBytes(models::Collective::kReduceScatter, padded, cfg_.dp)};
  }
  const std::size_t n = chunks_.at(stage)->grads().size();
  return {n, false, RingBytes(models::Collective::kAllReduceRing, n, cfg_.dp)};
}

std::size_t CpuBackend::Shard(int stage) const {
  const std::size_t n = chunks_.at(stage)->params().size();
  return (n + static_cast<std::size_t>(cfg_.dp) - 1) / static_cast<std::size_t>(cfg_.dp);
}

bool CpuBackend::TestReduceGrad(int stage) {
  auto it = reduce_req_.find(stage);
  if (it == reduce_req_.end()) return true;
  int done = 0;
  PT_MPI_CHECK(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE));
  if (done) reduce_req_.erase(it);
  return done != 0;
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
      return bytes_pp_;
    case CommGroup::kDp:
      return bytes_dp_;
    case CommGroup::kTp:
      return tp_coll_ ? tp_coll_->bytes_sent() : 0;
    case CommGroup::kCp:
      return 0;
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
  // every rank of the DP group must ask for the same stages in the same order).
  const std::vector<float>& mine = reduced_shard_.at(stage);
  std::vector<float> all(mine.size() * static_cast<std::size_t>(cfg_.dp));
  PT_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                             static_cast<int>(mine.size()), MPI_FLOAT, cfg_.dp_comm));
  all.resize(g.size());
  return all;
}

double CpuBackend::GradNormSquared() const {
  double sum = 0;
  for (const auto& [s, c] : chunks_) {
    for (float g : c->grads()) sum += static_cast<double>(g) * static_cast<double>(g);
  }
  return sum;
}

}  // namespace pipetwin::exec
