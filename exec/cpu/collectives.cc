#include "exec/cpu/collectives.h"

#include <algorithm>
#include <cassert>

namespace pipetwin::cpu {

ThreadGroup::ThreadGroup(int size)
    : size_(size), barrier_(size), inputs_(static_cast<std::size_t>(size), nullptr) {}

int ThreadCollectives::size() const { return group_->size(); }

void ThreadCollectives::AllReduceSum(std::span<float> data) {
  ThreadGroup& g = *group_;
  const auto me = static_cast<std::size_t>(rank_);
  std::vector<float> sum(data.size(), 0.0f);
  g.inputs_[me] = data.data();
  g.barrier_.arrive_and_wait();
  for (const float* in : g.inputs_) {
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += in[i];
  }
  g.barrier_.arrive_and_wait();  // everyone has read every input
  std::copy(sum.begin(), sum.end(), data.begin());
}

void ThreadCollectives::AllGather(std::span<const float> in, std::span<float> out) {
  ThreadGroup& g = *group_;
  assert(out.size() == in.size() * static_cast<std::size_t>(g.size_));
  g.inputs_[static_cast<std::size_t>(rank_)] = in.data();
  g.barrier_.arrive_and_wait();
  for (std::size_t r = 0; r < g.inputs_.size(); ++r) {
    std::copy(g.inputs_[r], g.inputs_[r] + in.size(),
              out.begin() + static_cast<std::ptrdiff_t>(r * in.size()));
  }
  g.barrier_.arrive_and_wait();
}

void ThreadCollectives::ReduceScatterSum(std::span<const float> in, std::span<float> out) {
  ThreadGroup& g = *group_;
  const std::size_t n = out.size();
  assert(in.size() == n * static_cast<std::size_t>(g.size_));
  g.inputs_[static_cast<std::size_t>(rank_)] = in.data();
  g.barrier_.arrive_and_wait();
  std::fill(out.begin(), out.end(), 0.0f);
  const std::size_t offset = static_cast<std::size_t>(rank_) * n;
  for (const float* src : g.inputs_) {
    for (std::size_t i = 0; i < n; ++i) out[i] += src[offset + i];
  }
  g.barrier_.arrive_and_wait();
}

}  // namespace pipetwin::cpu
