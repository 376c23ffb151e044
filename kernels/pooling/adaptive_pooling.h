// Adaptive 2-D pooling (PyTorch's AdaptiveAvgPool2d / AdaptiveMaxPool2d): the output size is given,
// and each output's window follows from it.
//
// x [N, C, H, W] -> y [N, C, P, Q]. Output (p, q) pools rows [h0(p), h1(p)) and columns
// [w0(q), w1(q)) of its (n, c) plane:
//   h0(p) = floor(p * H / P),   h1(p) = ceil((p + 1) * H / P)        (columns likewise, W and Q)
//   max:      y[n,c,p,q] = max of x[n,c,h,w] over the window
//   average:  y[n,c,p,q] = (sum of x[n,c,h,w] over the window) / ((h1 - h0) * (w1 - w0))
// The windows cover the input; when P does not divide H, neighbours share a row and the sizes
// differ by one. When P divides H (and Q divides W) they are pool2d's windows with kernel = stride
// = H / P, which the Pooling layer then runs instead (pooling.h's fast CPU path; output 1x1 is
// global pooling). Max pooling records in argmax[n,c,p,q] the flat index h*W + w of its choice:
// the first maximum in row-major window order, and the first NaN wins (pooling.h's rules).
//
// Backward: dx is WRITTEN (zeroed, then scattered into):
//   max:      dx[n,c,argmax[n,c,p,q]] += dy[n,c,p,q]
//   average:  dx[n,c,h,w] += dy[n,c,p,q] / window_size   for every (h, w) of the window
// Row h lies in the windows p in [floor(h * P / H), ceil((h + 1) * P / H)) (columns likewise),
// which the CUDA backward gathers from.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/common/host_device.h"
#include "kernels/pooling/pooling.h"

namespace crema::kernels {

struct AdaptivePool2dGeometry {
  int64_t N, C, H, W;
  int64_t P, Q;  // output height, width (>= 1; may exceed H, W)
};

// The window of output o along an axis of extent `in` pooled to `out` outputs: [start, end).
CREMA_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return o * in / out;
}
CREMA_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

namespace ref {
// Plain loops over the definition above; the oracle of the tests. argmax may be null (max
// pooling without indices) and is ignored in average mode. Explicitly instantiated for float and
// double.
template <class T>
void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const T* x, T* y,
                             T* argmax);
template <class T>
void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const T* dy,
                              const T* argmax, T* dx);
}  // namespace ref

namespace cpu {
// The reference's loops on up to `num_threads` OpenMP threads, one (n, c) plane per task: the same
// operations in the same order, so the same bits.
void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* x,
                             float* y, float* argmax, int num_threads);
void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* dy,
                              const float* argmax, float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// Forward: one thread per output, its window in row-major order. Backward: one thread per input
// element, gathering dy from the windows that contain it in (p, q) row-major order, the order of
// the CPU's scatter: the same bits, no atomics.
void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* x,
                             float* y, float* argmax, gpu::Stream stream);
void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* dy,
                              const float* argmax, float* dx, gpu::Stream stream);
}  // namespace cuda

// Tensor level, as pool2d_forward / pool2d_backward (pooling.h): x [N,C,H,W], y and argmax
// [N,C,P,Q] (argmax float32, max mode only, may be null in the forward), dx [N,C,H,W] written; all
// float32 (or all float64 on the CPU, which runs ref::) on the context's device. Throws
// crema::Error naming the tensors when shapes, dtypes, devices or the geometry are wrong.
void adaptive_pool2d_forward(Context& ctx, const AdaptivePool2dGeometry& g, PoolMode mode,
                             const Tensor& x, Tensor& y, Tensor* argmax);
void adaptive_pool2d_backward(Context& ctx, const AdaptivePool2dGeometry& g, PoolMode mode,
                              const Tensor& dy, const Tensor* argmax, Tensor& dx);

}  // namespace crema::kernels
