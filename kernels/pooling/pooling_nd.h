// N-d pooling, 1 to 3 spatial axes (PyTorch's MaxPool1d/3d, AvgPool1d/3d; cuDNN's N-d pooling):
// pooling.h's definitions with one window extent, stride and padding per axis. For 3 axes,
// output (o, p, q) of plane (n, c) looks at the window
//   d in [o*stride_d - pad_d, o*stride_d - pad_d + kernel_d)   (h from p, w from q likewise)
// clipped to the input; max takes the largest element (ties: the first in row-major window
// order; a NaN wins) and records its flat index (d*H + h)*W + w within the plane in argmax;
// average divides the window's sum by its size clipped to the padded input (count_include_pad,
// PyTorch's default) or to the input itself. Backward writes dx: max scatters dy to the argmax,
// average spreads dy / window_size over the clipped window. The output extents are the caller's
// (pool2d_output_extent per axis), every window overlapping the input.
//
// Which code runs: rank 1 and 2 call pooling.h's 2-D entry points on 4-D views ([N, C, L] as
// [N, C, 1, L]: the same windows, the same argmax indices); rank 3 dispatches to the code below
// (cpu f32: planes on the threads; cuda f32: one thread per output forward, one per input element
// backward gathering from the windows that contain it, as the 2-D kernels; cpu f64: reference).
#pragma once

#include <array>
#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/pooling/pooling.h"

namespace crema::kernels {

struct PoolNdGeometry {
  int rank = 2;          // spatial axes: 1, 2 or 3
  int64_t N = 1, C = 1;  // images, channels
  std::array<int64_t, 3> in{}, kernel{}, stride{1, 1, 1}, pad{},
      out{};                      // per axis, outermost first
  bool count_include_pad = true;  // average: divide by the window in the padded input

  int64_t in_volume() const;   // one plane's input elements
  int64_t out_volume() const;  // one plane's outputs
  Shape x_shape() const;       // [N, C, in...]
  Shape y_shape() const;       // [N, C, out...]
  // Rank 1 or 2 only: the equal 2-D geometry (rank 1: H = P = kernel_h = stride_h = 1, pad_h 0).
  Pool2dGeometry as_2d() const;
  // The same pooling over 3 axes, the missing leading axes of extent 1.
  PoolNdGeometry padded() const;
};

// Tensor level: x [N,C,in...], y [N,C,out...]; argmax [N,C,out...] float32 in max mode (may be
// null when not needed), null in average mode. f32 (or f64 on the CPU: the reference). Throws
// crema::Error naming the op and the geometry when shapes or geometry are wrong.
void pool_nd_forward(Context& ctx, const PoolNdGeometry& g, PoolMode mode, const Tensor& x,
                     Tensor& y, Tensor* argmax);
// dy [N,C,out...] (+ argmax in max mode) -> dx [N,C,in...], written.
void pool_nd_backward(Context& ctx, const PoolNdGeometry& g, PoolMode mode, const Tensor& dy,
                      const Tensor* argmax, Tensor& dx);

// Plain loops over the padded form, any rank: the oracle of the tests.
namespace ref {
template <class T>
void pool_nd_forward(const PoolNdGeometry& g, PoolMode mode, const T* x, T* y, T* argmax);
template <class T>
void pool_nd_backward(const PoolNdGeometry& g, PoolMode mode, const T* dy, const T* argmax, T* dx);
}  // namespace ref

namespace cpu {
// The reference's loops in float on up to `num_threads` OpenMP threads, one plane per task.
void pool_nd_forward(const PoolNdGeometry& g, PoolMode mode, const float* x, float* y,
                     float* argmax, int num_threads);
void pool_nd_backward(const PoolNdGeometry& g, PoolMode mode, const float* dy, const float* argmax,
                      float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// Forward: one thread per output, its window in row-major order. Backward: one thread per input
// element gathering from the windows that contain it, in the CPU scatter's order (same bits, no
// atomics).
void pool_nd_forward(const PoolNdGeometry& g, PoolMode mode, const float* x, float* y,
                     float* argmax, gpu::Stream stream);
void pool_nd_backward(const PoolNdGeometry& g, PoolMode mode, const float* dy, const float* argmax,
                      float* dx, gpu::Stream stream);
}  // namespace cuda

}  // namespace crema::kernels
