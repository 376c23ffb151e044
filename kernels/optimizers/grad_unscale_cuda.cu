// Unscaling gradients, CUDA: one launch per 32 gradients (the slices by value in the kernel's
// parameters, each owning a range of blocks: slice_blocks_cuda.cuh), a grid-stride loop per slice
// that multiplies and tests the exponent bits (grad_unscale.h). It reads and writes each element
// once, so it runs at the memory's speed; the flag is a plain store of 1 by any thread that met a
// non-finite element, once per thread at the end of its loop.
#include <algorithm>

#include "kernels/common/launch.h"
#include "kernels/optimizers/grad_unscale.h"
#include "kernels/common/slice_blocks_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// Elements per thread a slice gets before it gets another block, and the most blocks per slice.
constexpr int64_t kPerThread = 4;
constexpr int64_t kMaxBlocksPerSlice = 8192;

int unscale_blocks(int64_t n) {
  return int(std::min(kMaxBlocksPerSlice, ceil_div(n, kThreads * kPerThread)));
}

struct UnscaleBatch {
  GradientSlice slices[kMaxUnscaleSlicesPerLaunch];
  int first_block[kMaxUnscaleSlicesPerLaunch + 1];
  int count;
};

__global__ void unscale_kernel(const __grid_constant__ UnscaleBatch batch, float inv_scale,
                               float* found_inf) {
  const int k = slice_of_block(batch.first_block, batch.count);
  float* __restrict__ g = batch.slices[k].g;
  const int64_t n = batch.slices[k].n;
  const int64_t stride = int64_t(batch.first_block[k + 1] - batch.first_block[k]) * kThreads;
  bool bad = false;
  for (int64_t i = (int64_t(blockIdx.x) - batch.first_block[k]) * kThreads + threadIdx.x; i < n;
       i += stride) {
    const float v = g[i];
    bad |= (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
    g[i] = v * inv_scale;
  }
  if (bad) *found_inf = 1.0f;
}

}  // namespace

void unscale_gradients(const GradientSlice* slices, int count, float inv_scale, float* found_inf,
                       gpu::Stream stream) {
  UnscaleBatch batch{};
  auto launch = [&] {
    if (batch.count == 0) return;
    unscale_kernel<<<batch.first_block[batch.count], kThreads, 0, stream>>>(batch, inv_scale,
                                                                            found_inf);
    gpu::check_launch("unscale_gradients");
    batch = UnscaleBatch{};
  };
  for (int k = 0; k < count; ++k) {
    if (slices[k].n <= 0) continue;
    batch.slices[batch.count] = slices[k];
    batch.first_block[batch.count + 1] =
        batch.first_block[batch.count] + unscale_blocks(slices[k].n);
    if (++batch.count == kMaxUnscaleSlicesPerLaunch) launch();
  }
  launch();
}

}  // namespace crema::kernels::cuda
