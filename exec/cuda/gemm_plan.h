// gemm_plan.h — how a row-major GEMM becomes a column-major cuBLAS call (plain C++, no CUDA).
//
// The backend keeps every tensor row-major; cuBLAS is column-major. A row-major matrix X with
// row stride ld is, read column-major, X^T with leading dimension ld. So the row-major
// C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: cuBLAS gets B first, A second,
// m = C's columns, n = C's rows, and each operand's transpose flag unchanged.
//
//   RowMajorGemm g{.trans_a = false, .trans_b = true, .m = n_tok, .n = in, .k = out,
//                  .lda = out, .ldb = out, .ldc = in};            // dx = dy W^T
//   Expected<CublasCall> c = PlanGemm(g);                         // what cublasGemmEx gets
//   ReferenceColumnMajorGemm(*c, A, B, C);                        // the same on the host (tests)
//
// Batched (strided) GEMMs use the same plan with batch > 1 and element strides between
// batch entries; the attention heads of one microbatch row block are such a batch.
#pragma once

#include <cstdint>
#include <string>

#include "schedule/expected.h"

namespace pipetwin::cuda {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, all row-major with row strides
// lda/ldb/ldc (elements). op(A) = A^T when trans_a: A is then stored [k, m].
struct RowMajorGemm {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries
  float alpha = 1.0f;
  float beta = 0.0f;
};

enum class Op : std::uint8_t { kN, kT };

// The column-major call: C_cm[m, n] = alpha op(first)[m, k] op(second)[k, n] + beta C_cm.
// `first` is the row-major B operand and `second` the row-major A operand (swap_operands).
struct CublasCall {
  Op op_first = Op::kN;
  Op op_second = Op::kN;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t ld_first = 0, ld_second = 0, ldc = 0;
  std::int64_t batch = 1;
  std::int64_t stride_first = 0, stride_second = 0, stride_c = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  static constexpr bool swap_operands = true;  // first = row-major B, second = row-major A
};

// Checks shapes and leading dimensions (each at least the stored row length) and returns
// the call, or an error naming the offending field.
Expected<CublasCall> PlanGemm(const RowMajorGemm& g);

// Executes a column-major call naively on the host, exactly with BLAS semantics (for tests):
// first/second/c point at the row-major B, A and C buffers.
void ReferenceColumnMajorGemm(const CublasCall& c, const float* first, const float* second,
                              float* out);

// The CUDA chunk's GEMMs, row-major, as it issues them (CPU tests run the same descriptors).
// Linear layers: x [n, in], W [in, out], y [n, out].
RowMajorGemm LinearForwardGemm(std::int64_t n, std::int64_t in, std::int64_t out);  // y = x W
RowMajorGemm LinearInputGemm(std::int64_t n, std::int64_t in, std::int64_t out);    // dx = dy W^T
RowMajorGemm LinearWeightGemm(std::int64_t n, std::int64_t in, std::int64_t out);   // dW += x^T dy

// Causal attention of one microbatch, heads batched. qkv [B*S, 3*hl] holds [Q | K | V] with
// rows sequence-major (row = t * B + b); probabilities [B * heads * S, S]; out [B*S, hl].
// Each GEMM is for one b; the offsets (elements) say where its operands start.
struct AttentionShape {
  std::int64_t batch = 1, seq = 1, heads = 1, head_dim = 1;
  std::int64_t hl() const { return heads * head_dim; }
};
struct PlacedGemm {
  RowMajorGemm g;
  std::int64_t a_offset = 0, b_offset = 0, c_offset = 0;
};
PlacedGemm ScoresGemm(const AttentionShape& s, std::int64_t b);   // P = Q K^T (qkv, qkv → P)
PlacedGemm AttnOutGemm(const AttentionShape& s, std::int64_t b);  // O = P V (P, qkv → out)
PlacedGemm GradVGemm(const AttentionShape& s, std::int64_t b);    // dV = P^T dO (P, dout → dqkv)
PlacedGemm GradProbsGemm(const AttentionShape& s, std::int64_t b);  // dP = dO V^T (dout, qkv → dP)
PlacedGemm GradQGemm(const AttentionShape& s, std::int64_t b);      // dQ = dS K (dS, qkv → dqkv)
PlacedGemm GradKGemm(const AttentionShape& s, std::int64_t b);  // dK = dS^T Q (dS, qkv → dqkv)
// dP/dS of one b are [heads * S, S] in a workspace: GradProbsGemm's c_offset is 0 there and
// GradQGemm/GradKGemm read it at a_offset 0.

}  // namespace pipetwin::cuda
