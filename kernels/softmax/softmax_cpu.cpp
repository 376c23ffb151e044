// Softmax and softmax cross-entropy, fast CPU path.
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
#include <cfloat>
#include <cmath>

namespace crema::kernels::cpu {
namespace {

// Positions handled together in the inner > 1 layout (the per-position max and sum fit in L1).
constexpr int64_t kBlock = 256;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 13;

void softmax_row(int64_t C, const float* x, float* y) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c]);
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
void softmax_block(int64_t C, int64_t inner, int64_t n, const float* x, float* y) {
  float m[kBlock], s[kBlock];
  for (int64_t j = 0; j < n; ++j) m[j] = x[j];
  for (int64_t c = 1; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) m[j] = std::max(m[j], x[c * inner + j]);
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

// Positions [i0, i0 + n) of one outer slice: y, dy and dx point at element (o, 0, i0).
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

}  // namespace

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads) {
  const bool parallel = outer * C * inner >= kParallelElements;
  if (inner == 1) {
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
    for (int64_t o = 0; o < outer; ++o) softmax_row(C, x + o * C, y + o * C);
    return;
  }
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
  for (int64_t task = 0; task < outer * blocks; ++task) {
    const int64_t o = task / blocks, i0 = (task % blocks) * kBlock;
    const int64_t offset = o * C * inner + i0;
    softmax_block(C, inner, std::min(kBlock, inner - i0), x + offset, y + offset);
  }
}

void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, int num_threads) {
  const bool parallel = outer * C * inner >= kParallelElements;
  if (inner == 1) {
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
    for (int64_t o = 0; o < outer; ++o) {
      softmax_backward_row(C, y + o * C, dy + o * C, dx + o * C);
    }
    return;
  }
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) if (parallel)
  for (int64_t task = 0; task < outer * blocks; ++task) {
    const int64_t o = task / blocks, i0 = (task % blocks) * kBlock;
    const int64_t offset = o * C * inner + i0;
    softmax_backward_block(C, inner, std::min(kBlock, inner - i0), y + offset, dy + offset,
                           dx + offset);
  }
}

void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, int num_threads) {
  softmax_forward(outer, C, inner, logits, prob, num_threads);
  // One log per position against C exps above: not worth threads, and a serial sum in double
  // gives the same loss whatever the thread count.
  double sum = 0;
  int64_t counted = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (options.has_ignore_label && label == options.ignore_label) continue;
      sum -= std::log(std::max(prob[(o * C + label) * inner + i], FLT_MIN));
      ++counted;
    }
  }
  loss[0] = float(sum / double(loss_normalizer(options.normalization, outer, inner, counted)));
}

void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    int num_threads) {
  int64_t counted = outer * inner;  // only the `valid` normalization needs the real count
  if (options.normalization == LossNormalization::valid && options.has_ignore_label) {
    for (int64_t j = 0; j < outer * inner; ++j) {
      counted -= int64_t(labels[j]) == options.ignore_label ? 1 : 0;
    }
  }
  const float scale =
      top_grad[0] / float(loss_normalizer(options.normalization, outer, inner, counted));
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t o = 0; o < outer; ++o) {
    const float* p = prob + o * C * inner;  // [C, inner]
    float* d = dlogits + o * C * inner;
#pragma omp simd
    for (int64_t k = 0; k < C * inner; ++k) d[k] = scale * p[k];
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (options.has_ignore_label && label == options.ignore_label) {
        for (int64_t c = 0; c < C; ++c) d[c * inner + i] = 0.0f;
      } else {
        d[label * inner + i] = scale * (p[label * inner + i] - 1.0f);
      }
    }
  }
}

}  // namespace crema::kernels::cpu
