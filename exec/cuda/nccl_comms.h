// nccl_comms.h — the NCCL communicators of one rank, all split from one world communicator.
//
// Rank 0 creates a unique id, MPI broadcasts it, every rank joins the world communicator
// (ncclCommInitRank); then ncclCommSplit gives the data- and tensor-parallel groups (colour:
// the group's lowest world rank, found over the group's MPI communicator) and one two-rank
// communicator per point-to-point channel of the schedule (p2p_plan.h), in the plan's order,
// with NCCL_SPLIT_NOCOLOR for the ranks outside a channel. Construction is collective over
// MPI_COMM_WORLD.
//
//   NcclComms comms(groups, plan, pp_rank);
//   ncclAllReduce(g, g, n, ncclBfloat16, ncclSum, comms.dp(), dp_stream);
//   comms.CheckAsync();   // in every Test*: throws on an asynchronous NCCL error
//   comms.Abort();        // on a timeout: no rank stays blocked in NCCL
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <vector>

#include "exec/cuda/p2p_plan.h"

namespace pipetwin::cuda {

class NcclComms {
 public:
  NcclComms(MPI_Comm pp, MPI_Comm dp, MPI_Comm tp, const P2pPlan& plan, int pp_rank);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  ncclComm_t dp() const { return dp_; }  // null when dp == 1
  ncclComm_t tp() const { return tp_; }  // null when tp == 1
  // The channel's communicator, or null when this rank is not one of its two ranks. Inside a
  // channel the sender is rank 0 and the receiver rank 1.
  ncclComm_t channel(int i) const { return channels_[static_cast<std::size_t>(i)]; }
  // Polls ncclCommGetAsyncError on every communicator; throws CudaError on an error.
  void CheckAsync() const;
  // ncclCommAbort on every communicator (idempotent); the destructor then frees nothing more.
  void Abort();

 private:
  std::vector<ncclComm_t> All() const;
  ncclComm_t world_ = nullptr;
  ncclComm_t dp_ = nullptr;
  ncclComm_t tp_ = nullptr;
  std::vector<ncclComm_t> channels_;
  bool aborted_ = false;
};

}  // namespace pipetwin::cuda
