// check.h — checked CUDA, cuBLAS and NCCL calls.
//
// Every call of the CUDA backend goes through one of these macros; a failure throws CudaError
// whose message names the call, file:line, the MPI world rank and the library's own message.
//
//   PT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
//   PT_CUBLAS_CHECK(cublasGemmEx(...));
//   PT_NCCL_CHECK(ncclSend(buf, n, ncclBfloat16, peer, comm, stream));
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace pipetwin::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void ThrowCallError(const char* library, const char* call, const char* file, int line,
                                 const std::string& message);

inline void CheckCuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess) ThrowCallError("CUDA", call, file, line, cudaGetErrorString(rc));
}
void CheckCublas(cublasStatus_t rc, const char* call, const char* file, int line);
inline void CheckNccl(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc != ncclSuccess && rc != ncclInProgress) {
    ThrowCallError("NCCL", call, file, line, ncclGetErrorString(rc));
  }
}

}  // namespace pipetwin::cuda

#define PT_CUDA_CHECK(call) ::pipetwin::cuda::CheckCuda((call), #call, __FILE__, __LINE__)
#define PT_CUBLAS_CHECK(call) ::pipetwin::cuda::CheckCublas((call), #call, __FILE__, __LINE__)
#define PT_NCCL_CHECK(call) ::pipetwin::cuda::CheckNccl((call), #call, __FILE__, __LINE__)
