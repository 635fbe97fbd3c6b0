#include "exec/cuda/nccl_comms.h"

#include <string>

#include "exec/cuda/check.h"

namespace pipetwin::cuda {
namespace {

void CheckMpi(int rc, const char* call, const char* file, int line) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    ThrowCallError("MPI", call, file, line, std::string(msg, static_cast<std::size_t>(len)));
  }
}
#define PT_CUDA_MPI_CHECK(call) CheckMpi((call), #call, __FILE__, __LINE__)

// The group's colour: its lowest world rank. Key: the rank inside the group.
void ColourOf(MPI_Comm group, int* colour, int* key) {
  int world = 0;
  PT_CUDA_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world));
  PT_CUDA_MPI_CHECK(MPI_Allreduce(&world, colour, 1, MPI_INT, MPI_MIN, group));
  PT_CUDA_MPI_CHECK(MPI_Comm_rank(group, key));
}

ncclComm_t Split(ncclComm_t parent, int colour, int key) {
  ncclComm_t c = nullptr;
  PT_NCCL_CHECK(ncclCommSplit(parent, colour, key, &c, nullptr));
  return c;
}

}  // namespace

NcclComms::NcclComms(MPI_Comm pp, MPI_Comm dp, MPI_Comm tp, const P2pPlan& plan, int pp_rank) {
  int rank = 0, size = 0;
  PT_CUDA_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PT_CUDA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  ncclUniqueId id{};
  if (rank == 0) PT_NCCL_CHECK(ncclGetUniqueId(&id));
  PT_CUDA_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  PT_NCCL_CHECK(ncclCommInitRank(&world_, size, id, rank));

  // Every rank takes part in every split, in the same order (sizes are uniform across ranks).
  int dp_size = 1, tp_size = 1;
  PT_CUDA_MPI_CHECK(MPI_Comm_size(dp, &dp_size));
  PT_CUDA_MPI_CHECK(MPI_Comm_size(tp, &tp_size));
  int colour = 0, key = 0;
  if (dp_size > 1) {
    ColourOf(dp, &colour, &key);
    dp_ = Split(world_, colour, key);
  }
  if (tp_size > 1) {
    ColourOf(tp, &colour, &key);
    tp_ = Split(world_, colour, key);
  }
  int pipeline = 0, pp_key = 0;
  ColourOf(pp, &pipeline, &pp_key);
  for (const Channel& c : plan.channels()) {
    const bool member = pp_rank == c.sender || pp_rank == c.receiver;
    channels_.push_back(
        Split(world_, member ? pipeline : NCCL_SPLIT_NOCOLOR, pp_rank == c.sender ? 0 : 1));
  }
}

std::vector<ncclComm_t> NcclComms::All() const {
  std::vector<ncclComm_t> all{world_, dp_, tp_};
  all.insert(all.end(), channels_.begin(), channels_.end());
  return all;
}

void NcclComms::CheckAsync() const {
  for (ncclComm_t c : All()) {
    if (c == nullptr) continue;
    ncclResult_t async = ncclSuccess;
    PT_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      ThrowCallError("NCCL", "asynchronous error (ncclCommGetAsyncError)", __FILE__, __LINE__,
                     ncclGetErrorString(async));
    }
  }
}

void NcclComms::Abort() {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t c : All()) {
    if (c != nullptr) ncclCommAbort(c);  // best effort: the run is failing already
  }
}

NcclComms::~NcclComms() {
  if (aborted_) return;
  for (ncclComm_t c : All()) {
    if (c != nullptr) ncclCommDestroy(c);
  }
}

}  // namespace pipetwin::cuda
