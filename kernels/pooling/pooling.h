// 2-D pooling (max and average) over each (n, c) plane of an image batch, Caffe's rules.
//
// x [N, C, H, W] -> y [N, C, P, Q]. Output (p, q) looks at the window of rows
//   h in [p*stride_h - pad_h, p*stride_h - pad_h + kernel_h)   (columns likewise from q)
// clipped to the input [0, H) x [0, W):
//   max:      y[n,c,p,q] = max of x[n,c,h,w] over the clipped window
//   average:  y[n,c,p,q] = (sum of x[n,c,h,w] over the clipped window) / window_size
// where window_size counts the window clipped to the PADDED input [-pad_h, H + pad_h) x
// [-pad_w, W + pad_w) (padding counts as zeros: count_include_pad, as Caffe and PyTorch's
// default), or, with count_include_pad false (PyTorch's option), the window clipped to the input
// itself: the average of the elements the window covers. Max pooling records in argmax[n,c,p,q] the
// flat index h*W + w, within its (n, c) plane, of the element it chose: ties pick the first in
// row-major window order, and a NaN anywhere in the window wins (the first NaN), so a diverged
// input shows as NaN.
//
// P and Q are the caller's choice (the layer decides between floor and ceil rounding; see
// pool2d_output_extent), with one requirement: every window must overlap the input itself, i.e.
// pad_h < kernel_h and (P-1)*stride_h - pad_h < H (columns likewise). Caffe drops a last window
// that would start inside the right padding; pool2d_output_extent does the same.
//
// Layout: x, y, argmax (dy, dx) are all nchw or all nhwc (channels-last, the memory order
// [N, H, W, C]: a plane's elements lie C apart). The argmax indices are the same plane indices
// h*W + w in both, so the two layouts give the same values at the same logical positions.
//
// Backward: dx is WRITTEN (zeroed, then scattered into):
//   max:      dx[n,c,argmax[n,c,p,q]] += dy[n,c,p,q]
//   average:  dx[n,c,h,w] += dy[n,c,p,q] / window_size   for every (h, w) of the clipped window
//             (window_size as in the forward)
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class PoolMode { max, average };

struct Pool2dGeometry {
  int64_t N, C, H, W;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int64_t P, Q;                   // output height, width
  bool count_include_pad = true;  // average: divide by the window within the padded input
};

// Number of windows along one axis of extent `in`: floor or ceil of
// (in + 2*pad - kernel) / stride, plus one, then (Caffe's fix) one fewer if the last window
// would start inside the right padding. Throws crema::Error when no window fits.
int64_t pool2d_output_extent(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                             bool ceil_mode);

namespace ref {
// Plain loops over the definition above, in either layout; the oracle of the tests, and the CPU's
// nhwc path. argmax may be null (max pooling without indices) and is ignored in average mode.
// Explicitly instantiated for float and double in pooling_ref.cpp.
template <class T>
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const T* x, T* y, T* argmax,
                    Layout layout = Layout::nchw);
// dy [N,C,P,Q] (+ argmax for max) -> dx [N,C,H,W], written.
template <class T>
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const T* dy, const T* argmax, T* dx,
                     Layout layout = Layout::nchw);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads, one (n, c) plane per task (nchw only).
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const float* x, float* y, float* argmax,
                    int num_threads);
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const float* dy, const float* argmax,
                     float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// Versions (pooling_cuda.cu):
//   per_element      forward: one thread per output, its window read in row-major order;
//                    backward: one thread per input element, gathering dy from the windows that
//                    contain it (no atomics, so deterministic; the same additions in the same
//                    order as the CPU path's scatter, so the same bits). In nhwc consecutive
//                    threads take consecutive channels of one pixel: every access is coalesced.
//   channel_vectors  nhwc with C a multiple of 16 / sizeof(T) and 16-byte aligned pointers: a
//                    thread owns 16 bytes of channels of one pixel, each channel computed as
//                    per_element computes it (the same bits); other calls run per_element.
// T is float, bf16_t or f16_t (compared and summed in float, each output rounded once); argmax is
// float32 for all three.
enum class PoolVersion { per_element, channel_vectors, best = channel_vectors };
template <class T>
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const T* x, T* y, float* argmax,
                    Layout layout, PoolVersion version, gpu::Stream stream);
template <class T>
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const T* dy, const float* argmax,
                     T* dx, Layout layout, PoolVersion version, gpu::Stream stream);

// Global pooling (is_global_pooling: one window, the whole H x W plane): the forward as a
// reduction of HW = H * W elements per output (global_pooling_cuda.cu): nhwc threads along the
// channels (16 bytes each where C and x allow), nchw a warp along a plane; each plane cut into
// segments over blocks (a count fixed by the shape), the partials in `workspace` combined in
// segment order: deterministic, no atomics. Average: the float sum / HW; max: the reference's
// value and argmax (the first in row-major order, the first NaN). The backward is pool2d_backward.
// The dispatch takes it for planes of at least kGlobalReductionPixels: smaller ones (ResNet's 7 x 7
// average pool) keep pool2d_forward, whose one thread per output has enough outputs to fill the
// GPU there and sums in the CPU's order (the same bits).
constexpr int64_t kGlobalReductionPixels = 256;
template <class T>
size_t global_pool_workspace_bytes(int64_t N, int64_t C, int64_t HW, PoolMode mode, Layout layout);
template <class T>
void global_pool_forward(int64_t N, int64_t C, int64_t HW, PoolMode mode, const T* x, T* y,
                         float* argmax, Layout layout, void* workspace, gpu::Stream stream);
}  // namespace cuda

// Whether g's single window is the whole plane: P = Q = 1, no padding, a kernel at least H x W.
bool is_global_pooling(const Pool2dGeometry& g);

// Tensor level: x [N,C,H,W], y [N,C,P,Q]; argmax [N,C,P,Q] in max mode (may be null when the
// indices are not needed), null in average mode. x, y (dy, dx) of one dtype on the context's
// device: f32 (CPU and CUDA), f64 (the CPU, which runs ref::), bf16 or f16 (CUDA); argmax is f64
// beside f64 tensors and f32 beside all others (bf16 cannot hold a plane's indices). All in x's
// layout, nchw or nhwc (the CPU runs nhwc through ref::, f32 and f64).
// Throws crema::Error naming the tensors when shapes, dtypes, devices or the geometry are wrong.
void pool2d_forward(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const Tensor& x,
                    Tensor& y, Tensor* argmax);
// dy [N,C,P,Q], argmax as produced by pool2d_forward (max mode; null in average mode),
// dx [N,C,H,W] written.
void pool2d_backward(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const Tensor& dy,
                     const Tensor* argmax, Tensor& dx);

}  // namespace crema::kernels
