// gemm.h — the CPU backend's one matrix product: row-major float32 GEMM, by OpenBLAS where the
// build has it (PIPETWIN_OPENBLAS: its kernel is chosen at run time for the processor) and by
// Eigen otherwise. Every GEMM of the layers goes through Gemm(), so that one switch decides.
//
//   // C[m, n] = alpha * A[m, k] * B[k, n]^T + beta * C  (B stored [n, k])
//   Gemm(Trans::kNo, Trans::kYes, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
//
// Threads: one per process unless SetGemmThreads says otherwise (execution.threads): ranks of
// a job share the machine's cores, so a BLAS that spreads over every core would oversubscribe.
// The setting is process-wide.
#pragma once

#include <string>

#include "exec/cpu/model.h"

namespace pipetwin::cpu {

enum class Trans : bool { kNo = false, kYes = true };

// C = alpha * op(A) * op(B) + beta * C, all row-major with leading dimensions (row strides)
// lda, ldb, ldc. op(A) is [m, k], op(B) is [k, n], C is [m, n]. beta == 0 ignores C's contents.
void Gemm(Trans ta, Trans tb, Index m, Index n, Index k, float alpha, const float* a, Index lda,
          const float* b, Index ldb, float beta, float* c, Index ldc);

// The same product by Eigen's GEMM whatever the build (benchmarks compare the two).
void EigenGemm(Trans ta, Trans tb, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc);

// Threads the GEMMs of this process may use (>= 1).
void SetGemmThreads(int threads);
int GemmThreads();

// Which implementation Gemm() uses: "OpenBLAS <version> (<kernel>)" or "Eigen <version>".
std::string GemmLibrary();

}  // namespace pipetwin::cpu
