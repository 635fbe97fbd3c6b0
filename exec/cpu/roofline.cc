#include "exec/cpu/roofline.h"

#include <time.h>

#include <algorithm>
#include <cstdint>

#include "exec/cpu/gemm.h"

namespace pipetwin::cpu {

double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

GemmOperands::GemmOperands()
    : a(static_cast<std::size_t>(kRooflineM * kRooflineK)),
      b(static_cast<std::size_t>(kRooflineK * kRooflineN)),
      c(static_cast<std::size_t>(kRooflineM * kRooflineN), 0.0f) {
  // Values in [-1, 1] from a multiplicative hash: a GEMM's speed does not depend on them, and
  // the normal deviates of NormalFromKey took half of calibrate's measurement to draw.
  auto fill = [](std::vector<float>& v, std::uint64_t seed) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint64_t h = (i + seed) * 0x9E3779B97F4A7C15ULL;
      v[i] = static_cast<float>(h >> 40) / static_cast<float>(1 << 23) - 1.0f;
    }
  };
  fill(a, 1);
  fill(b, 2);
}

double GemmSeconds(GemmImpl impl, GemmOperands& g) {
  const double t0 = ThreadSeconds();
  (impl == GemmImpl::kEigen ? EigenGemm : Gemm)(
      Trans::kNo, Trans::kNo, kRooflineM, kRooflineN, kRooflineK, 1.0f, g.a.data(), kRooflineK,
      g.b.data(), kRooflineN, 0.0f, g.c.data(), kRooflineN);
  return ThreadSeconds() - t0;
}

double GemmGflops(GemmImpl impl, int repetitions) {
  GemmOperands g;
  GemmSeconds(impl, g);  // warm up
  double best = 1e30;
  for (int i = 0; i < std::max(1, repetitions); ++i) best = std::min(best, GemmSeconds(impl, g));
  return kRooflineGemmFlops / std::max(best, 1e-12) * 1e-9;
}

TriadArrays::TriadArrays(std::size_t elements)
    : a(elements, 0.0f), b(elements, 1.0f), c(elements, 2.0f) {}

double TriadSeconds(TriadArrays& t) {
  const double t0 = ThreadSeconds();
  float* pa = t.a.data();
  const float* pb = t.b.data();
  const float* pc = t.c.data();
  const std::size_t n = t.a.size();
  // The arrays belong to the caller and the clock is an opaque call: the stores stay, before it.
  for (std::size_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
  return ThreadSeconds() - t0;
}

double TriadGbPerS(std::size_t elements, int repetitions) {
  TriadArrays t(elements);
  TriadSeconds(t);  // warm up
  double best = 1e30;
  for (int i = 0; i < std::max(1, repetitions); ++i) best = std::min(best, TriadSeconds(t));
  return t.bytes() / std::max(best, 1e-12) * 1e-9;
}

}  // namespace pipetwin::cpu
