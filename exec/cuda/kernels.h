// kernels.h — the CUDA backend's own kernels (kernels.cu), callable from host C++.
//
// Every kernel works on row-major tensors of element type T (float or __nv_bfloat16),
// computes in float32 through the per-element functions of elementwise.h, and is launched on
// the stream it is given. "Accumulate" kernels add into their output (gradients sum over
// microbatches).
//
//   LaunchGeluForward<__nv_bfloat16>(x, y, n, stream);
//   LaunchLayerNormForward<float>(x, gamma, beta, y, rows, h, 1e-5f, stream);
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/elementwise.h"

namespace pipetwin::cuda {

using I64 = std::int64_t;

template <class T>
void LaunchCastToFloat(const T* in, float* out, I64 n, cudaStream_t s);
template <class T>
void LaunchCastFromFloat(const float* in, T* out, I64 n, cudaStream_t s);

// y = LayerNorm(x) per row of h.
template <class T>
void LaunchLayerNormForward(const T* x, const T* gamma, const T* beta, T* y, I64 rows, I64 h,
                            float eps, cudaStream_t s);
// dx = LayerNorm'(x)^T dy (+ residual when not null); dgamma += sum dy*xhat, dbeta += sum dy.
// stats: a float workspace of 2 * rows (mean, rstd recomputed from the saved input x); work:
// 2 * ColumnSumWorkspace(rows, h) floats for the parameter gradients' column sums.
template <class T>
void LaunchLayerNormBackward(const T* dy, const T* x, const T* gamma, const T* residual, T* dx,
                             T* dgamma, T* dbeta, float* stats, float* work, I64 rows, I64 h,
                             float eps, cudaStream_t s);

// Floats of workspace one column sum over `rows` rows of `cols` columns takes (a partial sum
// per column and block of rows; the sums are deterministic, in a fixed order).
I64 ColumnSumWorkspace(I64 rows, I64 cols);

// In place over `rows` rows of `seq` scores (row r is query r % seq): causal softmax of
// scale * scores. Backward turns dP into dS in place, from the saved probabilities.
template <class T>
void LaunchCausalSoftmaxForward(T* scores, I64 rows, I64 seq, float scale, cudaStream_t s);
template <class T>
void LaunchCausalSoftmaxBackward(const T* probs, T* dp, I64 rows, I64 seq, float scale,
                                 cudaStream_t s);

template <class T>
void LaunchGeluForward(const T* x, T* y, I64 n, cudaStream_t s);
template <class T>
void LaunchGeluBackward(const T* x, const T* dy, T* dx, I64 n, cudaStream_t s);

// y[r, c] += b[c].
template <class T>
void LaunchAddBias(T* y, const T* b, I64 rows, I64 cols, cudaStream_t s);
// db[c] += sum over rows [row_begin, row_begin + rows) of dy[r, c]; work: ColumnSumWorkspace(rows,
// cols) floats.
template <class T>
void LaunchBiasGrad(const T* dy, T* db, float* work, I64 row_begin, I64 rows, I64 cols,
                    cudaStream_t s);
// y += x (residual), n elements.
template <class T>
void LaunchAdd(T* y, const T* x, I64 n, cudaStream_t s);

// y[i] = tok[tokens[row(i)]] + pos[position(i)] for the rows [row_begin, row_begin + rows) of a
// sequence-major microbatch; tokens are [batch, seq] b-major. Backward scatter-adds.
template <class T>
void LaunchEmbeddingForward(const std::int32_t* tokens, const T* tok, const T* pos, T* y, I64 rows,
                            I64 row_begin, I64 batch, I64 seq, I64 h, cudaStream_t s);
template <class T>
void LaunchEmbeddingBackward(const std::int32_t* tokens, const T* dy, T* dtok, T* dpos, I64 rows,
                             I64 row_begin, I64 batch, I64 seq, I64 h, cudaStream_t s);

// *loss_sum += loss_mult * sum over rows of (lse - logit[label]); logits float32 [rows, v].
void LaunchCrossEntropyForward(const float* logits, const std::int32_t* labels, float* loss_sum,
                               float loss_mult, I64 rows, I64 row_begin, I64 batch, I64 seq, I64 v,
                               cudaStream_t s);
// dlogits = grad_scale * (softmax(logits) - onehot(label)).
template <class T>
void LaunchCrossEntropyBackward(const float* logits, const std::int32_t* labels, T* dlogits,
                                float grad_scale, I64 rows, I64 row_begin, I64 batch, I64 seq,
                                I64 v, cudaStream_t s);

// Adam / SGD over n elements. master is the float32 master copy (bf16 params) or null (float
// params are their own master); param receives the updated value in T.
template <class T>
void LaunchAdam(T* param, float* master, float* m, float* v, const T* grad, I64 n,
                const ew::AdamScalars& a, cudaStream_t s);
template <class T>
void LaunchSgd(T* param, float* master, const T* grad, I64 n, float lr, cudaStream_t s);

// *out += sum of grad^2 (double accumulator).
template <class T>
void LaunchSumSquares(const T* grad, I64 n, double* out, cudaStream_t s);

// A memory-bound copy (bench/ measures its bandwidth): out = in * alpha.
void LaunchScaleCopy(const float* in, float* out, I64 n, float alpha, cudaStream_t s);

}  // namespace pipetwin::cuda
