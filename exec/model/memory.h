// memory.h — counted memory for every executor backend: each byte a backend keeps has a
// category (params, grads, optimizer state, saved activations, communication buffers,
// transient workspace). An Accountant tallies bytes by category and remembers each category's
// peak and the peak of their sum; the CPU backend's host buffers (exec/cpu/memory.h) and the
// CUDA backend's device tensors (exec/cuda/device.h) both count into one.
//
//   Accountant acc;
//   acc.Add(MemCategory::kActivations, 4096);
//   assert(acc.current(MemCategory::kActivations) == 4096);
//   acc.Remove(MemCategory::kActivations, 4096);
//
// An Accountant is not thread-safe: use one per rank (per thread in the in-process tests).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pipetwin::gpt {

// Element counts and tensor dimensions (the same type as Eigen's default index).
using Index = std::ptrdiff_t;

enum class MemCategory : std::uint8_t {
  kParams,
  kGrads,
  kOptimizer,
  kActivations,  // tensors saved between F, I and W of a microbatch
  kComm,         // communication buffers (the engine's)
  kWorkspace,    // transient tensors that live inside one action
  kSending,      // a sent buffer the transport still holds (released when the send completes)
};
inline constexpr std::size_t kNumMemCategories = 7;

std::string_view ToString(MemCategory c);

class Accountant {
 public:
  void Add(MemCategory c, std::size_t bytes);
  void Remove(MemCategory c, std::size_t bytes);

  std::size_t current(MemCategory c) const { return current_[Slot(c)]; }
  std::size_t peak(MemCategory c) const { return peak_[Slot(c)]; }
  std::size_t current_total() const { return total_; }
  std::size_t peak_total() const { return peak_total_; }
  // Peak of params + grads + optimizer + activations + comm: the categories whose lifetime
  // follows the program order alone (workspace and buffers being sent depend on timing).
  std::size_t peak_accounted() const { return peak_accounted_; }
  // Sets every peak to the current value (e.g. at the start of a measured step).
  void ResetPeaks();

 private:
  static std::size_t Slot(MemCategory c) { return static_cast<std::size_t>(c); }
  std::array<std::size_t, kNumMemCategories> current_{};
  std::array<std::size_t, kNumMemCategories> peak_{};
  std::size_t total_ = 0;
  std::size_t peak_total_ = 0;
  std::size_t accounted_ = 0;
  std::size_t peak_accounted_ = 0;
  static bool Accounted(MemCategory c) {
    return c != MemCategory::kWorkspace && c != MemCategory::kSending;
  }
};

}  // namespace pipetwin::gpt
