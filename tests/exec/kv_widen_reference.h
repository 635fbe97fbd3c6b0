// kv_widen_reference.h — a test reference for grouped-query attention: K and V of kv heads
// widened to every query head, so that a multi-head core (kv = heads) computes what a grouped
// core computes on the narrow tensor, and the gradient summed back over each group.
//
// The executor's cores read each K/V head for its group of query heads in place (layers.h
// KvHeadOf); this copy-based path is an independent route to the same numbers.
#pragma once

#include <algorithm>
#include <cassert>

#include "exec/cpu/memory.h"

namespace pipetwin::cpu::testing {

class KvWiden {
 public:
  // [n, (heads + 2 kv) d] ↔ [n, 3 heads d]; query head j reads K/V head j / (heads / kv).
  KvWiden(Index heads, Index kv_heads, Index head_dim)
      : heads_(heads), kv_heads_(kv_heads), head_dim_(head_dim) {}
  bool active() const { return kv_heads_ != heads_; }

  Tensor Forward(const Tensor& qkv) const {
    const Index d = head_dim_, q = heads_ * d, kv = kv_heads_ * d, group = heads_ / kv_heads_;
    assert(qkv.cols() == q + 2 * kv);
    Tensor out(*qkv.accountant(), MemCategory::kWorkspace, qkv.rows(), 3 * q);
    for (Index r = 0; r < qkv.rows(); ++r) {
      const float* src = qkv.data() + r * qkv.cols();
      float* dst = out.data() + r * 3 * q;
      std::copy(src, src + q, dst);
      for (Index part = 0; part < 2; ++part) {  // K, then V
        for (Index j = 0; j < heads_; ++j) {
          std::copy_n(src + q + part * kv + (j / group) * d, d, dst + q + part * q + j * d);
        }
      }
    }
    return out;
  }

  Tensor Backward(const Tensor& dqkv) const {
    const Index d = head_dim_, q = heads_ * d, kv = kv_heads_ * d, group = heads_ / kv_heads_;
    assert(dqkv.cols() == 3 * q);
    Tensor out(*dqkv.accountant(), MemCategory::kWorkspace, dqkv.rows(), q + 2 * kv);
    for (Index r = 0; r < dqkv.rows(); ++r) {
      const float* src = dqkv.data() + r * 3 * q;
      float* dst = out.data() + r * (q + 2 * kv);
      std::copy(src, src + q, dst);
      std::fill(dst + q, dst + q + 2 * kv, 0.0f);
      for (Index part = 0; part < 2; ++part) {
        for (Index j = 0; j < heads_; ++j) {
          for (Index i = 0; i < d; ++i) {
            dst[q + part * kv + (j / group) * d + i] += src[q + part * q + j * d + i];
          }
        }
      }
    }
    return out;
  }

 private:
  Index heads_;
  Index kv_heads_;
  Index head_dim_;
};

}  // namespace pipetwin::cpu::testing
