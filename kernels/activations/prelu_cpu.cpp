// PReLU, fast CPU path. The work is cut into tasks of at most kBlock consecutive elements of one
// (n, c) row, so a task knows its slope without dividing indices, its inner loop vectorizes (the
// select `x > 0 ? x : s * x` does, with -fno-trapping-math), and a shared slope (one row of
// N * C * D elements) still splits over threads. The slope gradient sums each task's products in
// kLanes double accumulators, then adds the task sums of each channel in (n, block) order: the
// same bits for any thread count.
#include <algorithm>
#include <vector>

#include "kernels/activations/prelu.h"

namespace crema::kernels::cpu {
namespace {

constexpr int64_t kBlock = 4096;
constexpr int kLanes = 8;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

int64_t blocks_per_row(int64_t D) {
  return std::max<int64_t>(1, (D + kBlock - 1) / kBlock);
}

// body(task, row, begin, count) for every block [begin, begin + count) of every row
// row = n * C + c of length D; tasks are numbered row * blocks_per_row(D) + block.
template <class Body>
void for_each_block(int64_t rows, int64_t D, int num_threads, Body body) {
  const int64_t blocks = blocks_per_row(D), tasks = rows * blocks;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (rows * D >= kParallelElements)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t row = t / blocks, begin = (t % blocks) * kBlock;
    body(t, row, begin, std::max<int64_t>(0, std::min(kBlock, D - begin)));
  }
}

// sum over i < m where x[i] <= 0 of x[i] * dy[i], in kLanes double accumulators. min(x, 0) * dy
// is that term without a branch (a NaN x stays NaN: std::min returns its first argument when the
// comparison fails), so the loop vectorizes.
double block_slope_sum(int64_t m, const float* x, const float* dy) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      lane[l] += double(std::min(x[i + l], 0.0f)) * double(dy[i + l]);
    }
  }
  double sum = 0.0;
  for (int l = 0; l < kLanes; ++l) sum += lane[l];
  for (; i < m; ++i) sum += double(std::min(x[i], 0.0f)) * double(dy[i]);
  return sum;
}

}  // namespace

void prelu_forward(int64_t N, int64_t C, int64_t D, const float* x, const float* slope, float* y,
                   int num_threads) {
  for_each_block(N * C, D, num_threads, [&](int64_t, int64_t row, int64_t begin, int64_t m) {
    const float s = slope[row % C];
    const float* xr = x + row * D + begin;
    float* yr = y + row * D + begin;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) yr[i] = xr[i] > 0.0f ? xr[i] : s * xr[i];
  });
}

void prelu_backward_data(int64_t N, int64_t C, int64_t D, const float* x, const float* slope,
                         const float* dy, float* dx, int num_threads) {
  for_each_block(N * C, D, num_threads, [&](int64_t, int64_t row, int64_t begin, int64_t m) {
    const float s = slope[row % C];
    const int64_t offset = row * D + begin;
    const float *xr = x + offset, *dyr = dy + offset;
    float* dxr = dx + offset;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) dxr[i] = xr[i] > 0.0f ? dyr[i] : s * dyr[i];
  });
}

void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const float* x, const float* dy,
                          float* dslope, int num_threads) {
  const int64_t blocks = blocks_per_row(D);
  std::vector<double> partial(size_t(N * C * blocks));  // [N, C, blocks]
  for_each_block(N * C, D, num_threads, [&](int64_t task, int64_t row, int64_t begin, int64_t m) {
    const int64_t offset = row * D + begin;
    partial[size_t(task)] = block_slope_sum(m, x + offset, dy + offset);
  });
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t b = 0; b < blocks; ++b) sum += partial[size_t((n * C + c) * blocks + b)];
    }
    dslope[c] += float(sum);
  }
}

}  // namespace crema::kernels::cpu
