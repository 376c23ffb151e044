// Backward data's filter transposes (convolution_tc_transpose.h): wt[g, c, tap, k] =
// w[g*Kg + k, r, s, c], per group [Kg, R*S, Cg] -> [Cg, R*S, Kg], through 32 x 33 shared tiles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/convolution/convolution_tc_transpose.h"

namespace crema::kernels::cuda::tc {
namespace {

// Where tap r of one filter dimension lies once the taps are ordered by phase r*dil % stride
// (stable): taps of lower phases, taps of its phase, and its rank among them.
struct TapPlace {
  int before, count, rank;
};

__device__ TapPlace tap_place(int r, int taps, int stride, int dilation) {
  const int phase = r * dilation % stride;
  TapPlace t{0, 0, 0};
  for (int i = 0; i < taps; ++i) {
    const int other = i * dilation % stride;
    t.before += other < phase, t.count += other == phase, t.rank += other == phase && i < r;
  }
  return t;
}

// wt[g, c, tap, k] = w[g*Kg + k, r, s, c]: per group, [Kg, R*S, Cg] -> [Cg, R*S, Kg], the taps
// in phase order (phase (rho_h, rho_w)'s taps from before_h*S + count_h*before_w, then
// (rank_h, rank_w) row-major: data_phase's first_tap and R x S); the identity at stride 1. T:
// uint16_t (16-bit tensors) or float (the tf32 wgmma backward data of f32 tensors). Block (x, y,
// z): channels 32x.., output channels 32y.. of filter tap z % RS of group z / RS (z, z +
// gridDim.z, ...), through a 32 x 33 shared tile: w read along c, wt written along k, both
// coalesced (one element a thread, read at a stride of R*S*Cg, took a third of 16 x 512 x 7 x 7
// -> 512 3x3's backward data: H200, 2026-11-27, session 17).
template <class T>
__global__ void __launch_bounds__(256)
    transpose_filter_kernel(const T* __restrict__ w, int G, int Kg, int R, int S, int Cg,
                            int stride_h, int stride_w, int dilation_h, int dilation_w,
                            T* __restrict__ wt) {
  __shared__ T tile[32][33];
  const int RS = R * S, c0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
  for (int z = blockIdx.z; z < G * RS; z += gridDim.z) {
    const int rs = z % RS, g = z / RS, r = rs / S, s = rs % S;
    const TapPlace h = tap_place(r, R, stride_h, dilation_h);
    const TapPlace v = tap_place(s, S, stride_w, dilation_w);
    const int64_t tap = h.before * S + h.count * v.before + h.rank * v.count + v.rank;
    for (int i = threadIdx.y; i < 32; i += 8) {  // output channel k0 + i, channel c0 + x
      const int k = k0 + i, c = c0 + int(threadIdx.x);
      if (k < Kg && c < Cg) tile[i][threadIdx.x] = w[((int64_t(g) * Kg + k) * RS + rs) * Cg + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {  // channel c0 + i, output channel k0 + x
      const int c = c0 + i, k = k0 + int(threadIdx.x);
      if (k < Kg && c < Cg) wt[((int64_t(g) * Cg + c) * RS + tap) * Kg + k] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

template <class T>
void transpose_filter(const T* w, int G, int Kg, int R, int S, int Cg, int stride_h, int stride_w,
                      int dilation_h, int dilation_w, T* wt, gpu::Stream stream, const char* what) {
  const dim3 grid(unsigned((Cg + 31) / 32), unsigned((Kg + 31) / 32),
                  unsigned(std::min(G * R * S, 65535)));
  transpose_filter_kernel<<<grid, dim3(32, 8), 0, stream>>>(w, G, Kg, R, S, Cg, stride_h, stride_w,
                                                            dilation_h, dilation_w, wt);
  gpu::check_launch(what);
}

}  // namespace

void transpose_filter_phase_order(const Conv2dGeometry& g, const uint16_t* w, uint16_t* wt,
                                  gpu::Stream stream) {
  const int G = int(g.groups);
  transpose_filter(w, G, int(g.K) / G, int(g.R), int(g.S), int(g.C) / G, int(g.stride_h),
                   int(g.stride_w), int(g.dilation_h), int(g.dilation_w), wt, stream,
                   "conv2d_tc_backward_data (filter transpose)");
}

void transpose_filter_phase_order(const Conv2dGeometry& g, const float* w, float* wt,
                                  gpu::Stream stream) {
  transpose_filter(w, 1, int(g.K), int(g.R), int(g.S), int(g.C), int(g.stride_h), int(g.stride_w),
                   int(g.dilation_h), int(g.dilation_w), wt, stream,
                   "conv2d_backward_data_nhwc (wgmma, tf32: filter transpose)");
}

void transpose_filter_groups(const Conv2dGeometry& g, const float* w, float* wt,
                             gpu::Stream stream) {
  const int G = int(g.groups);
  transpose_filter(w, G, int(g.K) / G, int(g.R), int(g.S), int(g.C) / G, 1, 1, 1, 1, wt, stream,
                   "conv2d_backward_data_nhwc (filter transpose)");
}

}  // namespace crema::kernels::cuda::tc
