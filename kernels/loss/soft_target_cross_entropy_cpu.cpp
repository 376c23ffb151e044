// Soft-target cross-entropy, fast CPU path: kernels/softmax's block layout (kBlock positions of an
// outer slice at a time, each class a contiguous run of them), the term's pieces taken in the
// same pass as the probabilities (the logits may be overwritten by prob), the terms summed per
// fixed task in double and the tasks added in order: the loss does not depend on the thread
// count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/loss/soft_target_cross_entropy.h"
#include "kernels/softmax/softmax_cpu_internal.h"

namespace crema::kernels::cpu {
namespace {

using softmax_detail::block_max;
using softmax_detail::kBlock;
using softmax_detail::kParallelElements;

// Positions [i0, i0 + n) of one outer slice (x, t and y at element (o, 0, i0)): writes their
// probabilities and returns the sum of their terms T log s - sum_c t'_c z_c.
double soft_block(int64_t C, int64_t inner, int64_t n, const float* x, const float* t, float on,
                  float off, float* y) {
  float m[kBlock], s[kBlock], t_sum[kBlock], tz[kBlock];
  block_max(C, inner, n, x, m);
  std::fill(s, s + n, 0.0f);
  std::fill(t_sum, t_sum + n, 0.0f);
  std::fill(tz, tz + n, 0.0f);
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float z = x[c * inner + j] - m[j];
      const float smoothed = on * t[c * inner + j] + off;
      t_sum[j] += smoothed;
      tz[j] += smoothed * z;
      y[c * inner + j] = std::exp(z);
      s[j] += y[c * inner + j];
    }
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    sum += double(t_sum[j]) * std::log(double(s[j])) - double(tz[j]);
    s[j] = 1.0f / s[j];
  }
  for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[c * inner + j] *= s[j];
  }
  return sum;
}

// Fixed tasks: a block of an outer slice's positions (a position per task when inner == 1).
struct Tasks {
  int64_t blocks, count;
  Tasks(int64_t outer, int64_t inner)
      : blocks((inner + kBlock - 1) / kBlock), count(outer * blocks) {}
};

}  // namespace

void soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                       const float* targets, const SoftmaxLossOptions& options,
                                       float* prob, float* loss, int num_threads) {
  const Tasks tasks(outer, inner);
  const float on = 1.0f - options.label_smoothing, off = options.label_smoothing / float(C);
  std::vector<double> partial(size_t(tasks.count), 0.0);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t task = 0; task < tasks.count; ++task) {
    const int64_t o = task / tasks.blocks, i0 = (task % tasks.blocks) * kBlock;
    const int64_t offset = o * C * inner + i0;
    partial[size_t(task)] = soft_block(C, inner, std::min(kBlock, inner - i0), logits + offset,
                                       targets + offset, on, off, prob + offset);
  }
  double sum = 0;
  for (double p : partial) sum += p;
  loss[0] =
      float(sum / double(loss_normalizer(options.normalization, outer, inner, outer * inner)));
}

void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                        const float* targets, const float* top_grad,
                                        const SoftmaxLossOptions& options, float* dlogits,
                                        int num_threads) {
  const Tasks tasks(outer, inner);
  const float scale =
      top_grad[0] / float(loss_normalizer(options.normalization, outer, inner, outer * inner));
  const float on = 1.0f - options.label_smoothing, off = options.label_smoothing / float(C);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t task = 0; task < tasks.count; ++task) {
    const int64_t o = task / tasks.blocks, i0 = (task % tasks.blocks) * kBlock;
    const int64_t n = std::min(kBlock, inner - i0), offset = o * C * inner + i0;
    const float* p = prob + offset;
    const float* t = targets + offset;
    float* d = dlogits + offset;
    float t_sum[kBlock];
    std::fill(t_sum, t_sum + n, 0.0f);
    for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) t_sum[j] += on * t[c * inner + j] + off;
    }
    for (int64_t c = 0; c < C; ++c) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = c * inner + j;
        d[k] = scale * (p[k] * t_sum[j] - (on * t[k] + off));
      }
    }
  }
}

}  // namespace crema::kernels::cpu
