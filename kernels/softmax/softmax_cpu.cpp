// Softmax and log-softmax, fast CPU path.
//
// Two layouts. inner == 1 (logits [N, C] from an inner-product layer) has each distribution in
// one contiguous row: the max and the normalization run along the row. inner > 1 (per-pixel
// classification, [N, C, H, W] along axis 1) has a distribution's classes `inner` apart, so the
// loops run over a block of positions at once, class by class, with contiguous (vectorizable)
// inner loops and the running max and sum kept per position. Work is split over OpenMP threads by
// rows, or by (outer, block of positions). exp itself stays the scalar libm call: the compiler
// vectorizes it only under -ffast-math, which this project does not use.
#include "kernels/softmax/softmax.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/softmax/softmax_cpu_internal.h"

namespace crema::kernels::cpu {
namespace {

using softmax_detail::block_max;
using softmax_detail::kBlock;
using softmax_detail::kParallelElements;

// Calls row(o) for every row when inner == 1, otherwise block(offset, n) for every block of n <=
// kBlock positions of an outer slice (offset: the flat index of its element (o, 0, i0)).
template <class Row, class Block>
void for_each_distribution(int64_t outer, int64_t C, int64_t inner, int num_threads, Row row,
                           Block block) {
  const bool parallel = outer * C * inner >= kParallelElements;
  if (inner == 1) {
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
    for (int64_t o = 0; o < outer; ++o) row(o);
    return;
  }
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
  for (int64_t task = 0; task < outer * blocks; ++task) {
    const int64_t o = task / blocks, i0 = (task % blocks) * kBlock;
    block(o * C * inner + i0, std::min(kBlock, inner - i0));
  }
}

// kFast: the fast softmax, m = 0 (no max pass).
template <bool kFast>
void softmax_row(int64_t C, const float* x, float* y) {
  float m = kFast ? 0.0f : x[0];
  if constexpr (!kFast) {
#pragma omp simd reduction(max : m)
    for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c]);
  }
  float sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    y[c] = std::exp(x[c] - m);
    sum += y[c];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] *= inv;
}

// Positions [i0, i0 + n) of one outer slice: x and y point at element (o, 0, i0).
template <bool kFast>
void softmax_block(int64_t C, int64_t inner, int64_t n, const float* x, float* y) {
  float m[kBlock], s[kBlock];
  if constexpr (kFast) {
    std::fill(m, m + n, 0.0f);
  } else {
    block_max(C, inner, n, x, m);
  }
  for (int64_t j = 0; j < n; ++j) s[j] = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      y[c * inner + j] = std::exp(x[c * inner + j] - m[j]);
      s[j] += y[c * inner + j];
    }
  }
  for (int64_t j = 0; j < n; ++j) s[j] = 1.0f / s[j];
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[c * inner + j] *= s[j];
  }
}

void softmax_backward_row(int64_t C, const float* y, const float* dy, float* dx) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < C; ++c) dot += dy[c] * y[c];
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) dx[c] = y[c] * (dy[c] - dot);
}

void softmax_backward_block(int64_t C, int64_t inner, int64_t n, const float* y, const float* dy,
                            float* dx) {
  float dot[kBlock];  // sum_c dy * y per position
  for (int64_t j = 0; j < n; ++j) dot[j] = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dot[j] += dy[c * inner + j] * y[c * inner + j];
  }
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      dx[c * inner + j] = y[c * inner + j] * (dy[c * inner + j] - dot[j]);
  }
}

// Log-softmax: y = (x - m) - log(sum_c exp(x - m)); the exps are only summed, never stored.
void log_softmax_row(int64_t C, const float* x, float* y) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c]);
  float sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(x[c] - m);
  const float log_sum = std::log(sum);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) - log_sum;
}

void log_softmax_block(int64_t C, int64_t inner, int64_t n, const float* x, float* y) {
  float m[kBlock], s[kBlock];
  block_max(C, inner, n, x, m);
  for (int64_t j = 0; j < n; ++j) s[j] = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < n; ++j) s[j] += std::exp(x[c * inner + j] - m[j]);
  }
  for (int64_t j = 0; j < n; ++j) s[j] = std::log(s[j]);
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[c * inner + j] = (x[c * inner + j] - m[j]) - s[j];
  }
}

// dx = dy - exp(y) * sum_c dy.
void log_softmax_backward_row(int64_t C, const float* y, const float* dy, float* dx) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += dy[c];
  for (int64_t c = 0; c < C; ++c) dx[c] = dy[c] - std::exp(y[c]) * sum;
}

void log_softmax_backward_block(int64_t C, int64_t inner, int64_t n, const float* y,
                                const float* dy, float* dx) {
  float sum[kBlock];
  for (int64_t j = 0; j < n; ++j) sum[j] = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) sum[j] += dy[c * inner + j];
  }
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      dx[c * inner + j] = dy[c * inner + j] - std::exp(y[c * inner + j]) * sum[j];
    }
  }
}

}  // namespace

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads, [&](int64_t o) { softmax_row<false>(C, x + o * C, y + o * C); },
      [&](int64_t offset, int64_t n) {
        softmax_block<false>(C, inner, n, x + offset, y + offset);
      });
}

void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                          int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads, [&](int64_t o) { softmax_row<true>(C, x + o * C, y + o * C); },
      [&](int64_t offset, int64_t n) { softmax_block<true>(C, inner, n, x + offset, y + offset); });
}

void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads,
      [&](int64_t o) { softmax_backward_row(C, y + o * C, dy + o * C, dx + o * C); },
      [&](int64_t offset, int64_t n) {
        softmax_backward_block(C, inner, n, y + offset, dy + offset, dx + offset);
      });
}

void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads, [&](int64_t o) { log_softmax_row(C, x + o * C, y + o * C); },
      [&](int64_t offset, int64_t n) { log_softmax_block(C, inner, n, x + offset, y + offset); });
}

void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads,
      [&](int64_t o) { log_softmax_backward_row(C, y + o * C, dy + o * C, dx + o * C); },
      [&](int64_t offset, int64_t n) {
        log_softmax_backward_block(C, inner, n, y + offset, dy + offset, dx + offset);
      });
}

}  // namespace crema::kernels::cpu
