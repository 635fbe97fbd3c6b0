// roofline.h — what one core attains, to set the CPU backend's action rates against: the fp32
// GEMM rate on a 512 x 512 x 2048 product (fc1 of the issue-17 model: 512 tokens, hidden 512,
// ffn 2048) and the memory bandwidth of a STREAM-style triad a = b + s c. Shared by
// `pipetwin calibrate` (the profile's `roofline:`, exec/cpu/cpu_backend.cc) and
// bench/cpu_roofline.cc.
//
//   cpu::SetGemmThreads(1);
//   double gflops = cpu::GemmGflops(cpu::GemmImpl::kBackend, /*repetitions=*/3);
//   double gb_s = cpu::TriadGbPerS(cpu::kTriadElementsCalibrate, /*repetitions=*/3);
//
// Rates are over this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): what the core does while
// the thread holds it, so that a shared machine's other work does not count against the core.
// Each is the best of `repetitions` after one warm-up run. The GEMM threads are the caller's
// (SetGemmThreads): with more than one, thread CPU time misses the helpers' work.
#pragma once

#include <cstddef>
#include <vector>

#include "exec/cpu/model.h"

namespace pipetwin::cpu {

// This thread's CPU time in seconds.
double ThreadSeconds();

// C[m, n] = A[m, k] B[k, n] with m = 512, k = 512, n = 2048.
inline constexpr Index kRooflineM = 512, kRooflineK = 512, kRooflineN = 2048;
inline constexpr double kRooflineGemmFlops = 2.0 * kRooflineM * kRooflineN * kRooflineK;

// The operands, A and B filled with values in [-1, 1], C zeroed.
struct GemmOperands {
  std::vector<float> a, b, c;
  GemmOperands();
};

enum class GemmImpl { kBackend, kEigen };  // Gemm() (OpenBLAS where built), or EigenGemm()

// Thread CPU seconds of one product.
double GemmSeconds(GemmImpl impl, GemmOperands& g);
// GFLOP/s of the best of `repetitions` products after a warm-up.
double GemmGflops(GemmImpl impl, int repetitions);

// a = b + 0.5 c over three arrays of `elements` floats: 12 bytes moved per element.
inline constexpr std::size_t kTriadElementsBench = std::size_t{16} << 20;             // 3 x 64 MiB
inline constexpr std::size_t kTriadElementsCalibrate = (std::size_t{64} << 20) / 12;  // 64 MiB
struct TriadArrays {
  std::vector<float> a, b, c;
  explicit TriadArrays(std::size_t elements);
  double bytes() const { return 12.0 * static_cast<double>(a.size()); }
};
// Thread CPU seconds of one pass.
double TriadSeconds(TriadArrays& t);
// GB/s of the best of `repetitions` passes after a warm-up.
double TriadGbPerS(std::size_t elements, int repetitions);

}  // namespace pipetwin::cpu
