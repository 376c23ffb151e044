// Softmax, log-softmax and softmax cross-entropy, fast CPU path.
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
#include <vector>

namespace crema::kernels::cpu {
namespace {

// Positions handled together in the inner > 1 layout (the per-position max and sum fit in L1).
constexpr int64_t kBlock = 256;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 13;

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

// Writes m[j] = max_c x[c * inner + j] for j < n.
void block_max(int64_t C, int64_t inner, int64_t n, const float* x, float* m) {
  for (int64_t j = 0; j < n; ++j) m[j] = x[j];
  for (int64_t c = 1; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) m[j] = std::max(m[j], x[c * inner + j]);
  }
}

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
  block_max(C, inner, n, x, m);
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

bool is_ignored(int64_t label, const SoftmaxLossOptions& options) {
  return options.has_ignore_label && label == options.ignore_label;
}

// Label smoothing, positions [i0, i0 + n) of one outer slice (x and y at element (o, 0, i0),
// labels at position (o, i0)): writes their probabilities and returns the sum of their terms
// log(s) - (1 - eps) z[label] - (eps / C) sum_c z[c], adding the counted positions to `counted`.
double smoothed_block(int64_t C, int64_t inner, int64_t n, const float* x, const float* labels,
                      const SoftmaxLossOptions& options, float* y, int64_t& counted) {
  float m[kBlock], s[kBlock], z_sum[kBlock], z_label[kBlock];
  block_max(C, inner, n, x, m);
  // z[label] before the exps overwrite the logits (y may alias x).
  for (int64_t j = 0; j < n; ++j) {
    const int64_t label = int64_t(labels[j]);
    z_label[j] = is_ignored(label, options) ? 0.0f : x[label * inner + j] - m[j];
    s[j] = 0.0f;
    z_sum[j] = 0.0f;
  }
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      const float z = x[c * inner + j] - m[j];
      y[c * inner + j] = std::exp(z);
      s[j] += y[c * inner + j];
      z_sum[j] += z;
    }
  }
  const double eps = options.label_smoothing;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (!is_ignored(int64_t(labels[j]), options)) {
      sum += std::log(double(s[j])) - (1 - eps) * z_label[j] - eps / double(C) * z_sum[j];
      ++counted;
    }
    s[j] = 1.0f / s[j];
  }
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[c * inner + j] *= s[j];
  }
  return sum;
}

// The label-smoothed forward: fixed tasks (blocks of an outer slice's positions; a position per
// task when inner == 1), their sums added in task order whatever the thread count.
void smoothed_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                    const float* labels, const SoftmaxLossOptions& options,
                                    float* prob, float* loss, int num_threads) {
  const int64_t blocks = (inner + kBlock - 1) / kBlock, tasks = outer * blocks;
  std::vector<double> partial(size_t(tasks), 0.0);
  int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t o = task / blocks, i0 = (task % blocks) * kBlock;
    const int64_t offset = o * C * inner + i0;
    partial[size_t(task)] =
        smoothed_block(C, inner, std::min(kBlock, inner - i0), logits + offset,
                       labels + o * inner + i0, options, prob + offset, counted);
  }
  double sum = 0;
  for (double p : partial) sum += p;
  loss[0] = float(sum / double(loss_normalizer(options.normalization, outer, inner, counted)));
}

}  // namespace

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads) {
  for_each_distribution(
      outer, C, inner, num_threads, [&](int64_t o) { softmax_row(C, x + o * C, y + o * C); },
      [&](int64_t offset, int64_t n) { softmax_block(C, inner, n, x + offset, y + offset); });
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

void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, int num_threads) {
  if (options.label_smoothing > 0.0f) {
    smoothed_cross_entropy_forward(outer, C, inner, logits, labels, options, prob, loss,
                                   num_threads);
    return;
  }
  softmax_forward(outer, C, inner, logits, prob, num_threads);
  // One log per position against C exps above: not worth threads, and a serial sum in double
  // gives the same loss whatever the thread count.
  double sum = 0;
  int64_t counted = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (is_ignored(label, options)) continue;
      sum -= std::log(std::max(prob[(o * C + label) * inner + i], FLT_MIN));
      ++counted;
    }
  }
  loss[0] = float(sum / double(loss_normalizer(options.normalization, outer, inner, counted)));
}

// dlogits = scale * (prob - t), t = (1 - eps) at the label plus eps / C everywhere; with eps = 0
// the subtraction of `off` is exact, so the result is the unsmoothed one bit for bit.
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    int num_threads) {
  int64_t counted = outer * inner;  // only the `valid` normalization needs the real count
  if (options.normalization == LossNormalization::valid && options.has_ignore_label) {
    for (int64_t j = 0; j < outer * inner; ++j) {
      counted -= is_ignored(int64_t(labels[j]), options) ? 1 : 0;
    }
  }
  const float scale =
      top_grad[0] / float(loss_normalizer(options.normalization, outer, inner, counted));
  const float on = 1.0f - options.label_smoothing, off = options.label_smoothing / float(C);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t o = 0; o < outer; ++o) {
    const float* p = prob + o * C * inner;  // [C, inner]
    float* d = dlogits + o * C * inner;
#pragma omp simd
    for (int64_t k = 0; k < C * inner; ++k) d[k] = scale * (p[k] - off);
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (is_ignored(label, options)) {
        for (int64_t c = 0; c < C; ++c) d[c * inner + i] = 0.0f;
      } else {
        d[label * inner + i] = scale * (p[label * inner + i] - off - on);
      }
    }
  }
}

}  // namespace crema::kernels::cpu
