// Unscaling gradients, the fast CPU path: one loop per gradient that multiplies and tests the
// exponent bits (grad_unscale.h), branch-free so that it vectorizes, threaded for large ones (an
// OR reduction of the per-thread flags: the same answer for any thread count).
#include <algorithm>
#include <cstring>

#include "kernels/optimizers/grad_unscale.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;
constexpr uint32_t kExponentBits = 0x7f800000u;

bool unscale_slice(const GradientSlice& s, float inv_scale, int num_threads) {
  float* __restrict__ g = s.g;
  const int64_t n = s.n;
  int found_inf = 0;
#pragma omp parallel for simd schedule(static) reduction(|            \
                                                         : found_inf) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &g[i], sizeof bits);
    found_inf |= int((bits & kExponentBits) == kExponentBits);
    g[i] *= inv_scale;
  }
  return found_inf != 0;
}

}  // namespace

bool unscale_gradients(const GradientSlice* slices, int count, float inv_scale, int num_threads) {
  bool found_inf = false;
  for (int k = 0; k < count; ++k) found_inf |= unscale_slice(slices[k], inv_scale, num_threads);
  return found_inf;
}

}  // namespace crema::kernels::cpu
