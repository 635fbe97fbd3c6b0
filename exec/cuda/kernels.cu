// kernels.cu — the CUDA backend's own kernels; the math of each element is in elementwise.h.
#include <cuda_bf16.h>

#include <algorithm>

#include "exec/cuda/check.h"
#include "exec/cuda/kernels.h"

namespace pipetwin::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float ToF(float x) { return x; }
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ float FromF<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

__device__ __forceinline__ void AtomicAddT(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAddT(__nv_bfloat16* p, float v) {
  atomicAdd(p, __float2bfloat16(v));
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide sum / max for blockDim.x == kThreads; every thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float part[kThreads / 32];
  __shared__ float total;
  v = WarpSum(v);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float x = lane < kThreads / 32 ? part[lane] : 0.0f;
    x = WarpSum(x);
    if (lane == 0) total = x;
  }
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}
__device__ float BlockMax(float v) {
  __shared__ float part[kThreads / 32];
  __shared__ float total;
  v = WarpMax(v);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float x = lane < kThreads / 32 ? part[lane] : -INFINITY;
    x = WarpMax(x);
    if (lane == 0) total = x;
  }
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}

unsigned Blocks(I64 n) {
  const I64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<I64>(std::max<I64>(b, 1), 65535 * 8));
}

// Rows per block of ColumnPartialsK: 256, more where the grid's y would pass 65,535.
I64 RowsPerPartial(I64 rows) { return std::max<I64>(256, (rows + 65534) / 65535); }
I64 Partials(I64 rows) {
  return (std::max<I64>(rows, 1) + RowsPerPartial(rows) - 1) / RowsPerPartial(rows);
}

#define PT_KERNEL_LOOP(i, n)                                                     \
  for (I64 i = static_cast<I64>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<I64>(blockDim.x) * gridDim.x)

template <class T>
__global__ void CastToFloatK(const T* in, float* out, I64 n) {
  PT_KERNEL_LOOP(i, n) out[i] = ToF(in[i]);
}
template <class T>
__global__ void CastFromFloatK(const float* in, T* out, I64 n) {
  PT_KERNEL_LOOP(i, n) out[i] = FromF<T>(in[i]);
}

// One block per row.
template <class T>
__global__ void LayerNormForwardK(const T* x, const T* gamma, const T* beta, T* y, I64 h,
                                  float eps) {
  const T* xr = x + static_cast<I64>(blockIdx.x) * h;
  T* yr = y + static_cast<I64>(blockIdx.x) * h;
  float sum = 0;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) sum += ToF(xr[c]);
  const float mean = BlockSum(sum) / static_cast<float>(h);
  float sq = 0;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = ToF(xr[c]) - mean;
    sq += d * d;
  }
  const float rstd = ew::LayerNormRstd(BlockSum(sq) / static_cast<float>(h), eps);
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) {
    yr[c] = FromF<T>(ew::LayerNormForward(ToF(xr[c]), mean, rstd, ToF(gamma[c]), ToF(beta[c])));
  }
}

template <class T>
__global__ void LayerNormBackwardRowsK(const T* dy, const T* x, const T* gamma, const T* residual,
                                       T* dx, float* stats, I64 h, float eps) {
  const I64 row = blockIdx.x;
  const T* xr = x + row * h;
  const T* dyr = dy + row * h;
  float sum = 0;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) sum += ToF(xr[c]);
  const float inv_h = 1.0f / static_cast<float>(h);
  const float mean = BlockSum(sum) * inv_h;
  float sq = 0;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = ToF(xr[c]) - mean;
    sq += d * d;
  }
  const float rstd = ew::LayerNormRstd(BlockSum(sq) * inv_h, eps);
  float sd = 0, sdx = 0;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = ToF(dyr[c]) * ToF(gamma[c]);
    sd += g;
    sdx += g * ew::LayerNormXhat(ToF(xr[c]), mean, rstd);
  }
  const float mean_d = BlockSum(sd) * inv_h;
  const float mean_dx = BlockSum(sdx) * inv_h;
  for (I64 c = threadIdx.x; c < h; c += blockDim.x) {
    float v =
        ew::LayerNormBackward(ToF(dyr[c]), ToF(gamma[c]), ew::LayerNormXhat(ToF(xr[c]), mean, rstd),
                              rstd, mean_d, mean_dx);
    if (residual != nullptr) v = ew::ResidualAdd(v, ToF(residual[row * h + c]));
    dx[row * h + c] = FromF<T>(v);
  }
  if (threadIdx.x == 0) {
    stats[2 * row] = mean;
    stats[2 * row + 1] = rstd;
  }
}

// LayerNorm: dgamma += sum_r dy * xhat, dbeta += sum_r dy; a bias: db += sum_r dy.
// Column sums over rows (bias and LayerNorm parameter gradients), deterministic and spread over
// the whole GPU: block (x, y) sums kColTile columns over the y-th block of rows_per rows (each
// of its kRowThreads threads of a column a strided share, then those in order) into
// partial[y][c]; ColumnFinishK adds the partials of a column in order to its gradient. (One
// thread per column over all rows, as before, kept 4 to 16 SMs busy: 3.2 ms for a LayerNorm's
// 8,192 x 1,024 on an H200, against 16 MB to read.)
constexpr int kColTile = 32;
constexpr int kRowThreads = 8;

template <class T, bool kLayerNorm>
__global__ void ColumnPartialsK(const T* dy, const T* x, const float* stats, I64 row_begin,
                                I64 rows, I64 cols, I64 rows_per, float* part_b, float* part_g) {
  __shared__ float sb[kRowThreads][kColTile + 1];
  __shared__ float sg[kRowThreads][kColTile + 1];
  const I64 c = static_cast<I64>(blockIdx.x) * kColTile + threadIdx.x;
  const I64 r0 = static_cast<I64>(blockIdx.y) * rows_per;
  const I64 r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
  float b = 0, g = 0;
  if (c < cols) {
    for (I64 r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const I64 at = (row_begin + r) * cols + c;
      const float d = ToF(dy[at]);
      b += d;
      if constexpr (kLayerNorm) {
        g += d * ew::LayerNormXhat(ToF(x[at]), stats[2 * r], stats[2 * r + 1]);
      }
    }
  }
  sb[threadIdx.y][threadIdx.x] = b;
  sg[threadIdx.y][threadIdx.x] = g;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float tb = 0, tg = 0;
    for (int k = 0; k < kRowThreads; ++k) {
      tb += sb[k][threadIdx.x];
      tg += sg[k][threadIdx.x];
    }
    part_b[blockIdx.y * cols + c] = tb;
    if constexpr (kLayerNorm) part_g[blockIdx.y * cols + c] = tg;
  }
}

template <class T>
__global__ void ColumnFinishK(const float* partial, I64 parts, I64 cols, T* out) {
  PT_KERNEL_LOOP(c, cols) {
    float acc = 0;
    for (I64 k = 0; k < parts; ++k) acc += partial[k * cols + c];
    out[c] = FromF<T>(ToF(out[c]) + acc);
  }
}

template <class T>
__global__ void CausalSoftmaxForwardK(T* scores, I64 seq, float scale) {
  const I64 row = blockIdx.x;
  const I64 q = row % seq;
  T* s = scores + row * seq;
  float m = -INFINITY;
  for (I64 j = threadIdx.x; j <= q; j += blockDim.x) m = fmaxf(m, ToF(s[j]) * scale);
  m = BlockMax(m);
  float sum = 0;
  for (I64 j = threadIdx.x; j <= q; j += blockDim.x)
    sum += ew::SoftmaxNumerator(ToF(s[j]), scale, m);
  const float inv = 1.0f / BlockSum(sum);
  for (I64 j = threadIdx.x; j < seq; j += blockDim.x) {
    s[j] = ew::CausalMasked(q, j) ? FromF<T>(0.0f)
                                  : FromF<T>(ew::SoftmaxNumerator(ToF(s[j]), scale, m) * inv);
  }
}

template <class T>
__global__ void CausalSoftmaxBackwardK(const T* probs, T* dp, I64 seq, float scale) {
  const I64 row = blockIdx.x;
  const T* p = probs + row * seq;
  T* d = dp + row * seq;
  float dot = 0;
  for (I64 j = threadIdx.x; j < seq; j += blockDim.x) dot += ToF(p[j]) * ToF(d[j]);
  dot = BlockSum(dot);
  for (I64 j = threadIdx.x; j < seq; j += blockDim.x) {
    d[j] = FromF<T>(ew::SoftmaxBackward(ToF(p[j]), ToF(d[j]), dot, scale));
  }
}

template <class T>
__global__ void GeluForwardK(const T* x, T* y, I64 n) {
  PT_KERNEL_LOOP(i, n) y[i] = FromF<T>(ew::GeluForward(ToF(x[i])));
}
template <class T>
__global__ void GeluBackwardK(const T* x, const T* dy, T* dx, I64 n) {
  PT_KERNEL_LOOP(i, n) dx[i] = FromF<T>(ew::GeluBackward(ToF(x[i]), ToF(dy[i])));
}
template <class T>
__global__ void AddBiasK(T* y, const T* b, I64 rows, I64 cols) {
  PT_KERNEL_LOOP(i, rows * cols) y[i] = FromF<T>(ew::BiasAdd(ToF(y[i]), ToF(b[i % cols])));
}
template <class T>
__global__ void AddK(T* y, const T* x, I64 n) {
  PT_KERNEL_LOOP(i, n) y[i] = FromF<T>(ew::ResidualAdd(ToF(y[i]), ToF(x[i])));
}

template <class T>
__global__ void EmbeddingForwardK(const std::int32_t* tokens, const T* tok, const T* pos, T* y,
                                  I64 rows, I64 row_begin, I64 batch, I64 seq, I64 h) {
  PT_KERNEL_LOOP(i, rows * h) {
    const I64 r = i / h;
    const I64 c = i % h;
    const I64 g = row_begin + r;
    const I64 t = tokens[ew::TokenIndexOfRow(g, batch, seq)];
    y[i] = FromF<T>(
        ew::EmbeddingForward(ToF(tok[t * h + c]), ToF(pos[ew::PositionOfRow(g, batch) * h + c])));
  }
}
template <class T>
__global__ void EmbeddingBackwardK(const std::int32_t* tokens, const T* dy, T* dtok, T* dpos,
                                   I64 rows, I64 row_begin, I64 batch, I64 seq, I64 h) {
  PT_KERNEL_LOOP(i, rows * h) {
    const I64 r = i / h;
    const I64 c = i % h;
    const I64 g = row_begin + r;
    const I64 t = tokens[ew::TokenIndexOfRow(g, batch, seq)];
    const float d = ToF(dy[i]);
    AtomicAddT(dtok + t * h + c, d);
    AtomicAddT(dpos + ew::PositionOfRow(g, batch) * h + c, d);
  }
}

// One block per row: the row's log-sum-exp.
__device__ float RowLse(const float* lr, I64 v) {
  float m = -INFINITY;
  for (I64 j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, lr[j]);
  m = BlockMax(m);
  float sum = 0;
  for (I64 j = threadIdx.x; j < v; j += blockDim.x) sum += ew::Exp(lr[j] - m);
  return ew::LogSumExp(m, BlockSum(sum));
}

__global__ void CrossEntropyForwardK(const float* logits, const std::int32_t* labels,
                                     float* loss_sum, float loss_mult, I64 row_begin, I64 batch,
                                     I64 seq, I64 v) {
  const I64 r = blockIdx.x;
  const float* lr = logits + r * v;
  const float lse = RowLse(lr, v);
  if (threadIdx.x == 0) {
    const std::int32_t label = labels[ew::TokenIndexOfRow(row_begin + r, batch, seq)];
    atomicAdd(loss_sum, loss_mult * ew::CrossEntropyLoss(lse, lr[label]));
  }
}

template <class T>
__global__ void CrossEntropyBackwardK(const float* logits, const std::int32_t* labels, T* dlogits,
                                      float grad_scale, I64 row_begin, I64 batch, I64 seq, I64 v) {
  const I64 r = blockIdx.x;
  const float* lr = logits + r * v;
  const float lse = RowLse(lr, v);
  const std::int32_t label = labels[ew::TokenIndexOfRow(row_begin + r, batch, seq)];
  for (I64 j = threadIdx.x; j < v; j += blockDim.x) {
    dlogits[r * v + j] = FromF<T>(ew::CrossEntropyGrad(lr[j], lse, j == label, grad_scale));
  }
}

template <class T>
__global__ void AdamK(T* param, float* master, float* m, float* v, const T* grad, I64 n,
                      ew::AdamScalars a) {
  PT_KERNEL_LOOP(i, n) {
    float p = master != nullptr ? master[i] : ToF(param[i]);
    ew::AdamUpdate(p, m[i], v[i], ToF(grad[i]), a);
    if (master != nullptr) master[i] = p;
    param[i] = FromF<T>(p);
  }
}
template <class T>
__global__ void SgdK(T* param, float* master, const T* grad, I64 n, float lr) {
  PT_KERNEL_LOOP(i, n) {
    float p = master != nullptr ? master[i] : ToF(param[i]);
    ew::SgdUpdate(p, ToF(grad[i]), lr, 0.0f);
    if (master != nullptr) master[i] = p;
    param[i] = FromF<T>(p);
  }
}
template <class T>
__global__ void SumSquaresK(const T* g, I64 n, double* out) {
  float acc = 0;
  PT_KERNEL_LOOP(i, n) {
    const float x = ToF(g[i]);
    acc += x * x;
  }
  acc = BlockSum(acc);
  if (threadIdx.x == 0) atomicAdd(out, static_cast<double>(acc));
}
__global__ void ScaleCopyK(const float* in, float* out, I64 n, float alpha) {
  PT_KERNEL_LOOP(i, n) out[i] = in[i] * alpha;
}

void CheckLaunch() { PT_CUDA_CHECK(cudaGetLastError()); }

unsigned Rows(I64 rows) { return static_cast<unsigned>(rows); }

}  // namespace

template <class T>
void LaunchCastToFloat(const T* in, float* out, I64 n, cudaStream_t s) {
  CastToFloatK<<<Blocks(n), kThreads, 0, s>>>(in, out, n);
  CheckLaunch();
}
template <class T>
void LaunchCastFromFloat(const float* in, T* out, I64 n, cudaStream_t s) {
  CastFromFloatK<<<Blocks(n), kThreads, 0, s>>>(in, out, n);
  CheckLaunch();
}
template <class T>
void LaunchLayerNormForward(const T* x, const T* gamma, const T* beta, T* y, I64 rows, I64 h,
                            float eps, cudaStream_t s) {
  if (rows == 0) return;
  LayerNormForwardK<<<Rows(rows), kThreads, 0, s>>>(x, gamma, beta, y, h, eps);
  CheckLaunch();
}
template <class T, bool kLayerNorm>
void LaunchColumnSums(const T* dy, const T* x, const float* stats, I64 row_begin, I64 rows,
                      I64 cols, float* work, T* db, T* dg, cudaStream_t s) {
  const I64 parts = Partials(rows);
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile),
                  static_cast<unsigned>(parts));
  const dim3 block(kColTile, kRowThreads);
  float* part_g = kLayerNorm ? work + parts * cols : nullptr;
  ColumnPartialsK<T, kLayerNorm><<<grid, block, 0, s>>>(dy, x, stats, row_begin, rows, cols,
                                                        RowsPerPartial(rows), work, part_g);
  CheckLaunch();
  ColumnFinishK<T><<<Blocks(cols), kThreads, 0, s>>>(work, parts, cols, db);
  CheckLaunch();
  if constexpr (kLayerNorm) {
    ColumnFinishK<T><<<Blocks(cols), kThreads, 0, s>>>(part_g, parts, cols, dg);
    CheckLaunch();
  }
}
template <class T>
void LaunchLayerNormBackward(const T* dy, const T* x, const T* gamma, const T* residual, T* dx,
                             T* dgamma, T* dbeta, float* stats, float* work, I64 rows, I64 h,
                             float eps, cudaStream_t s) {
  if (rows == 0) return;
  LayerNormBackwardRowsK<<<Rows(rows), kThreads, 0, s>>>(dy, x, gamma, residual, dx, stats, h, eps);
  CheckLaunch();
  LaunchColumnSums<T, true>(dy, x, stats, 0, rows, h, work, dbeta, dgamma, s);
}
template <class T>
void LaunchCausalSoftmaxForward(T* scores, I64 rows, I64 seq, float scale, cudaStream_t s) {
  CausalSoftmaxForwardK<<<Rows(rows), kThreads, 0, s>>>(scores, seq, scale);
  CheckLaunch();
}
template <class T>
void LaunchCausalSoftmaxBackward(const T* probs, T* dp, I64 rows, I64 seq, float scale,
                                 cudaStream_t s) {
  CausalSoftmaxBackwardK<<<Rows(rows), kThreads, 0, s>>>(probs, dp, seq, scale);
  CheckLaunch();
}
template <class T>
void LaunchGeluForward(const T* x, T* y, I64 n, cudaStream_t s) {
  GeluForwardK<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  CheckLaunch();
}
template <class T>
void LaunchGeluBackward(const T* x, const T* dy, T* dx, I64 n, cudaStream_t s) {
  GeluBackwardK<<<Blocks(n), kThreads, 0, s>>>(x, dy, dx, n);
  CheckLaunch();
}
template <class T>
void LaunchAddBias(T* y, const T* b, I64 rows, I64 cols, cudaStream_t s) {
  AddBiasK<<<Blocks(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  CheckLaunch();
}
template <class T>
void LaunchBiasGrad(const T* dy, T* db, float* work, I64 row_begin, I64 rows, I64 cols,
                    cudaStream_t s) {
  if (rows == 0) return;
  LaunchColumnSums<T, false>(dy, static_cast<const T*>(nullptr), nullptr, row_begin, rows, cols,
                             work, db, static_cast<T*>(nullptr), s);
}
template <class T>
void LaunchAdd(T* y, const T* x, I64 n, cudaStream_t s) {
  AddK<<<Blocks(n), kThreads, 0, s>>>(y, x, n);
  CheckLaunch();
}
template <class T>
void LaunchEmbeddingForward(const std::int32_t* tokens, const T* tok, const T* pos, T* y, I64 rows,
                            I64 row_begin, I64 batch, I64 seq, I64 h, cudaStream_t s) {
  EmbeddingForwardK<<<Blocks(rows * h), kThreads, 0, s>>>(tokens, tok, pos, y, rows, row_begin,
                                                          batch, seq, h);
  CheckLaunch();
}
template <class T>
void LaunchEmbeddingBackward(const std::int32_t* tokens, const T* dy, T* dtok, T* dpos, I64 rows,
                             I64 row_begin, I64 batch, I64 seq, I64 h, cudaStream_t s) {
  EmbeddingBackwardK<<<Blocks(rows * h), kThreads, 0, s>>>(tokens, dy, dtok, dpos, rows, row_begin,
                                                           batch, seq, h);
  CheckLaunch();
}
void LaunchCrossEntropyForward(const float* logits, const std::int32_t* labels, float* loss_sum,
                               float loss_mult, I64 rows, I64 row_begin, I64 batch, I64 seq, I64 v,
                               cudaStream_t s) {
  CrossEntropyForwardK<<<Rows(rows), kThreads, 0, s>>>(logits, labels, loss_sum, loss_mult,
                                                       row_begin, batch, seq, v);
  CheckLaunch();
}
template <class T>
void LaunchCrossEntropyBackward(const float* logits, const std::int32_t* labels, T* dlogits,
                                float grad_scale, I64 rows, I64 row_begin, I64 batch, I64 seq,
                                I64 v, cudaStream_t s) {
  CrossEntropyBackwardK<<<Rows(rows), kThreads, 0, s>>>(logits, labels, dlogits, grad_scale,
                                                        row_begin, batch, seq, v);
  CheckLaunch();
}
template <class T>
void LaunchAdam(T* param, float* master, float* m, float* v, const T* grad, I64 n,
                const ew::AdamScalars& a, cudaStream_t s) {
  AdamK<<<Blocks(n), kThreads, 0, s>>>(param, master, m, v, grad, n, a);
  CheckLaunch();
}
template <class T>
void LaunchSgd(T* param, float* master, const T* grad, I64 n, float lr, cudaStream_t s) {
  SgdK<<<Blocks(n), kThreads, 0, s>>>(param, master, grad, n, lr);
  CheckLaunch();
}
template <class T>
void LaunchSumSquares(const T* grad, I64 n, double* out, cudaStream_t s) {
  SumSquaresK<<<Blocks(n), kThreads, 0, s>>>(grad, n, out);
  CheckLaunch();
}
I64 ColumnSumWorkspace(I64 rows, I64 cols) { return Partials(rows) * cols; }

void LaunchScaleCopy(const float* in, float* out, I64 n, float alpha, cudaStream_t s) {
  ScaleCopyK<<<Blocks(n), kThreads, 0, s>>>(in, out, n, alpha);
  CheckLaunch();
}

#define PT_INSTANTIATE(T)                                                                        \
  template void LaunchCastToFloat<T>(const T*, float*, I64, cudaStream_t);                       \
  template void LaunchCastFromFloat<T>(const float*, T*, I64, cudaStream_t);                     \
  template void LaunchLayerNormForward<T>(const T*, const T*, const T*, T*, I64, I64, float,     \
                                          cudaStream_t);                                         \
  template void LaunchLayerNormBackward<T>(const T*, const T*, const T*, const T*, T*, T*, T*,   \
                                           float*, float*, I64, I64, float, cudaStream_t);       \
  template void LaunchCausalSoftmaxForward<T>(T*, I64, I64, float, cudaStream_t);                \
  template void LaunchCausalSoftmaxBackward<T>(const T*, T*, I64, I64, float, cudaStream_t);     \
  template void LaunchGeluForward<T>(const T*, T*, I64, cudaStream_t);                           \
  template void LaunchGeluBackward<T>(const T*, const T*, T*, I64, cudaStream_t);                \
  template void LaunchAddBias<T>(T*, const T*, I64, I64, cudaStream_t);                          \
  template void LaunchBiasGrad<T>(const T*, T*, float*, I64, I64, I64, cudaStream_t);            \
  template void LaunchAdd<T>(T*, const T*, I64, cudaStream_t);                                   \
  template void LaunchEmbeddingForward<T>(const std::int32_t*, const T*, const T*, T*, I64, I64, \
                                          I64, I64, I64, cudaStream_t);                          \
  template void LaunchEmbeddingBackward<T>(const std::int32_t*, const T*, T*, T*, I64, I64, I64, \
                                           I64, I64, cudaStream_t);                              \
  template void LaunchCrossEntropyBackward<T>(const float*, const std::int32_t*, T*, float, I64, \
                                              I64, I64, I64, I64, cudaStream_t);                 \
  template void LaunchAdam<T>(T*, float*, float*, float*, const T*, I64, const ew::AdamScalars&, \
                              cudaStream_t);                                                     \
  template void LaunchSgd<T>(T*, float*, const T*, I64, float, cudaStream_t);                    \
  template void LaunchSumSquares<T>(const T*, I64, double*, cudaStream_t);

PT_INSTANTIATE(float)
PT_INSTANTIATE(__nv_bfloat16)

}  // namespace pipetwin::cuda
