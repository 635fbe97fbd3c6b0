// stats.h — the one median of the project, in its two forms.
//
// Median: the middle of a sample, the mean of the two middle values for an even count (what
// calibrate reports for an action's duration). UpperMedianIndex: the index of an element that
// is itself the median, the upper middle for an even count (which measured step `run`
// reports and traces, and which jittered play `simulate --profile` reports: a real step,
// never an average of two).
//
//   double m = Median({3.0, 1.0, 2.0, 10.0});          // 2.5
//   std::size_t i = UpperMedianIndex(std::vector<double>{3.0, 1.0, 2.0, 10.0});  // 0 (3.0)
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

namespace pipetwin {

// -1 for an empty sample (callers treat it as "no sample").
inline double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The index in `v` of its upper-median element (ties keep the earlier index first).
// `v` must not be empty.
template <typename T>
std::size_t UpperMedianIndex(const std::vector<T>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  return order[order.size() / 2];
}

}  // namespace pipetwin
