// memory.h — the CPU backend's counted host buffers: a Buffer<T> owns a 64-byte-aligned array
// and registers its bytes with an Accountant (exec/model/memory.h) for as long as it lives;
// Eigen sees it through a row-major Map.
//
//   Accountant acc;
//   Tensor x(acc, MemCategory::kWorkspace, /*rows=*/8, /*cols=*/16);   // zero-filled
//   x.mat().setRandom();
//   saved.x = std::move(x);
//   saved.x.Recategorize(MemCategory::kActivations);   // now counted as a saved activation
//   assert(acc.current(MemCategory::kActivations) == 8 * 16 * sizeof(float));
//
// Counted bytes are exactly rows * cols * sizeof(T) (alignment padding is not counted).
#pragma once

#include <malloc.h>

#include <Eigen/Core>
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "exec/cpu/model.h"

namespace pipetwin::cpu {

static_assert(std::is_same_v<Index, Eigen::Index>, "gpt::Index must be Eigen's index type");

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMatrix<float>>;
using ConstMatMap = Eigen::Map<const RowMatrix<float>>;

// Tag for a Buffer whose every element the caller writes before reading (a GEMM output with
// beta 0, an elementwise result): no zero-fill pass over memory that is about to be written.
struct Uninitialized {};

// An owning, accounted, zero-initialised (unless Uninitialized) 2-D array (row-major).
// Move-only.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Accountant& acc, MemCategory cat, Index rows, Index cols)
      : Buffer(acc, cat, rows, cols, Uninitialized{}) {
    std::fill(data_, data_ + size(), T{});
  }
  Buffer(Accountant& acc, MemCategory cat, Index rows, Index cols, Uninitialized)
      : acc_(&acc), cat_(cat), rows_(rows), cols_(cols) {
    assert(rows >= 0 && cols >= 0);
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    if (n > 0) data_ = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kAlign}));
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

// The process keeps what it frees for its next allocations: glibc's malloc would otherwise
// map blocks above its mmap threshold afresh and return the top of its heap above the trim
// threshold, so a step's large activations and workspaces would be page-faulted and zeroed
// by the kernel again in every microbatch. The resident set stays at its high-water mark (as
// PyTorch's caching allocator keeps it); the accounted bytes are unaffected. Once per process,
// before the first step (the CPU backend and the roofline bench).
inline void RetainFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);  // blocks below 256 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // and the heap is not trimmed below 1 GiB free
}

using Tensor = Buffer<float>;
using IntTensor = Buffer<std::int32_t>;

// While a DiscardSaved lives, Keep() on this thread leaves tensors in kWorkspace: the layers
// save as usual, but the caller drops what they saved when the scope ends (the first forward
// of a recomputed block or attention core), so none of it counts as a saved activation.
// Scopes nest. One rank per thread, as for the Accountant.
class DiscardSaved {
 public:
  DiscardSaved() { ++depth_; }
  ~DiscardSaved() { --depth_; }
  DiscardSaved(const DiscardSaved&) = delete;
  DiscardSaved& operator=(const DiscardSaved&) = delete;
  static bool active() { return depth_ > 0; }

 private:
  static inline thread_local int depth_ = 0;
};

// Takes ownership of t as saved state (category kActivations; kWorkspace inside a
// DiscardSaved scope).
template <class T>
Buffer<T> Keep(Buffer<T> t) {
  if (!DiscardSaved::active()) t.Recategorize(MemCategory::kActivations);
  return t;
}

}  // namespace pipetwin::cpu
