// Dropout, fast CPU path: the reference's loop split over OpenMP threads for large arrays. The
// hash's 64-bit multiplies do not vectorize without AVX-512DQ (the portable build has SSE2 only),
// so this runs at about a nanosecond per element; it is bit for bit the reference.
#include <algorithm>

#include "kernels/dropout/dropout.h"
#include "kernels/dropout/dropout_hash.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 14;

void apply_mask(int64_t n, const float* in, float* out, float ratio, uint64_t seed, uint64_t step,
                int num_threads) {
  const uint64_t key = dropout_hash::key(seed, step);
  const uint32_t threshold = dropout_hash::threshold(ratio);
  const float scale = dropout_scale(ratio);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    out[i] = dropout_hash::keep(key, uint64_t(i), threshold) ? in[i] * scale : 0.0f;
  }
}

}  // namespace

void dropout_forward(int64_t n, const float* x, float* y, float ratio, uint64_t seed, uint64_t step,
                     int num_threads) {
  apply_mask(n, x, y, ratio, seed, step, num_threads);
}

void dropout_backward(int64_t n, const float* dy, float* dx, float ratio, uint64_t seed,
                      uint64_t step, int num_threads) {
  apply_mask(n, dy, dx, ratio, seed, step, num_threads);
}

void stochastic_depth(int64_t rows, int64_t row_size, const float* in, float* out, float ratio,
                      uint64_t seed, uint64_t step, int num_threads) {
  const uint64_t key = dropout_hash::key(seed, step);
  const uint32_t threshold = dropout_hash::threshold(ratio);
  const float scale = dropout_scale(ratio);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (rows * row_size >= kParallelElements)
  for (int64_t n = 0; n < rows; ++n) {
    const float* src = in + n * row_size;
    float* dst = out + n * row_size;
    if (dropout_hash::keep(key, uint64_t(n), threshold)) {
#pragma omp simd
      for (int64_t i = 0; i < row_size; ++i) dst[i] = src[i] * scale;
    } else {
      std::fill(dst, dst + row_size, 0.0f);
    }
  }
}

}  // namespace crema::kernels::cpu
