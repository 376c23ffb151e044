// Softmax on CUDA, the pieces the softmax and the cross-entropy kernels share (included by
// softmax_cuda.cu and kernels/loss/softmax_cross_entropy_cuda.cu only): one distribution walked by
// one thread or by one warp, and the choice between the two.
//
// x, y (dy, dx) point at element (o, 0, i) of an [outer, C, inner] tensor: a distribution's C
// classes are `inner` floats apart. kLog picks log-softmax over softmax. Every element is read
// before the same thread writes it, so y may alias x and dx may alias dy.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/reduce_cuda.cuh"
#include "kernels/softmax/softmax.h"

namespace crema::kernels::cuda::softmax_detail {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// One thread: softmax stores exp(z) and scales it by 1 / s; log-softmax only sums the exps and
// writes z - log(s). kFast (softmax only) takes m = 0: no max pass.
template <bool kLog, bool kFast = false>
__device__ inline void softmax_thread(int64_t C, int64_t inner, const float* x, float* y) {
  float m = kFast ? 0.0f : -INFINITY;
  if constexpr (!kFast) {
    for (int64_t c = 0; c < C; ++c) m = fmaxf(m, x[c * inner]);
  }
  float sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    const float e = expf(x[c * inner] - m);
    if constexpr (!kLog) y[c * inner] = e;
    sum += e;
  }
  if constexpr (kLog) {
    const float log_sum = logf(sum);
    for (int64_t c = 0; c < C; ++c) y[c * inner] = (x[c * inner] - m) - log_sum;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < C; ++c) y[c * inner] *= inv;
  }
}

// Every lane of the warp calls it; lane takes classes lane, lane + 32, ...
template <bool kLog, bool kFast = false>
__device__ inline void softmax_warp(int64_t C, int64_t inner, const float* x, float* y, int lane) {
  float m = kFast ? 0.0f : -INFINITY;
  if constexpr (!kFast) {
    for (int64_t c = lane; c < C; c += 32) m = fmaxf(m, x[c * inner]);
    m = warp_max(m);
  }
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float e = expf(x[c * inner] - m);
    if constexpr (!kLog) y[c * inner] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  if constexpr (kLog) {
    const float log_sum = logf(sum);
    for (int64_t c = lane; c < C; c += 32) y[c * inner] = (x[c * inner] - m) - log_sum;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t c = lane; c < C; c += 32) y[c * inner] *= inv;
  }
}

// softmax: dx = y (dy - sum_c dy y); log-softmax: dx = dy - exp(y) sum_c dy.
template <bool kLog>
__device__ inline void softmax_backward_thread(int64_t C, int64_t inner, const float* y,
                                               const float* dy, float* dx) {
  float dot = 0.0f;
  for (int64_t c = 0; c < C; ++c) dot += kLog ? dy[c * inner] : dy[c * inner] * y[c * inner];
  for (int64_t c = 0; c < C; ++c) {
    dx[c * inner] =
        kLog ? dy[c * inner] - expf(y[c * inner]) * dot : y[c * inner] * (dy[c * inner] - dot);
  }
}

template <bool kLog>
__device__ inline void softmax_backward_warp(int64_t C, int64_t inner, const float* y,
                                             const float* dy, float* dx, int lane) {
  float dot = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    dot += kLog ? dy[c * inner] : dy[c * inner] * y[c * inner];
  }
  dot = warp_sum(dot);
  for (int64_t c = lane; c < C; c += 32) {
    dx[c * inner] =
        kLog ? dy[c * inner] - expf(y[c * inner]) * dot : y[c * inner] * (dy[c * inner] - dot);
  }
}

// --- launch geometry ---

inline bool use_warps(SoftmaxVersion version, int64_t C, int64_t inner) {
  return version == SoftmaxVersion::warp_per_position ||
         (version == SoftmaxVersion::by_shape && inner == 1 && C > 16);
}

// Blocks of kReduceThreads for `positions` positions, a position per thread or per warp.
inline int position_blocks(int64_t positions, bool warps) {
  return detail::reduce_blocks(warps ? positions * 32 : positions);
}

}  // namespace crema::kernels::cuda::softmax_detail
