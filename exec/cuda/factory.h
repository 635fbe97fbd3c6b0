// factory.h — constructs the CUDA backend and registers it with the executor (plain C++: no
// CUDA header, so programs that register it need not see the toolkit's headers).
//
// The factory first checks that the job is one the backend runs (bf16 or fp32, unfused
// attention, no ZeRO; any recompute mode; Error::BadInput naming the field), then returns
// Error::Failure("no CUDA device found ...") where no GPU is usable. Otherwise it picks the GPU
// from the node-local rank (MPI_Comm_split_type SHARED), creates the NCCL communicators (world
// from a unique id broadcast over MPI, then ncclCommSplit per group) and the model chunks of
// this rank. This library exists only when the project is built with PIPETWIN_WITH_CUDA; it
// is linked into `pipetwin-cuda`, never into `pipetwin` (apps/).
//
//   RegisterCudaBackend();                       // in main()
//   Expected<std::unique_ptr<Backend>> b = MakeBackend("cuda", cfg);
#pragma once

#include <memory>

#include "exec/backend.h"
#include "job/job.h"
#include "schedule/expected.h"

namespace pipetwin::exec {

// Adds "cuda" to the registry (exec/backend_registry.h).
void RegisterCudaBackend();

// Whether the CUDA backend runs this job (see above); called by the factory.
Status CheckCudaJob(const ResolvedJob& job);

// cfg.bf16: bf16 tensors with fp32 master weights and Adam state; else fp32.
// cfg.schedule: every rank's program (for the NCCL channel plan), required.
Expected<std::unique_ptr<Backend>> MakeCudaBackend(const BackendConfig& cfg);

}  // namespace pipetwin::exec
