#include "exec/cuda/check.h"

#include <mpi.h>

namespace pipetwin::cuda {

[[noreturn]] void ThrowCallError(const char* library, const char* call, const char* file, int line,
                                 const std::string& message) {
  int init = 0;
  int rank = -1;
  MPI_Initialized(&init);
  if (init != 0) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": rank " +
                  std::to_string(rank) + ": " + library + " call " + call + " failed: " + message);
}

void CheckCublas(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUBLAS_STATUS_SUCCESS) {
    ThrowCallError("cuBLAS", call, file, line,
                   std::string(cublasGetStatusName(rc)) + " (" + cublasGetStatusString(rc) + ")");
  }
}

}  // namespace pipetwin::cuda
