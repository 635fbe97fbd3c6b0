// host_comm.h — the communication path of the backends whose tensors are float32 in host
// memory (cpu, sleep): pipeline transfers and the data-parallel gradient reduction over MPI,
// with the bytes each rank sends counted by the one table of collective formulas
// (models/comm.h), so that predicted and measured bytes agree by construction.
//
// A backend owns its buffers and names them by a key of its own; these classes post the MPI
// requests on them, test them without blocking, and tell the backend when a sent buffer may
// be released.
//
//   HostTransfers p2p(cfg.pp_comm, cfg.microbatches);
//   p2p.PostSend(action, peer, buffer, key);              // SEND_F / SEND_B
//   p2p.PostRecv(action, peer, buffer, key);              // RECV_F / RECV_B
//   if (p2p.TestRecv(key, action)) { ... }
//   p2p.TestSends([&](const HostTransfers::Key& k) { Release(k); });
//
//   HostGradReduce dp(cfg.dp_comm, cfg.dp, cfg.timeout_s);
//   GradReduction r = HostGradReduce::Describe(grads.size(), zero1, dp);
//   dp.Start(stage, buffer_of_r_elements, r);   // in place: all-reduce or reduce-scatter
//   while (!dp.Test(stage)) { ... }
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "exec/backend.h"
#include "schedule/action.h"

namespace pipetwin::exec {

// Activations (SEND_F → RECV_F) and their gradients (SEND_B → RECV_B) between pipeline ranks.
// Messages are tagged by the receiving side's (direction, stage, microbatch), so any number
// of them may be in flight between two ranks in any order.
class HostTransfers {
 public:
  using Key = std::tuple<int, int, int>;  // the backend's own name of a buffer
  HostTransfers(MPI_Comm pp_comm, int microbatches);
  ~HostTransfers();  // cancels the receives still posted (a step that failed)
  HostTransfers(const HostTransfers&) = delete;
  HostTransfers& operator=(const HostTransfers&) = delete;

  // Starts sending `data` (which must stay alive until released) for SEND_F / SEND_B `a`.
  void PostSend(const Action& a, int peer, std::span<const float> data, const Key& key);
  // Starts receiving into `data` for RECV_F / RECV_B `a`; `key` names it in TestRecv.
  void PostRecv(const Action& a, int peer, std::span<float> data, const Key& key);
  // True once the receive posted under `key` has completed; `a` names it in errors.
  bool TestRecv(const Key& key, const Action& a);
  // Tests every posted send; `released(key)` for each that completed. True when none is left.
  bool TestSends(const std::function<void(const Key&)>& released);
  std::int64_t bytes_sent() const { return bytes_sent_; }

 private:
  int Tag(int dir, int stage, int mb) const { return (stage * microbatches_ + mb) * 2 + dir; }
  MPI_Comm comm_;
  int microbatches_;
  std::map<Key, MPI_Request> recvs_;
  std::vector<std::pair<MPI_Request, Key>> sends_;
  std::int64_t bytes_sent_ = 0;
};

// The data-parallel gradient reduction of a stage (REDUCE_GRAD), in place: a ring all-reduce
// of the gradients, or under ZeRO-1 a reduce-scatter of a copy padded to a multiple of dp
// (this rank's reduced shard lands in front); and ZeRO-1's parameter all-gather after OPT.
class HostGradReduce {
 public:
  HostGradReduce(MPI_Comm dp_comm, int dp, double timeout_s);
  HostGradReduce(const HostGradReduce&) = delete;
  HostGradReduce& operator=(const HostGradReduce&) = delete;

  // Elements of the ZeRO-1 shard of `elements` parameters: ceil(elements / dp).
  static std::size_t Shard(std::size_t elements, int dp);
  // What REDUCE_GRAD does for a stage of `elements` gradients (exec/backend.h).
  static GradReduction Describe(std::size_t elements, bool zero1, int dp);

  // Starts the reduction `r` (from Describe) of `buf` (r.elements floats), in place.
  void Start(int stage, std::span<float> buf, const GradReduction& r);
  // True once the reduction of `stage` has completed (or none is in flight).
  bool Test(int stage);
  // ZeRO-1: every rank's shard of `gathered` (dp shards of `shard` elements; this rank's is
  // already in place) gathered into all of it, waiting at most the timeout.
  void AllGather(std::span<float> gathered, std::size_t shard,
                 const std::function<std::string()>& what);
  std::int64_t bytes_sent() const { return bytes_sent_; }

 private:
  MPI_Comm comm_;
  int dp_;
  double timeout_s_;
  std::map<int, MPI_Request> reqs_;
  std::int64_t bytes_sent_ = 0;
};

}  // namespace pipetwin::exec
