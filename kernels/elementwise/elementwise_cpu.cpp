// Elementwise helpers, fast CPU path. These ops move memory and do almost no arithmetic, so the
// only levers are vector loads/stores (`omp simd`, which also asserts that an output aliasing an
// input is fine: each iteration touches only its own element) and, for arrays well beyond the
// caches, a second core's share of the memory bandwidth.
//
// The sums are kernels/common/blocked_sum.h's, in blocks of kSumBlock elements: the same bits for
// any number of threads.
#include "kernels/elementwise/elementwise.h"

#include <algorithm>

#include "kernels/common/blocked_sum.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;
constexpr int64_t kSumBlock = 1 << 14;

}  // namespace

void fill(int64_t n, float value, float* x, int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void scale(int64_t n, float alpha, float* x, int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void axpy(int64_t n, float alpha, const float* x, float* y, int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void axpby(int64_t n, float alpha, const float* x, float beta, float* y, int num_threads) {
  if (beta == 0.0f) {  // BLAS: y is write-only, its old contents (even NaN) are ignored
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
    return;
  }
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i] + beta * y[i];
}

void add(int64_t n, const float* a, const float* b, float* out, int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double sum(int64_t n, const float* x, int num_threads) {
  return blocked_sum(n, kSumBlock, num_threads, kParallelElements,
                     [x](int64_t i) { return double(x[i]); });
}

double sum_of_squares(int64_t n, const float* x, int num_threads) {
  return blocked_sum(n, kSumBlock, num_threads, kParallelElements,
                     [x](int64_t i) { return double(x[i]) * double(x[i]); });
}

void add_bias_rows(int64_t M, int64_t N, const float* bias, float* y, int num_threads) {
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (M * N >= kParallelElements)
  for (int64_t m = 0; m < M; ++m) {
    float* row = y + m * N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) row[n] += bias[n];
  }
}

void accumulate_bias_rows(int64_t M, int64_t N, const float* dy, float* dbias, int num_threads) {
  // Threads take blocks of columns, each adding the rows into its block of dbias in row order
  // (the reference's order, so the sums are the same bits); a block stays in L1 meanwhile.
  constexpr int64_t kColumns = 256;
  const int64_t blocks = (N + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (M * N >= kParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n0 = b * kColumns, width = std::min(kColumns, N - n0);
    float* column = dbias + n0;
    for (int64_t m = 0; m < M; ++m) {
      const float* row = dy + m * N + n0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) column[j] += row[j];
    }
  }
}

}  // namespace crema::kernels::cpu
