# The CUDA backend builds whenever a CUDA toolkit is found; PIPETWIN_WITH_CUDA=OFF turns it off.
# check_language only chooses the option's default: with CUDA off, exec/ builds a stub backend
# that says "built without CUDA" instead of failing to link.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_pipetwin_cuda_default ON)
else()
  set(_pipetwin_cuda_default OFF)
endif()
option(PIPETWIN_WITH_CUDA "Build the CUDA backend (cuBLAS + NCCL)" ${_pipetwin_cuda_default})
if(PIPETWIN_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
