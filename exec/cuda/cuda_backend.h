// cuda_backend.h — the CUDA backend: model chunks on one GPU per process (cuda_chunk.h),
// pipeline transfers over per-channel NCCL communicators (p2p_plan.h, nccl_comms.h), the
// data-parallel reduction with ncclAllReduce, all ordered by CUDA events, never by a
// device-wide synchronisation inside a step.
//
// Streams: one compute stream (kernels, cuBLAS, optimizer); one stream per point-to-point
// channel; one for the DP reduction; one for TP collectives. A send waits (cudaStreamWaitEvent)
// for the compute work that produced its buffer; the compute stream waits for a receive's
// completion event before using the buffer; the optimizer waits for the stage's reduction.
// Test* poll events (cudaEventQuery) and asynchronous NCCL errors (ncclCommGetAsyncError).
// If a step fails (e.g. the engine's deadline passes) the destructor aborts every NCCL
// communicator (ncclCommAbort) and frees nothing that could block.
//
// Timing: a CUDA event pair around every compute action; FinishStep waits for the step's
// streams and replaces the engine's host times of compute actions by device times measured
// from an event recorded in BeginStep.
#pragma once

#include <memory>

#include "exec/cuda/factory.h"

namespace pipetwin::exec {

// Device memory in use at the accounted peak according to cudaMemGetInfo (beyond what was in
// use when the backend started), or -1 when `b` is not a CUDA backend.
std::int64_t CudaDriverBytesAtPeak(const Backend& b);

}  // namespace pipetwin::exec
