// Layer normalization, fast CPU path: the reference's passes in float32, vectorized along the
// contiguous axis. Rows (inner = 1): a task per row, each pass a vector loop over c. Columns
// (inner > 1, the channels of NCHW): a task per block of up to kBlock positions of one o, each
// pass a loop over c around a vector loop over the block's positions, with the per-position sums
// in small arrays. No sum is shared between tasks, so the results do not depend on the thread
// count.
#include <algorithm>
#include <cmath>

#include "kernels/layer_norm/layer_norm.h"

namespace crema::kernels::cpu {
namespace {

// Positions per column task: 1 KB of sums per array, on the stack.
constexpr int64_t kBlock = 256;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;

float weight_of(const float* weight, int64_t c) {
  return weight != nullptr ? weight[c] : 1.0f;
}
float bias_of(const float* bias, int64_t c) {
  return bias != nullptr ? bias[c] : 0.0f;
}

void forward_row(int64_t C, const float* x, const float* weight, const float* bias, float eps,
                 float* y, float* mean, float* rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += x[c];
  const float m = sum / float(C);
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = 0; c < C; ++c) squares += (x[c] - m) * (x[c] - m);
  const float r = 1.0f / std::sqrt(squares / float(C) + eps);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) * r * weight_of(weight, c) + bias_of(bias, c);
  *mean = m;
  *rstd = r;
}

// Positions [i0, i0 + n) of one o; x, y point at element (o, 0, i0), the stride of c is `inner`.
void forward_columns(int64_t C, int64_t inner, int64_t n, const float* x, const float* weight,
                     const float* bias, float eps, float* y, float* mean, float* rstd) {
  float sum[kBlock] = {}, squares[kBlock] = {};
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * inner;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sum[i] += xc[i];
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) mean[i] = sum[i] / float(C);
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * inner;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) squares[i] += (xc[i] - mean[i]) * (xc[i] - mean[i]);
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) rstd[i] = 1.0f / std::sqrt(squares[i] / float(C) + eps);
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * inner;
    float* yc = y + c * inner;
    const float w = weight_of(weight, c), b = bias_of(bias, c);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) yc[i] = (xc[i] - mean[i]) * rstd[i] * w + b;
  }
}

void backward_row(int64_t C, const float* x, const float* dy, const float* weight, float m, float r,
                  float* dx, float* xhat) {
  float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t c = 0; c < C; ++c) {
    const float g = dy[c] * weight_of(weight, c);
    sum_g += g;
    sum_gx += g * (x[c] - m) * r;
  }
  const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
  if (xhat != nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) xhat[c] = (x[c] - m) * r;
  }
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const float h = (x[c] - m) * r;
    dx[c] = r * (dy[c] * weight_of(weight, c) - mean_g - h * mean_gx);
  }
}

void backward_columns(int64_t C, int64_t inner, int64_t n, const float* x, const float* dy,
                      const float* weight, const float* mean, const float* rstd, float* dx,
                      float* xhat) {
  float sum_g[kBlock] = {}, sum_gx[kBlock] = {};
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * inner;
    const float* dyc = dy + c * inner;
    const float w = weight_of(weight, c);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = dyc[i] * w;
      sum_g[i] += g;
      sum_gx[i] += g * (xc[i] - mean[i]) * rstd[i];
    }
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    sum_g[i] /= float(C);
    sum_gx[i] /= float(C);
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * inner;
    const float* dyc = dy + c * inner;
    float* dxc = dx + c * inner;
    const float w = weight_of(weight, c);
    if (xhat != nullptr) {
      float* hc = xhat + c * inner;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) hc[i] = (xc[i] - mean[i]) * rstd[i];
    }
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float h = (xc[i] - mean[i]) * rstd[i];
      dxc[i] = rstd[i] * (dyc[i] * w - sum_g[i] - h * sum_gx[i]);
    }
  }
}

// body(o, i0, n) for every task: rows (inner = 1: n = 1, i0 = 0) or blocks of positions.
template <class Body>
void for_each_task(int64_t outer, int64_t C, int64_t inner, int num_threads, Body body) {
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t task = 0; task < outer * blocks; ++task) {
    const int64_t o = task / blocks, i0 = (task % blocks) * kBlock;
    body(o, i0, std::min(kBlock, inner - i0));
  }
}

}  // namespace

void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const float* x,
                        const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, int num_threads) {
  for_each_task(outer, C, inner, num_threads, [&](int64_t o, int64_t i0, int64_t n) {
    const int64_t at = o * C * inner + i0, stat = o * inner + i0;
    if (inner == 1) {
      forward_row(C, x + at, weight, bias, eps, y + at, mean + stat, rstd + stat);
    } else {
      forward_columns(C, inner, n, x + at, weight, bias, eps, y + at, mean + stat, rstd + stat);
    }
  });
}

void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* dy,
                         const float* weight, const float* mean, const float* rstd, float* dx,
                         float* xhat, int num_threads) {
  for_each_task(outer, C, inner, num_threads, [&](int64_t o, int64_t i0, int64_t n) {
    const int64_t at = o * C * inner + i0, stat = o * inner + i0;
    float* h = xhat != nullptr ? xhat + at : nullptr;
    if (inner == 1) {
      backward_row(C, x + at, dy + at, weight, mean[stat], rstd[stat], dx + at, h);
    } else {
      backward_columns(C, inner, n, x + at, dy + at, weight, mean + stat, rstd + stat, dx + at, h);
    }
  });
}

}  // namespace crema::kernels::cpu
