// Layout transforms, fast CPU path.
//
// A transpose reads one array in order and writes the other with a stride of R (or S) floats;
// done row by row, every written element lands on a different cache line, which is evicted
// before its neighbours are written. In kBlock x kBlock blocks the kBlock lines of y being
// written stay in L1 while the block's rows of x are read in order. Blocks are independent, so
// they are spread over OpenMP threads.
#include <algorithm>
#include <vector>

#include "kernels/layout/layout.h"

namespace crema::kernels::cpu {
namespace {

constexpr int64_t kBlock = 32;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

}  // namespace

void batched_transpose(int64_t B, int64_t R, int64_t S, const float* x, float* y, int num_threads) {
  const int64_t blocks_r = (R + kBlock - 1) / kBlock, blocks_s = (S + kBlock - 1) / kBlock;
  const int64_t blocks = B * blocks_r * blocks_s;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (B * R * S >= kParallelElements)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t b = t / (blocks_r * blocks_s), rest = t % (blocks_r * blocks_s);
    const int64_t r0 = (rest / blocks_s) * kBlock, s0 = (rest % blocks_s) * kBlock;
    const int64_t r1 = std::min(r0 + kBlock, R), s1 = std::min(s0 + kBlock, S);
    const float* xb = x + b * R * S;
    float* yb = y + b * R * S;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t s = s0; s < s1; ++s) yb[s * R + r] = xb[r * S + s];
    }
  }
}

// An odometer over y: each row of y's innermost axis starts at an x offset decoded once per row
// and then walks x with that axis's stride.
void permute(int ndim, const int64_t* x_shape, const int* order, const float* x, float* y,
             int num_threads) {
  if (ndim == 0) {
    y[0] = x[0];
    return;
  }
  const size_t axes = static_cast<size_t>(ndim);
  std::vector<int64_t> x_stride(axes), extent(axes), stride(axes);
  int64_t n = 1;
  for (int a = ndim - 1; a >= 0; --a) {
    x_stride[size_t(a)] = n;
    n *= x_shape[a];
  }
  for (int k = 0; k < ndim; ++k) {
    extent[size_t(k)] = x_shape[order[k]];
    stride[size_t(k)] = x_stride[size_t(order[k])];
  }
  const int64_t inner = extent[size_t(ndim - 1)], inner_stride = stride[size_t(ndim - 1)];
  const int64_t rows = inner == 0 ? 0 : n / inner;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rest = row, in = 0;
    for (int k = ndim - 2; k >= 0; --k) {
      in += (rest % extent[size_t(k)]) * stride[size_t(k)];
      rest /= extent[size_t(k)];
    }
    float* out = y + row * inner;
    for (int64_t j = 0; j < inner; ++j) out[j] = x[in + j * inner_stride];
  }
}

}  // namespace crema::kernels::cpu
