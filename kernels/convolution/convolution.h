// 2-D convolution: forward, backward data, backward filter, backward bias.
//
// Activations are NCHW, filters KCRS with C/groups input channels each (Caffe, PyTorch, cuDNN).
// As in every deep-learning framework the "convolution" is a cross-correlation. With
// G = groups, Cg = C/G input channels and Kg = K/G output channels per group, output channel k
// belongs to group g = k / Kg and reads input channels g*Cg .. g*Cg + Cg-1:
//
//   y[n,k,p,q] = bias[k] + sum_{c<Cg, r<R, s<S} w[k,c,r,s] * x[n, g*Cg + c, i, j]
//       with i = p*stride_h - pad_h + r*dilation_h,  j = q*stride_w - pad_w + s*dilation_w,
//       and x reading 0 outside the image;
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1,  Q likewise.
//
// The backward passes are the adjoints of that linear map (L is the loss, dy = dL/dy):
//   dx[n, g*Cg + c, i, j] = sum over (k in group g, r, s, p, q) that read (i, j) of
//                           dy[n,k,p,q] * w[k,c,r,s]                      (written)
//   dw[k,c,r,s]          += sum_{n,p,q} dy[n,k,p,q] * x[n, g*Cg + c, i, j]  (accumulated)
//   db[k]                += sum_{n,p,q} dy[n,k,p,q]                        (accumulated)
// Parameter gradients accumulate (crema's rule, so micro-batches add up); dx is written.
//
// Algorithm (cpu): im2col + GEMM per group and per chunk of m images (m sized for a wide GEMM
// whose operands stay in cache: 1 for LeNet's conv1, 4 for conv2; README.md has the measurements):
//   forward:  y[Kg, m*P*Q] = w[Kg, Cg*R*S] * col[Cg*R*S, m*P*Q]     then reorder to NKPQ + bias
//   data:     dcol[Cg*R*S, m*P*Q] = w^T * dy[Kg, m*P*Q]             then col2im
//   filter:   dw[Kg, Cg*R*S] += dy[Kg, m*P*Q] * col^T               (inner dimension m*P*Q)
// A 1x1 filter with stride 1 and no padding ("pointwise") in chunks of one image (P*Q of 256 and
// more) skips im2col and col2im: an image's group slice x[n, group's channels] is already the
// [Cg, H*W] matrix col would be, so each pass is one plain GEMM per image and group, reading and
// writing the tensors in place.
// Algorithm (cuda): one of the records of algorithm.h (implicit GEMM, the same products with the
// patches gathered tile by tile into shared memory; plain batched GEMMs for pointwise filters;
// direct loops for depthwise convolutions; Winograd; FFT; ...), chosen per pass by select.h;
// README.md has the ladder, the choice and its reasons.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/geometry.h"
#include "kernels/convolution/select.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels {

// Tensors. Shapes are the logical ones whatever the layout (core/tensor.h): x [N,C,H,W],
// w [K,C/groups,R,S], y [N,K,P,Q]. The first input (x, or dy for backward data and bias) fixes
// the call's activation dtype and layout; x, w, y, dy and dx must have both, dw the layout.
// In nhwc the activations are channels-last and the filter KRSC (the NHWC formulas below).
// The parameters -- bias, db and dw -- are conv_parameter_dtype of the activations: f32 for bf16
// and f16 activations (the fp32 master weights; the tensor cores accumulate in fp32), else the
// activations' dtype. What runs (crema::Error naming the op for anything else):
//   f32 nchw       CUDA: a record of algorithm.h chosen by `request`; CPU: im2col + GEMM
//   f32 nhwc       CUDA: cuda::conv2d_*_nhwc in request.math; CPU: the same im2col + GEMM
//                  between transposes (cpu::conv2d_*_nhwc below)
//   bf16, f16 nhwc CUDA only: the tensor-core passes of convolution_tc.h
//   (depthwise geometries in nhwc on CUDA: the direct kernels of convolution_depthwise_nhwc.h,
//   fp32 sums whatever the math)
//   f64 nchw, nhwc CPU only: the references (ref::)
// On a GPU in nchw each pass asks select_conv_algorithm (select.h) once for the algorithm
// `request` picks -- the heuristic's by default, or find's, or a pinned one (which must support
// the geometry: crema::Error otherwise) -- and runs that record's pass in request.math where it
// has that arithmetic (ConvAlgorithm::computes_in; the others compute in fp32 whatever the math,
// as cuDNN's algorithms without a tensor-core path do). In nhwc each pass has one kernel: only
// request.math is read (f32), and 16-bit tensors compute in their own type. On the CPU the
// request is ignored: every math computes in fp32 there (at least as exact as tf32 or bf16), as
// the GEMM does.
DType conv_parameter_dtype(DType activations);
// The kernel `pass` runs on CUDA for `dtype` tensors in nhwc (there is no choice to make): for
// f32 "tc_wgmma" where `math` is tf32 and the current device takes the wgmma kernels for g
// (forward and backward data: cuda::conv2d_*_nhwc_uses_wgmma; 16-byte aligned tensors), else
// "nhwc_implicit_gemm"; for bf16 and f16 (whatever the math) "tc_wgmma" where the current device
// takes the wgmma kernels for g (convolution_tc.h: conv2d_tc_*_uses_wgmma; 16-byte aligned
// tensors), else "tc_implicit_gemm" (mma.sync); backward data with few channels
// "direct_mma_few_channels", "direct_few_channels" or "col2im_gemm" where it takes those kernels
// (conv2d_*_uses_direct_mma, conv2d_*_uses_direct, conv2d_*_uses_col2im); the bf16 and f16
// forward and filter gradient with few input channels "stem_mma" (conv2d_tc_forward_uses_stem,
// conv2d_tc_backward_filter_uses_stem); "depthwise_nhwc" for a
// depthwise geometry (g.depthwise()) in any of the three dtypes and maths; "" for other dtypes and
// without CUDA.
const char* conv2d_nhwc_kernel(ConvPass pass, const Conv2dGeometry& g, DType dtype,
                               cuda::GemmMath math = cuda::GemmMath::fp32);
// The bytes of the context's shared workspace (Context::workspace) `pass` asks for on `device`
// with `dtype` activations in `layout`, as the calls below take it: in nchw f32 on CUDA the
// algorithm `request` picks (its memo's when made for g, a pinned one, else the heuristic's --
// find's choice is only known once it has run, and the heuristic's stands in for it), the bias
// gradient riding along when `with_bias`; in nhwc the one kernel's scratch (the bias gradient's
// own pass included); on the CPU the im2col paths' at `num_threads`. For the memory plan
// (core/net.h): a Net sizes the workspace once, before its first step, by its largest layer.
size_t conv2d_workspace_bytes(const Device& device, ConvPass pass, const Conv2dGeometry& g,
                              DType dtype, Layout layout, const ConvRequest& request,
                              bool with_bias, int num_threads);
// x [N,C,H,W], w [K,C/groups,R,S], bias [K] or nullptr, y [N,K,P,Q] (written).
void conv2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y, const ConvRequest& request = {});
// dy [N,K,P,Q], w [K,C/groups,R,S] -> dx [N,C,H,W] (written).
void conv2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                          Tensor& dx, const ConvRequest& request = {});
// x [N,C,H,W], dy [N,K,P,Q] -> dw [K,C/groups,R,S] (accumulated: dw += ...).
void conv2d_backward_filter(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                            const Tensor& dy, Tensor& dw, const ConvRequest& request = {});
// dy [N,K,P,Q] -> db [K] (accumulated: db += sum of dy over N, P, Q).
void conv2d_backward_bias(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, Tensor& db);
// y or dy as a window of a wider tensor (core/VIEWS.md): image n's [K, P, Q] block at element
// offset + n * image_stride of `parent` (a Concat's top: image_stride = C_total * P * Q, offset =
// the channels before this block times P * Q). The window calls below are the calls above with
// y or dy so placed, bit for bit the same sums; they run where conv2d_window_supported says (the
// CPU's f32 nchw path; the GPU's paths do not take an image stride yet).
struct ImageWindow {
  Tensor* parent = nullptr;
  int64_t offset = 0;
  int64_t image_stride = 0;
};
bool conv2d_window_supported(const Device& device, DType dtype, Layout layout);
void conv2d_forward_window(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                           const Tensor* bias, const ImageWindow& y);
void conv2d_backward_data_window(Context& ctx, const Conv2dGeometry& g, const ImageWindow& dy,
                                 const Tensor& w, Tensor& dx);
// dw and db as conv2d_backward_weights (either may be null, not both).
void conv2d_backward_weights_window(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                    const ImageWindow& dy, Tensor* dw, Tensor* db);
// Both parameter gradients at once: dw += ... as conv2d_backward_filter, and db += ... as
// conv2d_backward_bias when db is not null. On the GPU in nchw the bias gradient rides along in
// the filter gradient's pass over dy (db is the filter GEMM against an extra patch row of ones),
// which saves a launch and a read of dy; on the CPU and in nhwc it is the two calls.
void conv2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                             const Tensor& dy, Tensor& dw, Tensor* db,
                             const ConvRequest& request = {});

// Transposed convolution (Caffe's Deconvolution, PyTorch's ConvTranspose2d): the adjoint of
// conv2d in its input. `g` is the geometry of the convolution that maps the transposed
// convolution's OUTPUT back to its INPUT: y [N, g.C, g.H, g.W] is what the convolution reads and
// x [N, g.K, g.P(), g.Q()] what it writes; the filters are the convolution's, w [g.K, g.C/groups,
// R, S], which is PyTorch's ConvTranspose2d layout [C_in, C_out/groups, R, S]. Then
//   y   = conv2d_backward_data(g, x, w) + bias       (bias [g.C]; y written)
//   dx  = conv2d_forward(g, dy, w)                    (no bias; dx written)
//   dw += conv2d_backward_filter(g, dy, x)            (the two activations swap roles)
//   db += sum over n, h, w of dy[n, c, h, w]
// (<conv(u, w), v> = <u, conv_transpose(v, w)> for all u, v: each pass is the other's adjoint.)
// `request` chooses for the convolution pass each runs (forward: backward data's; backward data:
// forward's; weights: backward filter's).
void conv_transpose2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& w, const Tensor* bias, Tensor& y,
                              const ConvRequest& request = {});
void conv_transpose2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy,
                                    const Tensor& w, Tensor& dx, const ConvRequest& request = {});
// dw and db may each be null (a frozen or absent parameter): that gradient is not computed.
void conv_transpose2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                       const Tensor& dy, Tensor* dw, Tensor* db,
                                       const ConvRequest& request = {});

// Reference: direct loops over the definitions above, in T (float or double).
namespace ref {
template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* bias, T* y);
template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx);
template <class T>
void conv2d_backward_filter(const Conv2dGeometry& g, const T* x, const T* dy, T* dw);
template <class T>
void conv2d_backward_bias(const Conv2dGeometry& g, const T* dy, T* db);
// A per-channel bias on y [N, C, HW]: y[n, c, i] += bias[c]; and its gradient, db[c] += sum over
// n, i of dy[n, c, i] (the transposed convolution's bias lives on the convolution's input side).
template <class T>
void add_channel_bias(int64_t N, int64_t C, int64_t HW, const T* bias, T* y);
template <class T>
void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const T* dy, T* db);
}  // namespace ref

// Fast CPU path: im2col + sgemm on up to `num_threads` OpenMP threads. `workspace` must hold
// at least the floats returned by the matching *_workspace function for the same geometry and
// thread count (backward bias needs none). `y_stride` / `dy_stride`: the floats between images
// of y or dy when they are a window of a wider tensor (core/VIEWS.md: a Concat's channels);
// 0 is K*P*Q, dense. Each image's [K, P, Q] block stays contiguous.
namespace cpu {
size_t conv2d_forward_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_data_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_filter_workspace(const Conv2dGeometry& g, int num_threads);

void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, float* workspace, int num_threads, int64_t y_stride = 0);
void conv2d_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                          float* workspace, int num_threads, int64_t dy_stride = 0);
void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                            float* workspace, int num_threads, int64_t dy_stride = 0);
void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, int num_threads,
                          int64_t dy_stride = 0);
void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      int num_threads);
void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           int num_threads, int64_t dy_stride = 0);
}  // namespace cpu

// CUDA on device pointers, queued on `stream`, for the biases (the passes themselves are the
// records' of algorithm.h).
namespace cuda {
// db += sum of dy over N, P, Q, alone (one block per channel, a fixed-order tree in each).
void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, gpu::Stream stream);
// y [N, C, HW] += bias[c] per channel; db[c] += sum over n, i of dy[n, c, i] (as above).
void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      gpu::Stream stream);
void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           gpu::Stream stream);
}  // namespace cuda

// ---- NHWC: channels-last activations, KRSC filters ------------------------------------------
// The same convolution with the channel index innermost: x [N,H,W,C], w [K,R,S,C/groups],
// y [N,P,Q,K], dy [N,P,Q,K], dx [N,H,W,C], dw [K,R,S,C/groups] (PyTorch's channels_last, cuDNN's
// and CUTLASS's tensor-core layout). The GEMM's inner index (r, s, c) then has c innermost and
// contiguous in both operands, so a tile of the patch matrix is rows of 16-byte runs of channels
// that cp.async copies straight into shared memory (README.md, "NHWC").
//   y[n,p,q,k]   = bias[k] + sum_{r,s,c<Cg} w[k,r,s,c] * x[n, i, j, g*Cg + c]      (written)
//   dx[n,i,j,c'] = sum over (k in c's group, r, s, p, q) reading (i, j) of dy[n,p,q,k] * w[k,r,s,c]
//   dw[k,r,s,c] += sum_{n,p,q} dy[n,p,q,k] * x[n, i, j, g*Cg + c]                  (accumulated)
// with i, j, P, Q and the groups as in the NCHW definition above.
namespace ref {
// The NCHW reference on transposed copies (the tests' oracle).
template <class T>
void conv2d_forward_nhwc(const Conv2dGeometry& g, const T* x, const T* w, const T* bias, T* y);
template <class T>
void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const T* dy, const T* w, T* dx);
template <class T>
void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const T* x, const T* dy, T* dw);
}  // namespace ref

// The CPU path in NHWC: transposes to NCHW (KCRS) in the workspace around the im2col + GEMM
// path above, so the same bits as that path on the transposed tensors
// (convolution_nhwc_cpu.cpp); the bias gradient sums the rows of dy [N*P*Q, K]. The workspace
// queries give floats.
namespace cpu {
size_t conv2d_forward_nhwc_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_data_nhwc_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_filter_nhwc_workspace(const Conv2dGeometry& g, int num_threads);
void conv2d_forward_nhwc(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, int num_threads);
void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, int num_threads);
void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* workspace, int num_threads);
void conv2d_backward_bias_nhwc(const Conv2dGeometry& g, const float* dy, float* db,
                               int num_threads);
}  // namespace cpu

// One implicit-GEMM kernel per pass (convolution_nhwc_gemm.cuh): a 128 x 128 or 128 x 64 block
// tile, 32-deep slabs in a 3-stage cp.async pipeline, FFMA in fp32 and mma.sync in tf32 and bf16
// (fp32 accumulation; operands rounded to the math, cvt.rna / cvt.rn). 16-byte copies where the
// pass's channel counts (forward C/groups, data K/groups, filter both) are multiples of 4 and the
// tensors 16-byte aligned, else 4-byte copies (any C, any groups). Any stride, padding and
// dilation. Deterministic: the filter gradient splits N*P*Q into fixed slices whose partial sums
// (workspace) are added in slice order, no atomics. The workspace queries give floats; the
// pointers must not alias.
//
// In tf32 math on an H100 or H200 (compute capability 9.0), forward and backward data run on the
// wgmma + TMA kernels of the 16-bit convolutions instead (convolution_tc_wgmma.h) where they fit
// -- groups 1, C and K multiples of 4, x, w, y, dy, dx and the workspace 16-byte aligned, and the
// geometric rules of convolution_tc.h (a 1x1 without padding; other filters on output rows that
// fill the tiles) -- with the operands *truncated* to TF32 by the tensor cores (not rounded) and
// fp32 sums; `kernels` forces one family (the benchmark), as for the 16-bit passes. The filter
// gradient too (same fits with C and K multiples of 4; x, dy 16-byte aligned), its operands
// *rounded* to TF32 (cvt.rna) as the mma.sync kernels do. fp32 math is always the exact FFMA
// kernels. Depthwise geometries
// (g.depthwise()) run the direct kernels of convolution_depthwise_nhwc.h instead, in fp32 in
// every math (the workspace queries give theirs: none forward and data, the slices' partials
// for the filter).
namespace cuda {
size_t conv2d_forward_nhwc_workspace(const Conv2dGeometry& g);
size_t conv2d_backward_data_nhwc_workspace(const Conv2dGeometry& g);
size_t conv2d_backward_filter_nhwc_workspace(const Conv2dGeometry& g);
// y = conv(x, w) + bias (bias may be null); y is written.
void conv2d_forward_nhwc(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, gpu::Stream stream,
                         GemmMath math = GemmMath::fp32, TcKernels kernels = TcKernels::best);
// dx is written.
void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, gpu::Stream stream, GemmMath math = GemmMath::fp32,
                               TcKernels kernels = TcKernels::best);
// Whether the pass of g in `math` runs the wgmma kernels on the current device (given 16-byte
// aligned tensors; misaligned ones take the implicit-GEMM kernels).
bool conv2d_forward_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math,
                                    TcKernels kernels = TcKernels::best);
bool conv2d_backward_data_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math,
                                          TcKernels kernels = TcKernels::best);
// Whether backward data of g in `math` runs the col2im kernels (convolution_tc.h, TcKernels: tf32
// with 1 < C < 32 not a multiple of 4, groups 1).
bool conv2d_backward_data_nhwc_uses_col2im(const Conv2dGeometry& g, GemmMath math,
                                           TcKernels kernels = TcKernels::best);
// Whether backward data of g in `math` runs the direct few-channel kernel (convolution_tc.h,
// TcKernels: either math, C < 32, groups 1, dilation 1; `best` where C is not a multiple of 4 and
// at most 8, or K not a multiple of 4 where col2im does not run: few_channels_direct_pays).
bool conv2d_backward_data_nhwc_uses_direct(const Conv2dGeometry& g, GemmMath math,
                                           TcKernels kernels = TcKernels::best);
// Whether backward data of g in `math` runs the few-channel kernel on mma.sync (convolution_tc.h,
// TcKernels::direct_mma: tf32 only, stride 1, C <= 32, groups 1, dilation 1; `best`:
// few_channels_mma_pays with 4-float vectors).
bool conv2d_backward_data_nhwc_uses_direct_mma(const Conv2dGeometry& g, GemmMath math,
                                               TcKernels kernels = TcKernels::best);
bool conv2d_backward_filter_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math,
                                            TcKernels kernels = TcKernels::best);
// dw += ..., and db += sum of dy over N, P, Q when db is not null.
void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* db, float* workspace, gpu::Stream stream,
                                 GemmMath math = GemmMath::fp32,
                                 TcKernels kernels = TcKernels::best);

// db[k] += sum over the N*P*Q rows of dy [N*P*Q, K] of dy[., k], dy of T = float, bf16_t or
// f16_t, summed in fp32 (convolution_bias_nhwc_cuda.cu): warps read rows of 32 channels, fixed
// slices of rows summed in slice order (deterministic). The workspace query gives floats.
size_t conv2d_backward_bias_nhwc_workspace(const Conv2dGeometry& g);
template <class T>
void conv2d_backward_bias_nhwc(const Conv2dGeometry& g, const T* dy, float* db, float* workspace,
                               gpu::Stream stream);
}  // namespace cuda

}  // namespace crema::kernels
