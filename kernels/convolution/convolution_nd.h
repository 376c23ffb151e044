// N-d convolution, 1 to 3 spatial axes: forward, backward data, backward filter, backward bias.
//
// The definitions of convolution.h with one more axis: activations N C D H W, filters
// K (C/groups) T R S, and for group g = k / (K/groups), Cg = C/groups,
//
//   y[n,k,o,p,q] = bias[k] + sum_{c<Cg, t<T, r<R, s<S} w[k,c,t,r,s] * x[n, g*Cg + c, d, i, j]
//       with d = o*stride_d - pad_d + t*dilation_d (i, j as in 2-D), x reading 0 outside,
//
// and the backward passes its adjoints (dx written; dw and db accumulated, crema's rule). One
// and two spatial axes are the same sums with the leading axes dropped (geometry_nd.h).
//
// Which code runs:
//   rank 1, 2   the 2-D entry points of convolution.h on 4-D views ([N,C,L] as [N,C,1,L]): the
//               1-D convolution IS a 2-D one with H = R = 1, so it gets every tuned CPU and GPU
//               path (and the algorithm choice of select.h) at no cost;
//   rank 3      cpu f32: vol2col + cpu::sgemm per image and group (the 2-D im2col path one axis
//               up); cpu f64: ref:: below (the gradient checks' path); cuda f32: one of two
//               algorithms (kernels/convolution/README.md, "N-d"), the rule being
//                 depth_col  where conv_nd_depth_supports(g) (every geometry of a real net): the
//                            depth taps folded into channels, then ONE 2-D convolution of
//                            convolution.h's records per chunk of images -- the record `request`
//                            picks (auto, find or pinned) for that 2-D geometry, in its math;
//                 vol2col    otherwise: vol2col of a chunk of images + cuda::sgemm per group,
//                            col2vol as a gather for backward data, fp32 whatever the math.
// ref:: takes any rank: the oracle of the tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/geometry_nd.h"
#include "kernels/convolution/select.h"

namespace crema::kernels {

// Tensor level. x [N,C,in...], w [K,C/groups,kernel...], bias [K] or null, y [N,K,out...];
// `request` reaches the 2-D algorithm choice (rank 1 and 2 on a GPU) and is ignored otherwise.
void conv_nd_forward(Context& ctx, const ConvNdGeometry& g, const Tensor& x, const Tensor& w,
                     const Tensor* bias, Tensor& y, const ConvRequest& request = {});
// dy [N,K,out...], w -> dx [N,C,in...] (written).
void conv_nd_backward_data(Context& ctx, const ConvNdGeometry& g, const Tensor& dy, const Tensor& w,
                           Tensor& dx, const ConvRequest& request = {});
// dw += correlation of x with dy, and db += sum of dy over N and the output axes; either may be
// null (a frozen or absent parameter: not computed), not both.
void conv_nd_backward_weights(Context& ctx, const ConvNdGeometry& g, const Tensor& x,
                              const Tensor& dy, Tensor* dw, Tensor* db,
                              const ConvRequest& request = {});

// The bytes of the context's workspace `pass` takes for g on `device`, as the calls above take
// it, for the memory plan (Layer::workspace_bytes): rank 1 and 2 conv2d_workspace_bytes of their
// 2-D geometry; rank 3 f32 on CUDA depth_col's (with the 2-D record the request picks: the
// memo's when made for the chunk's geometry, a pinned one, else the heuristic's -- find's choice
// is known only once it has run) or vol2col's, on the CPU vol2col's; 0 for f64. The filter
// pass's is what it takes with dw (`with_bias`: db too); db alone takes none.
size_t conv_nd_workspace_bytes(const Device& device, ConvPass pass, const ConvNdGeometry& g,
                               DType dtype, Layout layout, const ConvRequest& request,
                               bool with_bias, int num_threads);

// Reference: direct loops over the padded 3-axis form, in T (float or double); any rank.
namespace ref {
template <class T>
void conv_nd_forward(const ConvNdGeometry& g, const T* x, const T* w, const T* bias, T* y);
template <class T>
void conv_nd_backward_data(const ConvNdGeometry& g, const T* dy, const T* w, T* dx);
template <class T>
void conv_nd_backward_filter(const ConvNdGeometry& g, const T* x, const T* dy, T* dw);
}  // namespace ref

// Fast CPU path, any rank through the padded form (the Tensor level sends only rank 3 here):
// per image and group, vol2col (threads over channels) then cpu::sgemm on `num_threads`, where
//   col[((c*T + t)*R + r)*S + s, (o*P + p)*Q + q] = x[n, g*Cg + c, d, i, j]   (0 outside)
// is im2col.h one axis up, and col2vol (its adjoint) adds dcol back into dx.
// `workspace` holds conv_nd_workspace(g) floats: one image's col [Cg*T*R*S, out_volume].
namespace cpu {
size_t conv_nd_workspace(const ConvNdGeometry& g);
void conv_nd_forward(const ConvNdGeometry& g, const float* x, const float* w, const float* bias,
                     float* y, float* workspace, int num_threads);
void conv_nd_backward_data(const ConvNdGeometry& g, const float* dy, const float* w, float* dx,
                           float* workspace, int num_threads);
void conv_nd_backward_filter(const ConvNdGeometry& g, const float* x, const float* dy, float* dw,
                             float* workspace, int num_threads);
}  // namespace cpu

// CUDA on device pointers, queued on `stream`, any rank through the padded form. vol2col: images in
// chunks whose col [Cg*T*R*S, m*out_volume] and GEMM output [K/groups, m*out_volume] fit
// conv_nd_workspace(g) floats (at most 64 Mi floats, at least one image); per chunk and group one
// vol2col, one cuda::sgemm and a reorder to NK(out) (bias added there). Deterministic.
namespace cuda {
size_t conv_nd_workspace(const ConvNdGeometry& g);
void conv_nd_forward(const ConvNdGeometry& g, const float* x, const float* w, const float* bias,
                     float* y, float* workspace, gpu::Stream stream);
void conv_nd_backward_data(const ConvNdGeometry& g, const float* dy, const float* w, float* dx,
                           float* workspace, gpu::Stream stream);
void conv_nd_backward_filter(const ConvNdGeometry& g, const float* x, const float* dy, float* dw,
                             float* workspace, gpu::Stream stream);

// depth_col: a 3-D convolution as a 2-D one (convolution_nd_depth_cuda.cu). With T taps along
// depth, D -> O output depths, in-plane input H x W and output P x Q, gather the depth taps of
// each output depth into channels,
//   col[n, o, c, t, h, w] = x[n, c, o*stride_d - pad_d + t*dilation_d, h, w]   (0 outside),
// then col of m images is the input of a 2-D convolution over m*O "images" of C*T channels:
//   y'[n*O + o, k, p, q] = sum_{(c,t), r, s} w'[k, (c,t), r, s] * col[n, o, (c,t), ...]
// whose filters w' [K, (C/groups)*T, R, S] are w [K, C/groups, T, R, S] as it lies in memory
// (channel c*T + t), whose groups are the 3-D groups (group g's channels (c, t) are its c's),
// and whose in-plane padding, stride and dilation are the 3-D ones. y' [m, O, K, P, Q] is then
// reordered into y [m, K, O, P, Q]. Backward data runs the 2-D pass into dcol and sums each
// input depth's taps (a gather, taps in order: deterministic); backward filter runs the 2-D
// filter pass on col and the reordered dy, accumulating dw (and db) chunk by chunk.
// The scratch of a chunk (col and y', or dy' and dcol) stays within kConvNdDepthScratchFloats:
// the chunk is the largest divisor of N that fits (at least one image), so every chunk has the
// same 2-D geometry (one algorithm choice per layer).
constexpr int64_t kConvNdDepthScratchFloats = int64_t(64) << 20;  // 256 MiB
struct ConvNdDepthPlan {
  int64_t chunk;      // images per 2-D call; divides N
  Conv2dGeometry g2;  // the 2-D convolution of one chunk (N = chunk * O)
};
// Whether depth_col runs g (any rank through padded()): at most kConvNdDepthMaxTaps taps along
// depth, one image's col and y' under 2^31 elements, and C*D too (dx's rows).
constexpr int64_t kConvNdDepthMaxTaps = 32;
bool conv_nd_depth_supports(const ConvNdGeometry& g);
// The plan for g; `scratch_floats` bounds the chunk's scratch (the tests pass less to force
// several chunks).
ConvNdDepthPlan conv_nd_depth_plan(const ConvNdGeometry& g,
                                   int64_t scratch_floats = kConvNdDepthScratchFloats);
// Floats of workspace `pass` takes: the chunk's two scratch tensors (each rounded up to 256
// bytes) and, after them, `inner`'s workspace for (pass, plan.g2, with_bias).
size_t conv_nd_depth_workspace(ConvPass pass, const ConvNdGeometry& g, const ConvNdDepthPlan& plan,
                               const ConvAlgorithm& inner, bool with_bias);
// `inner` must support its pass for plan.g2 (select_conv_algorithm's choice); it runs in `math`.
void conv_nd_depth_forward(const ConvNdGeometry& g, const ConvNdDepthPlan& plan,
                           const ConvAlgorithm& inner, GemmMath math, const float* x,
                           const float* w, const float* bias, float* y, float* workspace,
                           gpu::Stream stream);
void conv_nd_depth_backward_data(const ConvNdGeometry& g, const ConvNdDepthPlan& plan,
                                 const ConvAlgorithm& inner, GemmMath math, const float* dy,
                                 const float* w, float* dx, float* workspace, gpu::Stream stream);
// dw += ..., and db += ... when db is not null.
void conv_nd_depth_backward_filter(const ConvNdGeometry& g, const ConvNdDepthPlan& plan,
                                   const ConvAlgorithm& inner, GemmMath math, const float* x,
                                   const float* dy, float* dw, float* db, float* workspace,
                                   gpu::Stream stream);
}  // namespace cuda

}  // namespace crema::kernels
