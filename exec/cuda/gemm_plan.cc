#include "exec/cuda/gemm_plan.h"

namespace pipetwin::cuda {

Expected<CublasCall> PlanGemm(const RowMajorGemm& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) {
    return Error::Failure("gemm: m, n, k and batch must be positive, got m " + std::to_string(g.m) +
                          ", n " + std::to_string(g.n) + ", k " + std::to_string(g.k) + ", batch " +
                          std::to_string(g.batch));
  }
  // Row length of each stored operand: A is [m, k] or, transposed, [k, m].
  const std::int64_t a_cols = g.trans_a ? g.m : g.k;
  const std::int64_t b_cols = g.trans_b ? g.k : g.n;
  if (g.lda < a_cols) {
    return Error::Failure("gemm: lda " + std::to_string(g.lda) + " < stored row length " +
                          std::to_string(a_cols) + " of A");
  }
  if (g.ldb < b_cols) {
    return Error::Failure("gemm: ldb " + std::to_string(g.ldb) + " < stored row length " +
                          std::to_string(b_cols) + " of B");
  }
  if (g.ldc < g.n) {
    return Error::Failure("gemm: ldc " + std::to_string(g.ldc) + " < n " + std::to_string(g.n));
  }
  CublasCall c;
  c.op_first = g.trans_b ? Op::kT : Op::kN;
  c.op_second = g.trans_a ? Op::kT : Op::kN;
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.ld_first = g.ldb;
  c.ld_second = g.lda;
  c.ldc = g.ldc;
  c.batch = g.batch;
  c.stride_first = g.stride_b;
  c.stride_second = g.stride_a;
  c.stride_c = g.stride_c;
  c.alpha = g.alpha;
  c.beta = g.beta;
  return c;
}

void ReferenceColumnMajorGemm(const CublasCall& c, const float* first, const float* second,
                              float* out) {
  // Column-major element (i, j) of X with leading dimension ld is X[i + j * ld].
  auto at = [](const float* x, std::int64_t ld, Op op, std::int64_t i, std::int64_t j) {
    return op == Op::kN ? x[i + j * ld] : x[j + i * ld];
  };
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const float* f = first + b * c.stride_first;
    const float* s = second + b * c.stride_second;
    float* o = out + b * c.stride_c;
    for (std::int64_t j = 0; j < c.n; ++j) {
      for (std::int64_t i = 0; i < c.m; ++i) {
        double acc = 0;
        for (std::int64_t p = 0; p < c.k; ++p) {
          acc += static_cast<double>(at(f, c.ld_first, c.op_first, i, p)) *
                 static_cast<double>(at(s, c.ld_second, c.op_second, p, j));
        }
        float& y = o[i + j * c.ldc];
        const float prev = c.beta == 0.0f ? 0.0f : c.beta * y;  // BLAS: beta 0 ignores C
        y = static_cast<float>(static_cast<double>(c.alpha) * acc) + prev;
      }
    }
  }
}

RowMajorGemm LinearForwardGemm(std::int64_t n, std::int64_t in, std::int64_t out) {
  return {.m = n, .n = out, .k = in, .lda = in, .ldb = out, .ldc = out};
}
RowMajorGemm LinearInputGemm(std::int64_t n, std::int64_t in, std::int64_t out) {
  return {.trans_b = true, .m = n, .n = in, .k = out, .lda = out, .ldb = out, .ldc = in};
}
RowMajorGemm LinearWeightGemm(std::int64_t n, std::int64_t in, std::int64_t out) {
  return {
      .trans_a = true, .m = in, .n = out, .k = n, .lda = in, .ldb = out, .ldc = out, .beta = 1.0f};
}

PlacedGemm ScoresGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.trans_b = true,
           .m = S,
           .n = S,
           .k = D,
           .lda = ldq,
           .ldb = ldq,
           .ldc = S,
           .batch = s.heads,
           .stride_a = D,
           .stride_b = D,
           .stride_c = S * S},
          b * 3 * hl,
          b * 3 * hl + hl,
          b * s.heads * S * S};
}
PlacedGemm AttnOutGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.m = S,
           .n = D,
           .k = S,
           .lda = S,
           .ldb = ldq,
           .ldc = s.batch * hl,
           .batch = s.heads,
           .stride_a = S * S,
           .stride_b = D,
           .stride_c = D},
          b * s.heads * S * S,
          b * 3 * hl + 2 * hl,
          b * hl};
}
PlacedGemm GradVGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.trans_a = true,
           .m = S,
           .n = D,
           .k = S,
           .lda = S,
           .ldb = s.batch * hl,
           .ldc = ldq,
           .batch = s.heads,
           .stride_a = S * S,
           .stride_b = D,
           .stride_c = D},
          b * s.heads * S * S,
          b * hl,
          b * 3 * hl + 2 * hl};
}
PlacedGemm GradProbsGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.trans_b = true,
           .m = S,
           .n = S,
           .k = D,
           .lda = s.batch * hl,
           .ldb = ldq,
           .ldc = S,
           .batch = s.heads,
           .stride_a = D,
           .stride_b = D,
           .stride_c = S * S},
          b * hl,
          b * 3 * hl + 2 * hl,
          0};
}
PlacedGemm GradQGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.m = S,
           .n = D,
           .k = S,
           .lda = S,
           .ldb = ldq,
           .ldc = ldq,
           .batch = s.heads,
           .stride_a = S * S,
           .stride_b = D,
           .stride_c = D},
          0,
          b * 3 * hl + hl,
          b * 3 * hl};
}
PlacedGemm GradKGemm(const AttentionShape& s, std::int64_t b) {
  const std::int64_t S = s.seq, D = s.head_dim, hl = s.hl(), ldq = s.batch * 3 * hl;
  return {{.trans_a = true,
           .m = S,
           .n = D,
           .k = S,
           .lda = S,
           .ldb = ldq,
           .ldc = ldq,
           .batch = s.heads,
           .stride_a = S * S,
           .stride_b = D,
           .stride_c = D},
          0,
          b * 3 * hl,
          b * 3 * hl + hl};
}

}  // namespace pipetwin::cuda
