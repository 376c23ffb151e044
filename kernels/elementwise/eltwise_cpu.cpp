// Eltwise, fast CPU path. The reference walks the K inputs for each element, K streams at once;
// here a block of kBlock elements of y (in L1) is initialized and then combined with one input
// at a time, each inner loop a plain vectorizable pass over the block. Every element still sees
// the same operations in the same order as in the reference, so the results are the same bits.
// Blocks are independent, so they are spread over OpenMP threads.
#include <algorithm>

#include "kernels/elementwise/eltwise.h"

namespace crema::kernels::cpu {
namespace {

constexpr int64_t kBlock = 2048;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

// Calls body(begin, end) for the blocks of [0, n), in parallel when n is large.
template <class Body>
void for_each_block(int64_t n, int num_threads, Body body) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t b = 0; b < blocks; ++b) body(b * kBlock, std::min(n, (b + 1) * kBlock));
}

// y = init, then y *= x_j for every j != skip, block by block.
void product(int64_t n, int K, const float* const* x, int skip, const float* init, float* y,
             int num_threads) {
  for_each_block(n, num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) y[e] = init ? init[e] : 1.0f;
    for (int j = 0; j < K; ++j) {
      if (j == skip) continue;
      const float* xj = x[j];
#pragma omp simd
      for (int64_t e = begin; e < end; ++e) y[e] *= xj[e];
    }
  });
}

}  // namespace

void eltwise_sum(int64_t n, int K, const float* const* x, const float* coeff, float* y,
                 int num_threads) {
  for_each_block(n, num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) y[e] = 0.0f;
    for (int j = 0; j < K; ++j) {
      const float* xj = x[j];
      const float c = coeff[j];
#pragma omp simd
      for (int64_t e = begin; e < end; ++e) y[e] += c * xj[e];
    }
  });
}

void eltwise_prod(int64_t n, int K, const float* const* x, float* y, int num_threads) {
  product(n, K, x, -1, nullptr, y, num_threads);
}

void eltwise_prod_backward(int64_t n, int K, const float* const* x, int i, const float* dy,
                           float* dx, int num_threads) {
  product(n, K, x, i, dy, dx, num_threads);
}

// The comparison of the reference, on the bits' terms: take v when it is larger, or when it is
// the first NaN (v unordered with itself, best not).
void eltwise_max(int64_t n, int K, const float* const* x, float* y, float* argmax,
                 int num_threads) {
  for_each_block(n, num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      y[e] = x[0][e];
      argmax[e] = 0.0f;
    }
    for (int j = 1; j < K; ++j) {
      const float* xj = x[j];
      const float index = float(j);
#pragma omp simd
      for (int64_t e = begin; e < end; ++e) {
        const float v = xj[e], best = y[e];
        const bool take = __builtin_isgreater(v, best) ||
                          (__builtin_isunordered(v, v) && !__builtin_isunordered(best, best));
        y[e] = take ? v : best;
        argmax[e] = take ? index : argmax[e];
      }
    }
  });
}

void eltwise_max_backward(int64_t n, int i, const float* dy, const float* argmax, float* dx,
                          int num_threads) {
  const float index = float(i);
  for_each_block(n, num_threads, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t e = begin; e < end; ++e) dx[e] = argmax[e] == index ? dy[e] : 0.0f;
  });
}

}  // namespace crema::kernels::cpu
