// The CUDA backend's factory when the project is built with PIPETWIN_WITH_CUDA=OFF.
#include "exec/cuda/factory.h"

namespace pipetwin::exec {

bool CudaBackendCompiled() { return false; }

Expected<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendConfig& /*cfg*/) {
  return Error::Failure(
      "built without CUDA: this pipetwin was configured with PIPETWIN_WITH_CUDA=OFF (or no CUDA "
      "toolkit was found); rebuild with the CUDA toolkit to use --backend cuda");
}

}  // namespace pipetwin::exec
