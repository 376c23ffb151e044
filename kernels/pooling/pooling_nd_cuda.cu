// N-d pooling on the GPU, the padded 3-axis form (pooling_nd.h); the 2-D kernels of
// pooling_cuda.cu one axis up.
//
// Forward: one thread per output (plane, o, p, q), its window clipped to the input walked in
// row-major order with the reference's comparison (larger, or the first NaN): the CPU's argmax.
// Backward: one thread per input element (plane, d, h, w), gathering from the windows that contain
// it -- along each axis [first, last) with first = at + pad < kernel ? 0 : (at + pad - kernel) /
// stride + 1 and last = min((at + pad) / stride + 1, out) -- in row-major output order from 0, the
// order in which the CPU's scatter reaches the element: the same bits, no atomics.
#include <cstdint>

#include "kernels/common/map_cuda.cuh"
#include "kernels/pooling/pooling_nd.h"

namespace crema::kernels::cuda {
namespace {

using detail::kMapThreads;
using detail::map_blocks;

// The padded geometry in 32-bit extents (flat indices are int64).
struct Vol {
  int in[3], kernel[3], stride[3], pad[3], out[3];
  bool count_include_pad;
};

Vol vol_of(const PoolNdGeometry& g) {
  Vol v{};
  for (int a = 0; a < 3; ++a) {
    v.in[a] = int(g.in[a]);
    v.kernel[a] = int(g.kernel[a]);
    v.stride[a] = int(g.stride[a]);
    v.pad[a] = int(g.pad[a]);
    v.out[a] = int(g.out[a]);
  }
  v.count_include_pad = g.count_include_pad;
  return v;
}

// Output `o`'s window clipped to the input, [lo, hi) per axis, and the average's divisor.
struct Window {
  int lo[3], hi[3], size;
};

__device__ inline Window window_of(const Vol& v, const int (&o)[3]) {
  Window w;
  int padded = 1, inside = 1;
  for (int a = 0; a < 3; ++a) {
    const int start = o[a] * v.stride[a] - v.pad[a];
    const int end = min(start + v.kernel[a], v.in[a] + v.pad[a]);
    w.lo[a] = max(start, 0);
    w.hi[a] = min(end, v.in[a]);
    padded *= end - start;
    inside *= w.hi[a] - w.lo[a];
  }
  w.size = v.count_include_pad ? padded : inside;
  return w;
}

template <PoolMode kMode>
__global__ void forward_kernel(Vol v, int64_t total, const float* __restrict__ x,
                               float* __restrict__ y, float* __restrict__ argmax) {
  const int out_volume = v.out[0] * v.out[1] * v.out[2];
  const int64_t in_volume = int64_t(v.in[0]) * v.in[1] * v.in[2];
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = idx / out_volume;
    const int o = int(idx % out_volume);
    const int out[3] = {o / (v.out[1] * v.out[2]), o / v.out[2] % v.out[1], o % v.out[2]};
    const Window w = window_of(v, out);
    const float* xp = x + plane * in_volume;
    if constexpr (kMode == PoolMode::max) {
      int best = (w.lo[0] * v.in[1] + w.lo[1]) * v.in[2] + w.lo[2];
      float m = xp[best];
      for (int d = w.lo[0]; d < w.hi[0]; ++d) {
        for (int h = w.lo[1]; h < w.hi[1]; ++h) {
          for (int i = w.lo[2]; i < w.hi[2]; ++i) {
            const int at = (d * v.in[1] + h) * v.in[2] + i;
            if (xp[at] > m || (isnan(xp[at]) && !isnan(m))) {  // larger, or the first NaN
              m = xp[at];
              best = at;
            }
          }
        }
      }
      y[idx] = m;
      if (argmax != nullptr) argmax[idx] = float(best);
    } else {
      float sum = 0.0f;
      for (int d = w.lo[0]; d < w.hi[0]; ++d) {
        for (int h = w.lo[1]; h < w.hi[1]; ++h) {
          for (int i = w.lo[2]; i < w.hi[2]; ++i) sum += xp[(d * v.in[1] + h) * v.in[2] + i];
        }
      }
      y[idx] = sum / float(w.size);
    }
  }
}

template <PoolMode kMode>
__global__ void backward_kernel(Vol v, int64_t total, const float* __restrict__ dy,
                                const float* __restrict__ argmax, float* __restrict__ dx) {
  const int in_volume = v.in[0] * v.in[1] * v.in[2];
  const int64_t out_volume = int64_t(v.out[0]) * v.out[1] * v.out[2];
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = idx / in_volume;
    const int me = int(idx % in_volume);
    const int at[3] = {me / (v.in[1] * v.in[2]), me / v.in[2] % v.in[1], me % v.in[2]};
    int first[3], last[3];
    for (int a = 0; a < 3; ++a) {
      first[a] =
          at[a] + v.pad[a] < v.kernel[a] ? 0 : (at[a] + v.pad[a] - v.kernel[a]) / v.stride[a] + 1;
      last[a] = min((at[a] + v.pad[a]) / v.stride[a] + 1, v.out[a]);
    }
    const float* dyp = dy + plane * out_volume;
    const float* ap = kMode == PoolMode::max ? argmax + plane * out_volume : nullptr;
    float acc = 0.0f;
    for (int o0 = first[0]; o0 < last[0]; ++o0) {
      for (int o1 = first[1]; o1 < last[1]; ++o1) {
        for (int o2 = first[2]; o2 < last[2]; ++o2) {
          const int o = (o0 * v.out[1] + o1) * v.out[2] + o2;
          if constexpr (kMode == PoolMode::max) {
            if (ap[o] == float(me)) acc += dyp[o];
          } else {
            acc += dyp[o] / float(window_of(v, {o0, o1, o2}).size);
          }
        }
      }
    }
    dx[idx] = acc;
  }
}

}  // namespace

void pool_nd_forward(const PoolNdGeometry& nd, PoolMode mode, const float* x, float* y,
                     float* argmax, gpu::Stream stream) {
  const PoolNdGeometry g = nd.padded();
  const int64_t total = g.N * g.C * g.out_volume();
  if (total == 0) return;
  const Vol v = vol_of(g);
  if (mode == PoolMode::max) {
    forward_kernel<PoolMode::max>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(v, total, x, y, argmax);
  } else {
    forward_kernel<PoolMode::average>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(v, total, x, y, nullptr);
  }
  gpu::check_launch("pool_nd_forward");
}

void pool_nd_backward(const PoolNdGeometry& nd, PoolMode mode, const float* dy, const float* argmax,
                      float* dx, gpu::Stream stream) {
  const PoolNdGeometry g = nd.padded();
  const int64_t total = g.N * g.C * g.in_volume();
  if (total == 0) return;
  const Vol v = vol_of(g);
  if (mode == PoolMode::max) {
    backward_kernel<PoolMode::max>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(v, total, dy, argmax, dx);
  } else {
    backward_kernel<PoolMode::average>
        <<<map_blocks(total), kMapThreads, 0, stream>>>(v, total, dy, nullptr, dx);
  }
  gpu::check_launch("pool_nd_backward");
}

}  // namespace crema::kernels::cuda
