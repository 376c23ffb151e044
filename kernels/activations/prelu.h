// PReLU: a leaky ReLU whose slope is learned, one per channel or one for the whole tensor.
//
//   x, y, dy, dx  [N, C, D]   (D: everything after the channel axis, H * W for images)
//   slope         [C]
//   forward:          y[n,c,d] = x > 0 ? x : slope[c] * x
//   backward_data:    dx[n,c,d] = x > 0 ? dy : slope[c] * dy
//   backward_slope:   dslope[c] += sum over n, d where x <= 0 of x * dy     (accumulates, +=)
//
// A shared slope is the case C = 1: the Tensor-level functions view x as [1, 1, numel] when the
// slope has one element. Both backward functions read the input x (the sign of y does not tell
// x > 0 for a negative slope, and the slope gradient needs x itself). backward_slope is a
// deterministic reduction: fixed blocks added in a fixed order, in double, on the CPU and on the
// GPU alike (no float atomics), so its bits do not depend on the thread count or the run.
// y may alias x and dx may alias dy; a caller running in place must call backward_slope before
// backward_data overwrites dy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops; explicitly instantiated for float and double in prelu_ref.cpp.
template <class T>
void prelu_forward(int64_t N, int64_t C, int64_t D, const T* x, const T* slope, T* y);
template <class T>
void prelu_backward_data(int64_t N, int64_t C, int64_t D, const T* x, const T* slope, const T* dy,
                         T* dx);
template <class T>
void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const T* x, const T* dy, T* dslope);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads for large inputs. backward_slope sums fixed
// blocks of each (n, c) row in parallel, then adds them in order.
void prelu_forward(int64_t N, int64_t C, int64_t D, const float* x, const float* slope, float* y,
                   int num_threads);
void prelu_backward_data(int64_t N, int64_t C, int64_t D, const float* x, const float* slope,
                         const float* dy, float* dx, int num_threads);
void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const float* x, const float* dy,
                          float* dslope, int num_threads);
}  // namespace cpu

namespace cuda {
// The versions differ in backward_slope only (forward and backward_data are one elementwise map):
//   block_per_channel: one block of 256 threads reduces each channel's N * D products;
//   split_channel:     each channel is cut into up to 64 slices, one block each, whose partial
//                      sums land in the workspace and are added in slice order by a second
//                      kernel: enough blocks to fill the GPU when C is small (a shared slope).
enum class PreluVersion { block_per_channel, split_channel, best = split_channel };
void prelu_forward(int64_t N, int64_t C, int64_t D, const float* x, const float* slope, float* y,
                   gpu::Stream stream);
void prelu_backward_data(int64_t N, int64_t C, int64_t D, const float* x, const float* slope,
                         const float* dy, float* dx, gpu::Stream stream);
// Floats of scratch memory backward_slope needs (0 when it needs none).
size_t prelu_backward_slope_workspace(int64_t N, int64_t C, int64_t D, PreluVersion version);
void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const float* x, const float* dy,
                          float* dslope, float* workspace, PreluVersion version,
                          gpu::Stream stream);
}  // namespace cuda

// Tensor level: x (any shape with at least two axes when the slope has more than one element;
// the slope's extent must then be x.dim(1)), y/dy/dx of x's shape, slope and dslope of one shape,
// all float32 (or all float64 on the CPU, which runs ref::) on the context's device. Throws
// crema::Error naming the tensors otherwise.
void prelu_forward(Context& ctx, const Tensor& x, const Tensor& slope, Tensor& y);
void prelu_backward_data(Context& ctx, const Tensor& x, const Tensor& slope, const Tensor& dy,
                         Tensor& dx);
void prelu_backward_slope(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dslope);

}  // namespace crema::kernels
