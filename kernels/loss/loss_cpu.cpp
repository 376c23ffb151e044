// Pointwise losses, fast CPU path.
//
// The forward sums are kernels/common/blocked_sum.h's, in blocks of kSumBlock terms (vector adds
// for the Euclidean loss; the sigmoid's exp and log stay scalar libm calls): the same bits for any
// number of threads. The backwards are one vectorizable pass. The number of counted elements
// (needed only by the `valid` normalization with an ignore_label) is an integer count: exact in any
// order.
#include "kernels/loss/loss.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/blocked_sum.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;
constexpr int64_t kSumBlock = 1 << 13;

bool is_ignored(float target, const SigmoidCrossEntropyOptions& options) {
  return options.has_ignore_label && target == float(options.ignore_label);
}

// The number of elements not ignored.
int64_t counted(int64_t n, const float* t, const SigmoidCrossEntropyOptions& options) {
  if (!options.has_ignore_label) return n;
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) count += is_ignored(t[k], options) ? 0 : 1;
  return count;
}

}  // namespace

void sigmoid_cross_entropy_forward(int64_t outer, int64_t inner, const float* x, const float* t,
                                   const SigmoidCrossEntropyOptions& options, float* loss,
                                   int num_threads) {
  const int64_t n = outer * inner;
  const double sum = blocked_sum(n, kSumBlock, num_threads, kParallelElements, [&](int64_t k) {
    if (is_ignored(t[k], options)) return 0.0;
    // max(x,0) - x t in double (exact there), as on the GPU: the terms nearly cancel for
    // large targets.
    return double(std::max(x[k], 0.0f)) - double(x[k]) * double(t[k]) +
           double(std::log1p(std::exp(-std::abs(x[k]))));
  });
  const int64_t normalizer =
      loss_normalizer(options.normalization, outer, inner, counted(n, t, options));
  loss[0] = float(sum / double(normalizer));
}

void sigmoid_cross_entropy_backward(int64_t outer, int64_t inner, const float* x, const float* t,
                                    const float* top_grad,
                                    const SigmoidCrossEntropyOptions& options, float* dx,
                                    int num_threads) {
  const int64_t n = outer * inner;
  const int64_t count =
      options.normalization == LossNormalization::valid ? counted(n, t, options) : n;
  const float scale =
      top_grad[0] / float(loss_normalizer(options.normalization, outer, inner, count));
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t k = 0; k < n; ++k) {
    const float sigmoid = 1.0f / (1.0f + std::exp(-x[k]));
    dx[k] = is_ignored(t[k], options) ? 0.0f : scale * (sigmoid - t[k]);
  }
}

void euclidean_loss_forward(int64_t outer, int64_t inner, const float* a, const float* b,
                            LossNormalization normalization, float* loss, int num_threads) {
  const int64_t n = outer * inner;
  const double sum = blocked_sum(n, kSumBlock, num_threads, kParallelElements, [&](int64_t k) {
    const double d = a[k] - b[k];  // the float difference, squared in double
    return d * d;
  });
  loss[0] = float(sum / (2.0 * double(loss_normalizer(normalization, outer, inner, n))));
}

void euclidean_loss_backward(int64_t outer, int64_t inner, const float* a, const float* b,
                             const float* top_grad, LossNormalization normalization, float* da,
                             float* db, int num_threads) {
  const int64_t n = outer * inner;
  const float scale = top_grad[0] / float(loss_normalizer(normalization, outer, inner, n));
  if (da != nullptr) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
    for (int64_t k = 0; k < n; ++k) da[k] = scale * (a[k] - b[k]);
  }
  if (db != nullptr) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
    for (int64_t k = 0; k < n; ++k) db[k] = -scale * (a[k] - b[k]);
  }
}

}  // namespace crema::kernels::cpu
