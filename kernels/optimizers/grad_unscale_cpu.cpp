// Unscaling gradients, the fast CPU path: one loop per gradient that multiplies and tests the
// exponent bits (grad_unscale.h), branch-free so that it vectorizes, threaded for large ones (one
// flag per fixed chunk, OR-ed after: the same answer for any thread count).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/optimizers/grad_unscale.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;
constexpr uint32_t kExponentBits = 0x7f800000u;

// The elements [begin, end): multiplied, and whether any was inf or NaN before.
int unscale_range(float* __restrict__ g, int64_t begin, int64_t end, float inv_scale) {
  int found_inf = 0;
#pragma omp simd reduction(| : found_inf)
  for (int64_t i = begin; i < end; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &g[i], sizeof bits);
    found_inf |= int((bits & kExponentBits) == kExponentBits);
    g[i] *= inv_scale;
  }
  return found_inf;
}

// A large gradient in one fixed chunk per thread, each chunk's flag kept apart and OR-ed after
// (no runtime reduction: its per-thread buffers are libomp's, which LeakSanitizer reports).
bool unscale_slice(const GradientSlice& s, float inv_scale, int num_threads) {
  const int64_t n = s.n;
  const int chunks = n >= kParallelElements ? std::max(1, num_threads) : 1;
  std::vector<int> found(size_t(chunks), 0);
#pragma omp parallel for schedule(static) num_threads(chunks) if (chunks > 1)
  for (int c = 0; c < chunks; ++c) {
    found[size_t(c)] = unscale_range(s.g, n * c / chunks, n * (c + 1) / chunks, inv_scale);
  }
  return std::any_of(found.begin(), found.end(), [](int f) { return f != 0; });
}

}  // namespace

bool unscale_gradients(const GradientSlice* slices, int count, float inv_scale, int num_threads) {
  bool found_inf = false;
  for (int k = 0; k < count; ++k) found_inf |= unscale_slice(slices[k], inv_scale, num_threads);
  return found_inf;
}

}  // namespace crema::kernels::cpu
