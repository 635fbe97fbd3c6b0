// device.h — accounted device memory, the cuBLAS GEMM wrapper and the per-rank device context
// of the CUDA backend.
//
// Every device byte the backend keeps is allocated through a DeviceAllocator, stream-ordered
// (cudaMallocAsync / cudaFreeAsync on the compute stream, so freeing never synchronises the
// device), and counted by category in a gpt::Accountant — the same categories and rules as the
// CPU backend. At every new accounted peak the allocator also samples cudaMemGetInfo, so the
// report's accounting can be cross-checked against what the driver says is in use.
//
//   DeviceAllocator alloc(stream, acc);
//   DeviceTensor<__nv_bfloat16> x(alloc, gpt::MemCategory::kActivations, rows, cols);
//   Gemm gemm(stream, alloc);
//   gemm.Run(RowMajorGemm{...}, DType::kBf16, a, b, DType::kBf16, c);
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "exec/cuda/check.h"
#include "exec/cuda/gemm_plan.h"
#include "exec/model/memory.h"

namespace pipetwin::cuda {

class DeviceAllocator {
 public:
  DeviceAllocator(cudaStream_t stream, gpt::Accountant& acc);
  void* Allocate(gpt::MemCategory c, std::size_t bytes);
  void Free(void* p, gpt::MemCategory c, std::size_t bytes);
  void Recategorize(gpt::MemCategory from, gpt::MemCategory to, std::size_t bytes);
  gpt::Accountant& accountant() { return *acc_; }
  cudaStream_t stream() const { return stream_; }
  // Device memory in use by this process beyond the baseline taken at construction, sampled
  // with cudaMemGetInfo at the accounted peak (includes the pool's and libraries' overheads).
  std::int64_t driver_bytes_at_peak() const { return driver_at_peak_; }
  void ResetPeaks();
  // After a failed step (communicators aborted): stop freeing, so no call can block.
  void Abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }

 private:
  void SamplePeak();
  cudaStream_t stream_;
  gpt::Accountant* acc_;
  std::int64_t baseline_free_ = 0;
  std::int64_t driver_at_peak_ = 0;
  bool abandoned_ = false;
};

// An owning, accounted, move-only device array of T (row-major [rows, cols]).
template <class T>
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(DeviceAllocator& a, gpt::MemCategory c, std::int64_t rows, std::int64_t cols)
      : alloc_(&a), cat_(c), rows_(rows), cols_(cols) {
    if (bytes() > 0) data_ = static_cast<T*>(a.Allocate(c, bytes()));
  }
  DeviceTensor(DeviceTensor&& o) noexcept { *this = std::move(o); }
  DeviceTensor& operator=(DeviceTensor&& o) noexcept {
    if (this != &o) {
      Reset();
      alloc_ = std::exchange(o.alloc_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      cat_ = o.cat_;
      rows_ = std::exchange(o.rows_, 0);
      cols_ = std::exchange(o.cols_, 0);
    }
    return *this;
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { Reset(); }

  void Reset() {
    if (data_ != nullptr) alloc_->Free(data_, cat_, bytes());
    data_ = nullptr;
    rows_ = cols_ = 0;
  }
  // Keeps the tensor, counted from now on under `c` (e.g. workspace → saved activation).
  DeviceTensor&& As(gpt::MemCategory c) && {
    if (data_ != nullptr && c != cat_) alloc_->Recategorize(cat_, c, bytes());
    cat_ = c;
    return std::move(*this);
  }
  T* data() const { return data_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }
  std::size_t bytes() const { return static_cast<std::size_t>(size()) * sizeof(T); }
  bool empty() const { return data_ == nullptr; }

 private:
  DeviceAllocator* alloc_ = nullptr;
  T* data_ = nullptr;
  gpt::MemCategory cat_ = gpt::MemCategory::kWorkspace;
  std::int64_t rows_ = 0, cols_ = 0;
};

enum class DType : std::uint8_t { kF32, kBf16 };
template <class T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<__nv_bfloat16>() {
  return DType::kBf16;
}

// cuBLAS on one stream: row-major GEMMs (gemm_plan.h) with float32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32, so fp32 runs match the CPU reference closely).
class Gemm {
 public:
  Gemm(cudaStream_t stream, DeviceAllocator& alloc);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  // C = alpha op(A) op(B) + beta C; A and B of type ab, C of type c (bf16 inputs may write a
  // float32 C, e.g. the logits).
  void Run(const RowMajorGemm& g, DType ab, const void* a, const void* b, DType c, void* out);
  double flops() const { return flops_; }

 private:
  cublasHandle_t handle_ = nullptr;
  DeviceTensor<std::uint8_t> workspace_;
  DeviceAllocator* alloc_;
  double flops_ = 0;
};

}  // namespace pipetwin::cuda
