// factory.h — constructs the CUDA backend (plain C++: usable whether or not CUDA is compiled).
//
// With PIPETWIN_WITH_CUDA=OFF the factory (stub.cc) returns Error::Failure("built without
// CUDA"); with CUDA but no usable device it returns Error::Failure("no CUDA device found ...").
// Otherwise it picks the GPU from the node-local rank (MPI_Comm_split_type SHARED), creates the
// NCCL communicators (world from a unique id broadcast over MPI, then ncclCommSplit per
// group) and the model chunks of this rank.
//
//   CudaBackendConfig cc{.base = bc, .bf16 = true, .schedule = &*sched};
//   Expected<std::unique_ptr<Backend>> b = MakeCudaBackend(cc);
#pragma once

#include <memory>

#include "exec/backend.h"
#include "exec/cpu_backend.h"
#include "schedule/expected.h"
#include "schedule/schedule.h"

namespace pipetwin::exec {

struct CudaBackendConfig {
  CpuBackendConfig base;  // model, stage split, ranks, optimizer, MPI groups, timeout
  bool bf16 = true;       // bf16 tensors with fp32 master weights and Adam state; else fp32
  const Schedule* schedule = nullptr;  // every rank's program (for the NCCL channel plan)
};

// True when this build contains the CUDA backend.
bool CudaBackendCompiled();

Expected<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendConfig& cfg);

}  // namespace pipetwin::exec
