// cuda_bench — GEMM TFLOP/s (cuBLAS, bf16 and fp32), kernel bandwidth (a copy and LayerNorm)
// and NCCL all-reduce bus bandwidth, for calibration and the closing note of a GPU run.
//
//   mpirun -np 8 cuda_bench            # one process per GPU; rank 0 prints
//
// Protocol (after nccl-tests' PERFORMANCE.md): warm-up iterations, a timed loop between CUDA
// events, the time reduced (max) across ranks, then an untimed correctness check.
// Bandwidth: algbw = bytes / time; all-reduce busbw = algbw * 2 (n - 1) / n.
// Exits 1 with a message where no GPU is.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "exec/cuda/check.h"
#include "exec/cuda/device.h"
#include "exec/cuda/kernels.h"
#include "exec/model/memory.h"

namespace {

using namespace pipetwin;
using namespace pipetwin::cuda;

constexpr int kWarmup = 5;
constexpr int kIters = 20;

template <class F>
double TimeMs(cudaStream_t s, F&& body) {
  for (int i = 0; i < kWarmup; ++i) body();
  cudaEvent_t a = nullptr, b = nullptr;
  PT_CUDA_CHECK(cudaEventCreate(&a));
  PT_CUDA_CHECK(cudaEventCreate(&b));
  PT_CUDA_CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < kIters; ++i) body();
  PT_CUDA_CHECK(cudaEventRecord(b, s));
  PT_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  PT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  PT_CUDA_CHECK(cudaEventDestroy(a));
  PT_CUDA_CHECK(cudaEventDestroy(b));
  double per = static_cast<double>(ms) / kIters, worst = 0;
  MPI_Allreduce(&per, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int Main(int rank, int world) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    if (rank == 0) std::fprintf(stderr, "cuda_bench: no CUDA device found\n");
    return 1;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  PT_CUDA_CHECK(cudaSetDevice(local % count));
  cudaStream_t s = nullptr;
  PT_CUDA_CHECK(cudaStreamCreate(&s));
  gpt::Accountant acc;
  DeviceAllocator alloc(s, acc);
  Gemm gemm(s, alloc);

  // GEMM: C[m, n] = A[m, k] B[k, n].
  for (const std::int64_t n : {2048, 4096, 8192}) {
    for (const DType t : {DType::kBf16, DType::kF32}) {
      const std::size_t e = t == DType::kBf16 ? 2 : 4;
      DeviceTensor<std::uint8_t> a(alloc, gpt::MemCategory::kWorkspace, n,
                                   n * static_cast<std::int64_t>(e));
      DeviceTensor<std::uint8_t> b(alloc, gpt::MemCategory::kWorkspace, n,
                                   n * static_cast<std::int64_t>(e));
      DeviceTensor<std::uint8_t> c(alloc, gpt::MemCategory::kWorkspace, n,
                                   n * static_cast<std::int64_t>(e));
      PT_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.bytes(), s));
      PT_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.bytes(), s));
      const RowMajorGemm g{.m = n, .n = n, .k = n, .lda = n, .ldb = n, .ldc = n};
      const double ms = TimeMs(s, [&] { gemm.Run(g, t, a.data(), b.data(), t, c.data()); });
      if (rank == 0) {
        std::printf("gemm %-4s %5lld^3: %8.3f ms  %7.1f TFLOP/s\n",
                    t == DType::kBf16 ? "bf16" : "fp32", static_cast<long long>(n), ms,
                    2.0 * std::pow(static_cast<double>(n), 3) / (ms * 1e-3) / 1e12);
      }
    }
  }

  // Kernel bandwidth: a scaled copy (read + write) and LayerNorm (read + write) over 256 MiB.
  const std::int64_t elems = 64 << 20;
  DeviceTensor<float> x(alloc, gpt::MemCategory::kWorkspace, 1, elems);
  DeviceTensor<float> y(alloc, gpt::MemCategory::kWorkspace, 1, elems);
  std::vector<float> ones(static_cast<std::size_t>(elems), 1.0f);
  PT_CUDA_CHECK(cudaMemcpyAsync(x.data(), ones.data(), x.bytes(), cudaMemcpyHostToDevice, s));
  double ms = TimeMs(s, [&] { LaunchScaleCopy(x.data(), y.data(), elems, 2.0f, s); });
  if (rank == 0) {
    std::printf("copy kernel: %.1f GB/s\n",
                2.0 * static_cast<double>(x.bytes()) / (ms * 1e-3) / 1e9);
  }
  const std::int64_t h = 8192, rows = elems / h;
  DeviceTensor<float> gamma(alloc, gpt::MemCategory::kWorkspace, 1, h);
  DeviceTensor<float> beta(alloc, gpt::MemCategory::kWorkspace, 1, h);
  PT_CUDA_CHECK(
      cudaMemcpyAsync(gamma.data(), ones.data(), gamma.bytes(), cudaMemcpyHostToDevice, s));
  PT_CUDA_CHECK(cudaMemsetAsync(beta.data(), 0, beta.bytes(), s));
  ms = TimeMs(s, [&] {
    LaunchLayerNormForward<float>(x.data(), gamma.data(), beta.data(), y.data(), rows, h, 1e-5f, s);
  });
  if (rank == 0) {
    std::printf("layernorm kernel (fp32, h %lld): %.1f GB/s\n", static_cast<long long>(h),
                2.0 * static_cast<double>(x.bytes()) / (ms * 1e-3) / 1e9);
  }
  // Correctness (untimed): the copy doubled every element.
  float probe = 0;
  LaunchScaleCopy(x.data(), y.data(), elems, 2.0f, s);
  PT_CUDA_CHECK(
      cudaMemcpyAsync(&probe, y.data() + elems - 1, sizeof probe, cudaMemcpyDeviceToHost, s));
  PT_CUDA_CHECK(cudaStreamSynchronize(s));
  if (probe != 2.0f) {
    std::fprintf(stderr, "cuda_bench: copy kernel check failed (%g)\n", static_cast<double>(probe));
    return 1;
  }

  // NCCL all-reduce over every rank.
  ncclUniqueId id{};
  if (rank == 0) PT_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  PT_NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  for (const std::int64_t n : {std::int64_t{1} << 20, std::int64_t{16} << 20, elems}) {
    ms = TimeMs(s, [&] {
      PT_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), static_cast<std::size_t>(n), ncclFloat32,
                                  ncclSum, comm, s));
    });
    const double bytes = static_cast<double>(n) * sizeof(float);
    const double algbw = bytes / (ms * 1e-3) / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    if (rank == 0) {
      std::printf(
          "nccl all-reduce %9.0f B over %d ranks: %8.3f ms  algbw %.1f GB/s  busbw %.1f GB/s\n",
          bytes, world, ms, algbw, busbw);
    }
  }
  // Correctness (untimed): all-reduce of ones gives the world size.
  LaunchScaleCopy(y.data(), x.data(), 1, 0.5f, s);  // x[0] = 1
  PT_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 1, ncclFloat32, ncclSum, comm, s));
  PT_CUDA_CHECK(cudaMemcpyAsync(&probe, x.data(), sizeof probe, cudaMemcpyDeviceToHost, s));
  PT_CUDA_CHECK(cudaStreamSynchronize(s));
  PT_NCCL_CHECK(ncclCommDestroy(comm));
  if (probe != static_cast<float>(world)) {
    std::fprintf(stderr, "cuda_bench: all-reduce check failed (%g)\n", static_cast<double>(probe));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int rc = 1;
  try {
    rc = Main(rank, world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
