// Softmax cross-entropy, fast CPU path: the softmax of kernels/softmax/softmax_cpu.cpp (its
// layouts and blocks), then the loss. Without label smoothing the loss is one log per position,
// summed serially in double; with it, the terms come from the same pass as the probabilities
// (the logits may be overwritten by prob), summed per fixed task and added in task order. Either
// way the loss does not depend on the thread count.
#include "kernels/loss/softmax_cross_entropy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "kernels/softmax/softmax_cpu_internal.h"

namespace crema::kernels::cpu {
namespace {

using softmax_detail::block_max;
using softmax_detail::kBlock;
using softmax_detail::kParallelElements;

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
