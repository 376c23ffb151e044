// Layer normalization over rows (inner = 1), vectorized (layer_norm_rows_cuda.cu): the entry points
// layer_norm_cuda.cu calls when rows_vector_shape holds and every pointer is 16-byte aligned.
// Included by .cu files only.
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/common/float16_cuda.cuh"

namespace crema::kernels::cuda {

// Most 16-byte vectors in a row the vectorized kernels take (4 a lane of a warp: 1024 halves or
// 512 floats); longer rows run the general kernels.
constexpr int64_t kMaxRowVectors = 128;

// Whether a row of C elements of T is a whole number of 16-byte vectors, at most kMaxRowVectors.
template <class T>
bool rows_vector_shape(int64_t C) {
  return C > 0 && C % kPerVector<T> == 0 && C / kPerVector<T> <= kMaxRowVectors;
}

// The blocks of the vectorized backward, each writing one partial [2][C] of the parameter sums:
// a function of the shape only (the sums' order, hence their bits, depends on it).
template <class T>
int64_t layer_norm_rows_partials(int64_t rows, int64_t C);

// As layer_norm_forward / layer_norm_backward for inner = 1. The backward writes dx (when not
// null) and, when partials is not null, block b's sums over its rows of dy xhat and dy into
// partials[b][0][c] and partials[b][1][c] (layer_norm_rows_partials(rows, C) blocks).
template <class T>
void layer_norm_rows_forward(int64_t rows, int64_t C, const T* x, const float* weight,
                             const float* bias, float eps, T* y, float* mean, float* rstd,
                             gpu::Stream stream);
template <class T>
void layer_norm_rows_backward(int64_t rows, int64_t C, const T* x, const T* dy, const float* weight,
                              const float* mean, const float* rstd, T* dx, float* partials,
                              gpu::Stream stream);

}  // namespace crema::kernels::cuda
