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
// Algorithm (cuda): implicit GEMM, the same products with the patches gathered tile by tile
// into shared memory; plain batched GEMMs for pointwise filters; direct loops for depthwise
// convolutions (one input channel per group); README.md has the choice and its reasons.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/im2col/im2col.h"

namespace crema::kernels {

// Geometry of a 2-D convolution, NCHW activations and KCRS filters (C/groups per filter).
struct Conv2dGeometry {
  int64_t N, C, H, W;  // input
  int64_t K;           // output channels
  int64_t R, S;        // filter height, width
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;

  int64_t P() const { return (H + 2 * pad_h - dilation_h * (R - 1) - 1) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dilation_w * (S - 1) - 1) / stride_w + 1; }
  // Throws crema::Error naming `where` (the layer) when the geometry cannot work: non-positive
  // sizes, strides or dilations, negative padding, C or K not divisible by groups, or a
  // (dilated) filter larger than the padded input.
  void validate(const std::string& where) const;
  // The patches of one image within one group (C/groups channels), for im2col.
  Im2colGeometry group_patches() const;
  // A 1x1 filter, stride 1, no padding: patches are the input itself (P = H, Q = W).
  bool pointwise() const {
    return R == 1 && S == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
  // One input channel per group, several groups (MobileNet's depthwise convolution; K/groups
  // filters per channel).
  bool depthwise() const { return groups > 1 && C == groups; }
};

namespace cuda {
enum class ConvVersion;  // below
}  // namespace cuda

// On a GPU each pass runs `version` when given (it must support the geometry: crema::Error
// otherwise), else the heuristic's choice for the geometry and math (cuda::forward_version and
// its siblings; convolution_select.h chooses by measuring), in `math` where the version has that
// arithmetic (cuda::computes_in; the others compute in fp32 whatever the math, as cuDNN's
// algorithms without a tensor-core path do). On the CPU `version` and `math` are ignored:
// every math computes in fp32 there (at least as exact as tf32 or bf16), as the GEMM does.
// x [N,C,H,W], w [K,C/groups,R,S], bias [K] or nullptr, y [N,K,P,Q] (written).
void conv2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y,
                    std::optional<cuda::ConvVersion> version = std::nullopt,
                    cuda::GemmMath math = cuda::GemmMath::fp32);
// dy [N,K,P,Q], w [K,C/groups,R,S] -> dx [N,C,H,W] (written).
void conv2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                          Tensor& dx, std::optional<cuda::ConvVersion> version = std::nullopt,
                          cuda::GemmMath math = cuda::GemmMath::fp32);
// x [N,C,H,W], dy [N,K,P,Q] -> dw [K,C/groups,R,S] (accumulated: dw += ...).
void conv2d_backward_filter(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                            const Tensor& dy, Tensor& dw,
                            std::optional<cuda::ConvVersion> version = std::nullopt,
                            cuda::GemmMath math = cuda::GemmMath::fp32);
// dy [N,K,P,Q] -> db [K] (accumulated: db += sum of dy over N, P, Q).
void conv2d_backward_bias(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, Tensor& db);
// Both parameter gradients at once: dw += ... as conv2d_backward_filter, and db += ... as
// conv2d_backward_bias when db is not null. On the GPU the bias gradient rides along in the
// filter gradient's pass over dy (db is the filter GEMM against an extra patch row of ones), which
// saves a launch and a read of dy; on the CPU it is the two calls.
void conv2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                             const Tensor& dy, Tensor& dw, Tensor* db,
                             std::optional<cuda::ConvVersion> version = std::nullopt,
                             cuda::GemmMath math = cuda::GemmMath::fp32);

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
// `version` is the version of the convolution pass each runs (forward: backward data's; backward
// data: forward's; weights: backward filter's).
void conv_transpose2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& w, const Tensor* bias, Tensor& y,
                              std::optional<cuda::ConvVersion> version = std::nullopt,
                              cuda::GemmMath math = cuda::GemmMath::fp32);
void conv_transpose2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy,
                                    const Tensor& w, Tensor& dx,
                                    std::optional<cuda::ConvVersion> version = std::nullopt,
                                    cuda::GemmMath math = cuda::GemmMath::fp32);
// dw and db may each be null (a frozen or absent parameter): that gradient is not computed.
void conv_transpose2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                       const Tensor& dy, Tensor* dw, Tensor* db,
                                       std::optional<cuda::ConvVersion> version = std::nullopt,
                                       cuda::GemmMath math = cuda::GemmMath::fp32);

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
// thread count (backward bias needs none).
namespace cpu {
size_t conv2d_forward_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_data_workspace(const Conv2dGeometry& g, int num_threads);
size_t conv2d_backward_filter_workspace(const Conv2dGeometry& g, int num_threads);

void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, float* workspace, int num_threads);
void conv2d_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                          float* workspace, int num_threads);
void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                            float* workspace, int num_threads);
void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, int num_threads);
void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      int num_threads);
void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           int num_threads);
}  // namespace cpu

// CUDA on device pointers, queued on `stream`: no host synchronization, no
// allocation, so a training step can be captured in a CUDA graph. Every version is deterministic
// (no atomics; every sum's order depends on the geometry only). README.md has the ladder and its
// measurements. `workspace` must hold the floats the matching *_workspace function returns.
// Tensors of 2^31 elements or more are not supported (crema::Error).
namespace cuda {
enum class ConvVersion {
  im2col_gemm = 1,   // v1: im2col / col2im over the whole batch, cuda::sgemm, layout reorders
  implicit_gemm,     // v2: one tiled GEMM kernel per pass reading patches straight into shared
                     //     memory; bias fused; filter gradient split over N*P*Q, then summed
  pointwise_gemm,    // v3: pointwise geometries only: forward and backward data as one batched
                     //     plain GEMM per pass (float4 loads, no patch arithmetic); filter as v2
  depthwise_direct,  // v4: depthwise geometries only: a thread per output (forward) or input
                     //     (data) looping over its taps; filter gradient a block per channel
                     //     and taps, split over N*P*Q, summed in split order
  winograd_2x2,      // v5: 3x3 filters, stride 1, no dilation: Winograd F(2x2,3x3), non-fused:
                     //     tile transforms into the workspace, 16 batched GEMMs over the tiles,
                     //     inverse transform; backward data is v5's forward on dy with the
                     //     filter rotated (pad <= 2); filter gradient as F(3x3,2x2)
  winograd_4x4,      // v6: v5 with F(4x4,3x3): 6x6 tiles, 36 GEMMs over 4x fewer tiles
  direct,            // v7: filters up to 16x16, strides up to 4: forward and backward data as
                     //     direct loops, a thread per 4 pixels x 4 or 8 channels (data: one
                     //     launch over the stride's pixel classes); filter gradient as v2
  precomputed_gemm,  // v8: v2 whose loaders read each inner index's offsets from a table built
                     //     once per call in the workspace instead of dividing; filter as v2
  // v9: every pass through the NHWC kernels (conv2d_*_nhwc below): x, dy, w (and dw) transposed
  // into the workspace, the NHWC pass, the result transposed back; every math (FFMA, or mma.sync
  // in tf32 and bf16)
  nhwc_implicit_gemm,
  // v10: stride 1, dilation 1, groups 1, padded maps within 64x64: every pass by the 2-D FFT
  //      (real half spectra of F x F maps, F a power of two, in the workspace), a batched complex
  //      GEMM over the bins, and the inverse FFT with the crop; fp32 only
  fft,
  best = implicit_gemm,  // the general version (every geometry)
};
// The three passes an algorithm may implement (cuDNN's fwd, bwd data and bwd filter algos).
enum class ConvPass { forward, backward_data, backward_filter };
const char* conv_pass_name(ConvPass pass);
// Every version, in ladder order (tests, `crema bench` and the measuring selection walk it).
const std::vector<ConvVersion>& conv_versions();
// Its name as YAML and `crema bench` spell it ("implicit_gemm"), and back (nullopt: unknown).
const char* conv_version_name(ConvVersion version);
std::optional<ConvVersion> conv_version_from_name(const std::string& name);
// Whether `version` handles geometry g (v3: g.pointwise(); v4: g.depthwise(); v5, v6: a 3x3
// filter with stride 1 and dilation 1; v7: R, S <= 16 and strides <= 4; v10: stride 1, dilation
// 1, no groups, H + 2*pad_h and W + 2*pad_w at most 64; v1, v2: all), and whether
// it implements `pass` for g (v5 and v6: backward data needs padding <= 2).
bool supports(ConvVersion version, const Conv2dGeometry& g);
bool supports(ConvVersion version, ConvPass pass, const Conv2dGeometry& g);
// The arithmetic (kernels/gemm/gemm.h: GemmMath) is a per-call argument, fp32 by default. Whether
// `version` computes `pass` in `math`: every pass of every version in fp32; in tf32 and bf16
// (tensor cores, fp32 accumulation) every pass of v1 (its products are cuda::sgemm calls in that
// math; im2col, col2im and the reorders stay fp32), of v2 and v8 (their loaders feed
// convolution_mma.cuh's mma.sync loop), of v3 and of v5 (the batched GEMMs; the transforms stay
// fp32), and v7's filter gradient (v2's). The rest computes in fp32 whatever the math, as cuDNN's
// algorithms without a tensor-core path do: v6 because F(4x4,3x3)'s output transform amplifies
// operand rounding about 12x (tf32 operands give ~3e-3 relative error, over tf32's 2e-3; bf16
// ~2.5e-2), v7's forward and backward data and v4 for want of a tensor-core variant so far, and
// v10 (its complex products are FFMA code of its own).
bool computes_in(ConvVersion version, ConvPass pass, GemmMath math);
// The versions production uses per pass (README.md has the reasons): v4 for depthwise
// geometries, v3 for pointwise ones (forward and data), v6 (Winograd F(4x4,3x3)) for 3x3
// stride-1 geometries with at least 32 input and output channels per group, else v2 -- except
// backward data when a group has fewer than 32 input channels: v1, since v2's implicit GEMM then
// fills few rows of its tiles (C/G rows) while every element it loads pays the patch index
// arithmetic (H200, LeNet conv2 at N = 256: README.md); and v10 (FFT) for every pass of
// ungrouped stride-1 layers with 5x5 or larger filters, at least 64 input and output channels
// and padded maps of 32 x 32 or less (README.md "FFT"). That is fp32's choice; in tf32 and bf16
// (measured on ResNet-18's and the peer benchmark's shapes, README.md "The heuristic in tf32 and
// bf16") 3x3 stride-1 layers run v5 on tensor cores for forward and data from 256 channels a group
// (v6 in fp32 below, and for the filter gradient); other filters with at least 16 channels a
// group run v9 (NHWC, cp.async, tensor cores) forward, and v9 or, on maps of 8x8 and smaller, v1
// for backward data; 1x1 filters and fewer channels run v2 forward on tensor cores.
ConvVersion forward_version(const Conv2dGeometry& g, GemmMath math = GemmMath::fp32);
ConvVersion backward_data_version(const Conv2dGeometry& g, GemmMath math = GemmMath::fp32);
ConvVersion backward_filter_version(const Conv2dGeometry& g, GemmMath math = GemmMath::fp32);

size_t conv2d_forward_workspace(const Conv2dGeometry& g, ConvVersion version = ConvVersion::best);
size_t conv2d_backward_data_workspace(const Conv2dGeometry& g,
                                      ConvVersion version = ConvVersion::best);
size_t conv2d_backward_filter_workspace(const Conv2dGeometry& g, bool with_bias,
                                        ConvVersion version = ConvVersion::best);

// y = conv(x, w) + bias (bias may be null). y is written. A version that does not support g
// throws crema::Error.
void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, float* workspace, gpu::Stream stream,
                    ConvVersion version = ConvVersion::best, GemmMath math = GemmMath::fp32);
// dx is written.
void conv2d_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                          float* workspace, gpu::Stream stream,
                          ConvVersion version = ConvVersion::best, GemmMath math = GemmMath::fp32);
// dw += ..., and db += ... when db is not null (with_bias of the workspace query).
void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, float* workspace, gpu::Stream stream,
                            ConvVersion version = ConvVersion::best,
                            GemmMath math = GemmMath::fp32);
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

// One implicit-GEMM kernel per pass (convolution_nhwc_gemm.cuh): a 128 x 128 or 128 x 64 block
// tile, 32-deep slabs in a 3-stage cp.async pipeline, FFMA in fp32 and mma.sync in tf32 and bf16
// (fp32 accumulation). 16-byte copies where the pass's channel counts (forward C/groups, data
// K/groups, filter both) are multiples of 4 and the tensors 16-byte aligned, else 4-byte copies
// (any C, any groups). Any stride, padding and dilation. Deterministic: the filter gradient splits
// N*P*Q into fixed slices whose partial sums (workspace) are added in slice order, no atomics. The
// workspace queries give floats; the pointers must not alias.
namespace cuda {
size_t conv2d_forward_nhwc_workspace(const Conv2dGeometry& g);
size_t conv2d_backward_data_nhwc_workspace(const Conv2dGeometry& g);
size_t conv2d_backward_filter_nhwc_workspace(const Conv2dGeometry& g);
// y = conv(x, w) + bias (bias may be null); y is written.
void conv2d_forward_nhwc(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, gpu::Stream stream,
                         GemmMath math = GemmMath::fp32);
// dx is written.
void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, gpu::Stream stream,
                               GemmMath math = GemmMath::fp32);
// dw += ..., and db += sum of dy over N, P, Q when db is not null.
void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* db, float* workspace, gpu::Stream stream,
                                 GemmMath math = GemmMath::fp32);
}  // namespace cuda

}  // namespace crema::kernels
