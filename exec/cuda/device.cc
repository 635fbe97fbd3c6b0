#include "exec/cuda/device.h"

#include <cstdint>
#include <limits>
#include <stdexcept>

namespace pipetwin::cuda {

DeviceAllocator::DeviceAllocator(cudaStream_t stream, gpt::Accountant& acc)
    : stream_(stream), acc_(&acc) {
  int device = 0;
  PT_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  PT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  // Keep freed blocks in the pool: no release (and no implicit synchronisation) inside a step.
  std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
  PT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  std::size_t free_b = 0, total_b = 0;
  PT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  baseline_free_ = static_cast<std::int64_t>(free_b);
}

void* DeviceAllocator::Allocate(gpt::MemCategory c, std::size_t bytes) {
  void* p = nullptr;
  PT_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream_));
  const std::size_t before = acc_->peak_total();
  acc_->Add(c, bytes);
  if (acc_->peak_total() > before) SamplePeak();
  return p;
}

void DeviceAllocator::Free(void* p, gpt::MemCategory c, std::size_t bytes) {
  acc_->Remove(c, bytes);
  if (!abandoned_) PT_CUDA_CHECK(cudaFreeAsync(p, stream_));
}

void DeviceAllocator::Recategorize(gpt::MemCategory from, gpt::MemCategory to, std::size_t bytes) {
  acc_->Remove(from, bytes);
  const std::size_t before = acc_->peak_total();
  acc_->Add(to, bytes);
  if (acc_->peak_total() > before) SamplePeak();
}

void DeviceAllocator::SamplePeak() {
  std::size_t free_b = 0, total_b = 0;
  PT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  driver_at_peak_ = baseline_free_ - static_cast<std::int64_t>(free_b);
}

void DeviceAllocator::ResetPeaks() {
  acc_->ResetPeaks();
  SamplePeak();
}

namespace {

cudaDataType_t CudaType(DType t) { return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }
cublasOperation_t CublasOp(Op o) { return o == Op::kN ? CUBLAS_OP_N : CUBLAS_OP_T; }
int Narrow(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(std::string("gemm: ") + what + " does not fit cuBLAS's int");
  }
  return static_cast<int>(v);
}

}  // namespace

Gemm::Gemm(cudaStream_t stream, DeviceAllocator& alloc) : alloc_(&alloc) {
  PT_CUBLAS_CHECK(cublasCreate(&handle_));
  PT_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // 32 MiB, as NVIDIA recommends for Hopper; counted as workspace.
  workspace_ = DeviceTensor<std::uint8_t>(alloc, gpt::MemCategory::kWorkspace, 1, 32 << 20);
  PT_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  PT_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

Gemm::~Gemm() {
  // cublasDestroy synchronises; after an aborted step the handle is left to the process exit.
  if (handle_ != nullptr && !alloc_->abandoned()) cublasDestroy(handle_);
}

void Gemm::Run(const RowMajorGemm& g, DType ab, const void* a, const void* b, DType c, void* out) {
  Expected<CublasCall> call = PlanGemm(g);
  if (!call) throw std::invalid_argument(call.error().message);
  const CublasCall& k = *call;
  PT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle_, CublasOp(k.op_first), CublasOp(k.op_second), Narrow(k.m, "m"), Narrow(k.n, "n"),
      Narrow(k.k, "k"), &k.alpha, b, CudaType(ab), Narrow(k.ld_first, "ld"), k.stride_first, a,
      CudaType(ab), Narrow(k.ld_second, "ld"), k.stride_second, &k.beta, out, CudaType(c),
      Narrow(k.ldc, "ldc"), k.stride_c, Narrow(k.batch, "batch"), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  flops_ += 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
            static_cast<double>(g.batch);
}

}  // namespace pipetwin::cuda
