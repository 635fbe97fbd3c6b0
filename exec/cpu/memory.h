// memory.h — counted memory for the CPU backend: every byte the layers keep has a category.
//
// An Accountant tallies bytes by category (params, grads, optimizer state, saved activations,
// communication buffers, transient workspace) and remembers each category's peak and the peak
// of their sum. A Buffer<T> owns a 64-byte-aligned array and registers its bytes with an
// Accountant for as long as it lives; Eigen sees it through a row-major Map.
//
//   Accountant acc;
//   Tensor x(acc, MemCategory::kWorkspace, /*rows=*/8, /*cols=*/16);   // zero-filled
//   x.mat().setRandom();
//   saved.x = std::move(x);
//   saved.x.Recategorize(MemCategory::kActivations);   // now counted as a saved activation
//   assert(acc.current(MemCategory::kActivations) == 8 * 16 * sizeof(float));
//
// Counted bytes are exactly rows * cols * sizeof(T) (alignment padding is not counted).
// An Accountant is not thread-safe: use one per rank (per thread in the in-process tests).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>
#include <utility>

namespace pipetwin::cpu {

using Index = Eigen::Index;

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMatrix<float>>;
using ConstMatMap = Eigen::Map<const RowMatrix<float>>;

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

// An owning, accounted, zero-initialised 2-D array (row-major). Move-only.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Accountant& acc, MemCategory cat, Index rows, Index cols)
      : acc_(&acc), cat_(cat), rows_(rows), cols_(cols) {
    assert(rows >= 0 && cols >= 0);
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    if (n > 0) {
      data_ = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kAlign}));
      std::fill(data_, data_ + n, T{});
    }
    acc_->Add(cat_, bytes());
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { Swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Reset();
      Swap(o);
    }
    return *this;
  }
  ~Buffer() { Reset(); }

  // Frees the array and removes its bytes from the accountant.
  void Reset() {
    if (acc_ != nullptr) acc_->Remove(cat_, bytes());
    if (data_ != nullptr) ::operator delete (data_, std::align_val_t{kAlign});
    acc_ = nullptr;
    data_ = nullptr;
    rows_ = 0;
    cols_ = 0;
  }
  // Moves the counted bytes to another category (a workspace result that becomes saved state).
  void Recategorize(MemCategory cat) {
    if (acc_ == nullptr || cat == cat_) {
      cat_ = cat;
      return;
    }
    acc_->Remove(cat_, bytes());
    cat_ = cat;
    acc_->Add(cat_, bytes());
  }

  bool empty() const { return acc_ == nullptr; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  std::size_t bytes() const { return static_cast<std::size_t>(size()) * sizeof(T); }
  MemCategory category() const { return cat_; }
  Accountant* accountant() const { return acc_; }

  std::span<T> span() { return {data_, static_cast<std::size_t>(size())}; }
  std::span<const T> span() const { return {data_, static_cast<std::size_t>(size())}; }
  Eigen::Map<RowMatrix<T>> mat() { return {data_, rows_, cols_}; }
  Eigen::Map<const RowMatrix<T>> mat() const { return {data_, rows_, cols_}; }

 private:
  static constexpr std::size_t kAlign = 64;
  void Swap(Buffer& o) noexcept {
    std::swap(acc_, o.acc_);
    std::swap(cat_, o.cat_);
    std::swap(data_, o.data_);
    std::swap(rows_, o.rows_);
    std::swap(cols_, o.cols_);
  }

  Accountant* acc_ = nullptr;
  MemCategory cat_ = MemCategory::kWorkspace;
  T* data_ = nullptr;
  Index rows_ = 0;
  Index cols_ = 0;
};

using Tensor = Buffer<float>;
using IntTensor = Buffer<std::int32_t>;

// Takes ownership of t as saved state (category kActivations).
template <class T>
Buffer<T> Keep(Buffer<T> t) {
  t.Recategorize(MemCategory::kActivations);
  return t;
}

}  // namespace pipetwin::cpu
