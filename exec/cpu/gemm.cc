#include "exec/cpu/gemm.h"

#include <Eigen/Core>
#include <atomic>
#include <cassert>
#include <mutex>

#ifdef PIPETWIN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace pipetwin::cpu {
namespace {

std::atomic<int> g_threads{1};
std::once_flag g_init;

// OpenBLAS starts with one thread per core (or OPENBLAS_NUM_THREADS): pin it to our setting
// before the first product.
void EnsureInit() {
#ifdef PIPETWIN_HAVE_OPENBLAS
  std::call_once(g_init, [] { openblas_set_num_threads(g_threads.load()); });
#endif
}

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;

template <class A, class B>
void Product(const A& a, const B& b, float alpha, float beta, Map& c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * (a * b);
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * (a * b);
  }
}

}  // namespace

void Gemm(Trans ta, Trans tb, Index m, Index n, Index k, float alpha, const float* a, Index lda,
          const float* b, Index ldb, float beta, float* c, Index ldc) {
  if (m == 0 || n == 0) return;
#ifdef PIPETWIN_HAVE_OPENBLAS
  EnsureInit();
  cblas_sgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
#else
  EigenGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

void EigenGemm(Trans ta, Trans tb, Index m, Index n, Index k, float alpha, const float* a,
               Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) {
  if (m == 0 || n == 0) return;
  Map cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {
    if (beta == 0.0f) {
      cm.setZero();
    } else {
      cm *= beta;
    }
    return;
  }
  const bool at = ta == Trans::kYes;
  const bool bt = tb == Trans::kYes;
  CMap am(a, at ? k : m, at ? m : k, Eigen::OuterStride<>(lda));
  CMap bm(b, bt ? n : k, bt ? k : n, Eigen::OuterStride<>(ldb));
  if (!at && !bt) Product(am, bm, alpha, beta, cm);
  if (!at && bt) Product(am, bm.transpose(), alpha, beta, cm);
  if (at && !bt) Product(am.transpose(), bm, alpha, beta, cm);
  if (at && bt) Product(am.transpose(), bm.transpose(), alpha, beta, cm);
}

void SetGemmThreads(int threads) {
  assert(threads >= 1);
  g_threads.store(threads);
#ifdef PIPETWIN_HAVE_OPENBLAS
  std::call_once(g_init, [] {});
  openblas_set_num_threads(threads);
#endif
}

int GemmThreads() { return g_threads.load(); }

std::string GemmLibrary() {
#ifdef PIPETWIN_HAVE_OPENBLAS
  EnsureInit();
  return std::string("OpenBLAS (") + openblas_get_corename() + ")";
#else
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
#endif
}

}  // namespace pipetwin::cpu
