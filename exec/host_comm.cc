#include "exec/host_comm.h"

#include <stdexcept>

#include "exec/mpi_util.h"
#include "models/comm.h"

namespace pipetwin::exec {
namespace {

std::int64_t RingBytes(models::Collective c, std::size_t elems, int n) {
  return models::RingBytesSentPerRank(c, static_cast<std::int64_t>(elems * sizeof(float)), n);
}

}  // namespace

HostTransfers::HostTransfers(MPI_Comm pp_comm, int microbatches)
    : comm_(pp_comm), microbatches_(microbatches) {}

HostTransfers::~HostTransfers() {
  for (auto& [k, req] : recvs_) {
    if (req != MPI_REQUEST_NULL) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
    }
  }
}

void HostTransfers::PostSend(const Action& a, int peer, std::span<const float> data,
                             const Key& key) {
  const bool fwd = a.kind == ActionKind::kSendF;
  // The tag names the receiving side's (direction, stage, microbatch).
  const int tag = fwd ? Tag(0, a.stage + 1, a.microbatch) : Tag(1, a.stage - 1, a.microbatch);
  MPI_Request req;
  PT_MPI_CHECK(
      MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_, &req));
  bytes_sent_ += static_cast<std::int64_t>(data.size() * sizeof(float));
  sends_.emplace_back(req, key);
}

void HostTransfers::PostRecv(const Action& a, int peer, std::span<float> data, const Key& key) {
  const bool fwd = a.kind == ActionKind::kRecvF;
  MPI_Request req;
  PT_MPI_CHECK(MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer,
                         Tag(fwd ? 0 : 1, a.stage, a.microbatch), comm_, &req));
  recvs_[key] = req;
}

bool HostTransfers::TestRecv(const Key& key, const Action& a) {
  auto it = recvs_.find(key);
  if (it == recvs_.end()) throw std::logic_error("receive not posted: " + a.ToString());
  int done = 0;
  PT_MPI_CHECK(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE));
  if (done) recvs_.erase(it);
  return done != 0;
}

bool HostTransfers::TestSends(const std::function<void(const Key&)>& released) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    PT_MPI_CHECK(MPI_Test(&it->first, &done, MPI_STATUS_IGNORE));
    if (done) {
      released(it->second);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  return sends_.empty();
}

HostGradReduce::HostGradReduce(MPI_Comm dp_comm, int dp, double timeout_s)
    : comm_(dp_comm), dp_(dp), timeout_s_(timeout_s) {}

std::size_t HostGradReduce::Shard(std::size_t elements, int dp) {
  return (elements + static_cast<std::size_t>(dp) - 1) / static_cast<std::size_t>(dp);
}

GradReduction HostGradReduce::Describe(std::size_t elements, bool zero1, int dp) {
  if (zero1) {
    const std::size_t padded = Shard(elements, dp) * static_cast<std::size_t>(dp);
    return {padded, true, RingBytes(models::Collective::kReduceScatter, padded, dp)};
  }
  return {elements, false, RingBytes(models::Collective::kAllReduceRing, elements, dp)};
}

void HostGradReduce::Start(int stage, std::span<float> buf, const GradReduction& r) {
  if (reqs_.count(stage) > 0) {
    throw std::logic_error("REDUCE_GRAD twice for stage " + std::to_string(stage));
  }
  MPI_Request req;
  if (r.reduce_scatter) {
    PT_MPI_CHECK(MPI_Ireduce_scatter_block(
        MPI_IN_PLACE, buf.data(), static_cast<int>(r.elements / static_cast<std::size_t>(dp_)),
        MPI_FLOAT, MPI_SUM, comm_, &req));
  } else {
    PT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(r.elements), MPI_FLOAT,
                                MPI_SUM, comm_, &req));
  }
  bytes_sent_ += r.bytes_sent;
  reqs_[stage] = req;
}

bool HostGradReduce::Test(int stage) {
  auto it = reqs_.find(stage);
  if (it == reqs_.end()) return true;
  int done = 0;
  PT_MPI_CHECK(MPI_Test(&it->second, &done, MPI_STATUS_IGNORE));
  if (done) reqs_.erase(it);
  return done != 0;
}

void HostGradReduce::AllGather(std::span<float> gathered, std::size_t shard,
                               const std::function<std::string()>& what) {
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(),
                              static_cast<int>(shard), MPI_FLOAT, comm_, &req));
  WaitRequest(&req, timeout_s_, what);
  bytes_sent_ += RingBytes(models::Collective::kAllGather, gathered.size(), dp_);
}

}  // namespace pipetwin::exec
