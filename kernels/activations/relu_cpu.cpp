// ReLU, fast CPU path: the reference's formula made branch-free so that it vectorizes (the select
// of kernels/common/float_select.h, which says why), split over OpenMP threads once the array is
// large enough to pay for a parallel region. `omp simd` asserts the iterations are independent
// even when y aliases x, which they are: each touches only element i.
#include <algorithm>

#include "kernels/activations/relu.h"
#include "kernels/common/float_select.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

}  // namespace

void relu_forward(int64_t n, const float* x, float* y, float negative_slope, int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] = if_positive(x[i], x[i], negative_slope * x[i]);
}

void relu_backward(int64_t n, const float* y, const float* dy, float* dx, float negative_slope,
                   int num_threads) {
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) dx[i] = if_positive(y[i], dy[i], negative_slope * dy[i]);
}

}  // namespace crema::kernels::cpu
