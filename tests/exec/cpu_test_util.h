// cpu_test_util.h — helpers shared by the CPU backend's tests: seeded random fills, a relative
// error, and a central finite-difference check.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "exec/model/params.h"

namespace pipetwin::cpu::testing {

inline void RandomFill(std::span<float> v, std::uint64_t seed, float scale = 1.0f) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * NormalFromKey(Mix64(seed) + i);
}

inline std::vector<float> RandomVector(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  RandomFill(v, seed, scale);
  return v;
}

// ||a - b|| / ||b|| (||a - b|| when b is 0), accumulated in double.
inline double RelErr(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Compares analytic[i] with the central difference (f(v_i + eps) - f(v_i - eps)) / 2 eps on up
// to `samples` evenly spread coordinates of v; returns the relative error over those samples.
inline double FiniteDifferenceError(std::span<float> v, std::span<const float> analytic,
                                    const std::function<double()>& objective, float eps = 1e-2f,
                                    std::size_t samples = 48) {
  EXPECT_EQ(v.size(), analytic.size());
  std::vector<float> fd;
  std::vector<float> an;
  const std::size_t step = std::max<std::size_t>(1, v.size() / samples);
  for (std::size_t i = 0; i < v.size(); i += step) {
    const float orig = v[i];
    v[i] = orig + eps;
    const double plus = objective();
    v[i] = orig - eps;
    const double minus = objective();
    v[i] = orig;
    fd.push_back(static_cast<float>((plus - minus) / (2.0 * static_cast<double>(eps))));
    an.push_back(analytic[i]);
  }
  return RelErr(an, fd);
}

// sum(w .* y) in double: the scalar objective whose gradient w.r.t. y is w.
inline double Dot(std::span<const float> y, std::span<const float> w) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    s += static_cast<double>(y[i]) * static_cast<double>(w[i]);
  }
  return s;
}

}  // namespace pipetwin::cpu::testing
