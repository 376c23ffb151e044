// Scale and bias, fast CPU path.
#include <algorithm>

#include "kernels/scale/scale.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

// Channels per task of the inner = 1 reduction: 16 floats, one 64-byte cache line of each row.
constexpr int64_t kChannelBlock = 16;

// channel_reduce for inner = 1 (channels last: LayerNorm's weight over the last axis, Scale on
// [M, C]). A loop per channel would read one float of every row, a cache line per element; here a
// task takes kChannelBlock neighbouring channels and walks the rows once, adding each row's
// segment into its channels' sums: every channel's sum still runs over o in order, in double,
// so the bits are those of the loop per channel.
void channel_reduce_rows(int64_t outer, int64_t C, const float* dy, const float* x, bool accumulate,
                         float* out, int num_threads) {
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C >= kParallelElements)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kChannelBlock, n = std::min(kChannelBlock, C - c0);
    double sums[kChannelBlock] = {};
    for (int64_t o = 0; o < outer; ++o) {
      const float* d = dy + o * C + c0;
      if (x != nullptr) {
        const float* xr = x + o * C + c0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) sums[j] += double(d[j]) * double(xr[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) sums[j] += double(d[j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      out[c0 + j] = accumulate ? float(double(out[c0 + j]) + sums[j]) : float(sums[j]);
    }
  }
}

}  // namespace

void scale_forward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* scale,
                   const float* bias, float* y, int num_threads) {
  const int64_t rows = outer * C;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (rows * inner >= kParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row % C;
    const float s = scale ? scale[c] : 1.0f, b = bias ? bias[c] : 0.0f;
    const float* xr = x + row * inner;
    float* yr = y + row * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * s + b;
  }
}

// One thread per channel, its (o, i) products added in double. The simd reduction's order is
// fixed by the compiled loop, not by the threads, so the bits do not depend on the thread count.
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const float* dy, const float* x,
                    bool accumulate, float* out, int num_threads) {
  if (inner == 1) return channel_reduce_rows(outer, C, dy, x, accumulate, out, num_threads);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * C * inner >= kParallelElements)
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      const float* d = dy + (o * C + c) * inner;
      if (x != nullptr) {
        const float* xr = x + (o * C + c) * inner;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < inner; ++i) sum += double(d[i]) * double(xr[i]);
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < inner; ++i) sum += double(d[i]);
      }
    }
    out[c] = accumulate ? float(double(out[c]) + sum) : float(sum);
  }
}

}  // namespace crema::kernels::cpu
