// NHWC convolution on the GPU: the cuda::conv2d_*_nhwc entry points. Each pass is one implicit
// GEMM (convolution_nhwc_gemm.cuh: cp.async pipeline, FFMA or mma.sync) over loaders that read
// the NHWC tensors (convolution_nhwc_loaders.cuh). Per group g (Cg = C/G, Kg = K/G):
//
//   forward  y_g[N*P*Q, Kg]   = patches_g[N*P*Q, R*S*Cg] * w_g[Kg, R*S*Cg]^T       + bias
//   data     dx_g[N*H*W, Cg]  = dys_g[N*H*W, R*S*Kg]     * wt_g[Cg, R*S*Kg]^T
//   filter   dw_g^T[R*S*Cg, Kg] += patches_g^T[R*S*Cg, N*P*Q] * dy_g[N*P*Q, Kg]
//
// with the inner index (r, s, channel), channel fastest. Forward and data read 16-byte runs of
// channels (cp.async.cg) when the inner channel count (Cg, Kg) is a multiple of 4 and the
// operands are 16-byte aligned, else 4-byte copies. Backward data is the gather form (each dx
// element sums its own terms) against wt_g[c, r, s, k] = w[g*Kg + k, r, s, c], the filter
// transposed once per call into the workspace so that its inner index (r, s, k) is contiguous.
// The filter gradient's inner index is N*P*Q, which is the outer index of both NHWC operands: its
// tiles are k-outer ([BK][rows]), filled with 16-byte runs of 4 channels of one output position
// where Cg and Kg are multiples of 4, else element by element (a warp reading consecutive
// channels). N*P*Q is cut into fixed slices whose partial results [slice, g, R*S*Cg, Kg]
// (workspace) a second kernel adds to dw in slice order: deterministic, no atomics.
//
// In tf32 math on compute capability 9.0, forward and backward data run on the wgmma + TMA kernels
// (convolution_tc_wgmma_sm90a.cu, the 16-bit convolutions' machinery on f32 operands) where they
// fit (conv2d_*_nhwc_uses_wgmma) and the tensors are 16-byte aligned; backward data then
// transposes the filter with its taps in phase order (the wgmma data pass runs by output phase).
// The filter gradient does too (conv2d_backward_filter_nhwc_uses_wgmma: its kernel transposes
// each slab of the MN-major operands into K-major tiles in shared memory, rounding to TF32).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_col2im_nhwc.h"
#include "kernels/convolution/convolution_cuda_internal.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/convolution_few_channels_mma.h"
#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "kernels/convolution/convolution_nhwc_loaders.cuh"
#include "kernels/convolution/convolution_tc_transpose.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {
namespace nhwc {
namespace {

// About two waves of 128 x 128 blocks on an H100 or H200 (132 SMs): the filter gradient's
// slices fill the device without growing the partial sums further.
constexpr int kTargetBlocks = 264;
// A slice of the filter gradient's N*P*Q range covers at least this many slabs.
constexpr int kMinSlabsPerSlice = 8;

Params params_of(const Conv2dGeometry& g) {
  implicit_gemm::check_sizes(g);
  if (g.groups > 65535) {
    throw Error("conv2d NHWC on CUDA: " + std::to_string(g.groups) +
                " groups; at most 65535 are supported");
  }
  Params p;
  p.N = int(g.N), p.C = int(g.C), p.H = int(g.H), p.W = int(g.W), p.K = int(g.K);
  p.R = int(g.R), p.S = int(g.S), p.P = int(g.P()), p.Q = int(g.Q()), p.G = int(g.groups);
  p.Cg = p.C / p.G, p.Kg = p.K / p.G, p.RS = p.R * p.S;
  p.pad_h = int(g.pad_h), p.pad_w = int(g.pad_w);
  p.stride_h = int(g.stride_h), p.stride_w = int(g.stride_w);
  p.dilation_h = int(g.dilation_h), p.dilation_w = int(g.dilation_w);
  p.by_PQ = FastDivmod(p.P * p.Q), p.by_Q = FastDivmod(p.Q), p.by_HW = FastDivmod(p.H * p.W);
  p.by_W = FastDivmod(p.W), p.by_Cg = FastDivmod(p.Cg), p.by_Kg = FastDivmod(p.Kg);
  p.by_S = FastDivmod(p.S);
  p.by_stride_h = FastDivmod(p.stride_h), p.by_stride_w = FastDivmod(p.stride_w);
  return p;
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// y[m, g*Kg + n] = patches_g[m, :] . w_g[n, :] + bias.
template <class T, int VEC>
struct ForwardProblem {
  static constexpr int kBlocksPerSm = VEC == 4 && T::BN <= Narrow::BN ? 2 : 1;
  static constexpr bool kKOuter = false;
  Params p;
  const float *x, *w, *bias;
  float* y;
  int M, N;
  __device__ void k_range(int, int& begin, int& end) const { begin = 0, end = p.RS * p.Cg; }
  __device__ PixelLoader<T::BM, VEC, false> make_a(int m0, int z, int k_end) const {
    return PixelLoader<T::BM, VEC, false>(p, x, m0, z, k_end);
  }
  __device__ DenseLoader<T::BN, VEC> make_b(int n0, int z, int k_end) const {
    return DenseLoader<T::BN, VEC>(w + int64_t(z) * p.Kg * p.RS * p.Cg, p.Kg, p.RS * p.Cg, n0,
                                   k_end);
  }
  __device__ void store(int z, int m, int n, float v) const {
    const int k = z * p.Kg + n;
    y[int64_t(m) * p.K + k] = v + (bias != nullptr ? bias[k] : 0.0f);
  }
};

// dx[m, g*Cg + n] = dys_g[m, :] . wt_g[n, :].
template <class T, int VEC>
struct DataProblem {
  static constexpr int kBlocksPerSm = VEC == 4 && T::BN <= Narrow::BN ? 2 : 1;
  static constexpr bool kKOuter = false;
  Params p;
  const float *dy, *wt;
  float* dx;
  int M, N;
  __device__ void k_range(int, int& begin, int& end) const { begin = 0, end = p.RS * p.Kg; }
  __device__ PixelLoader<T::BM, VEC, true> make_a(int m0, int z, int k_end) const {
    return PixelLoader<T::BM, VEC, true>(p, dy, m0, z, k_end);
  }
  __device__ DenseLoader<T::BN, VEC> make_b(int n0, int z, int k_end) const {
    return DenseLoader<T::BN, VEC>(wt + int64_t(z) * p.Cg * p.RS * p.Kg, p.Cg, p.RS * p.Kg, n0,
                                   k_end);
  }
  __device__ void store(int z, int m, int n, float v) const {
    dx[int64_t(m) * p.C + z * p.Cg + n] = v;
  }
};

// partial[z, m, n] = sum over the slice's npq of patches_g[npq, m] * dy[npq, g*Kg + n], with
// z = slice * G + g. RUNS: 16-byte copies into k-outer tiles (Cg, Kg multiples of 4; aligned
// tensors); else 4-byte copies (any Cg, Kg).
template <class T, bool RUNS>
struct FilterProblem {
  static constexpr int kBlocksPerSm = RUNS || T::BN <= Narrow::BN ? 2 : 1;
  static constexpr bool kKOuter = RUNS;
  using LoaderA = std::conditional_t<RUNS, TapRunLoader<T::BM>, TapLoader<T::BM>>;
  using LoaderB = std::conditional_t<RUNS, OutputRunLoader<T::BN>, OutputChannelLoader<T::BN>>;
  Params p;
  const float *x, *dy;
  float* partial;
  int M, N, slice_length;
  __device__ void k_range(int z, int& begin, int& end) const {
    begin = z / p.G * slice_length;
    end = min(p.N * p.P * p.Q, begin + slice_length);
  }
  __device__ LoaderA make_a(int m0, int z, int k_end) const {
    return LoaderA(p, x, m0, z % p.G, k_end);
  }
  __device__ LoaderB make_b(int n0, int z, int k_end) const {
    return LoaderB(p, dy, n0, z % p.G, k_end);
  }
  __device__ void store(int z, int m, int n, float v) const {
    partial[(int64_t(z) * M + m) * N + n] = v;
  }
};

template <class T, GemmMath MATH, class Problem>
void launch_in(const Problem& prob, dim3 grid, gpu::Stream stream, const char* what) {
  const auto kernel = gemm_kernel<T, MATH, Problem>;
  detail::set_shared_memory_limit(kernel, T::SMEM_BYTES, what);
  kernel<<<grid, kThreads, T::SMEM_BYTES, stream>>>(prob);
  gpu::check_launch(what);
}

// One block per (BM rows, BN columns, z) of the GEMM.
template <class T, class Problem>
void launch(const Problem& prob, int z, GemmMath math, gpu::Stream stream, const char* what) {
  const dim3 grid(unsigned((prob.M + T::BM - 1) / T::BM), unsigned((prob.N + T::BN - 1) / T::BN),
                  unsigned(z));
  switch (math) {
    case GemmMath::fp32:
      return launch_in<T, GemmMath::fp32>(prob, grid, stream, what);
    case GemmMath::tf32:
      return launch_in<T, GemmMath::tf32>(prob, grid, stream, what);
    case GemmMath::bf16:
      return launch_in<T, GemmMath::bf16>(prob, grid, stream, what);
  }
}

// The block tile for a GEMM of `columns` columns (output channels; backward data: input ones).
enum class Width { thin, narrow, wide };
Width width_for(int64_t columns) {
  return columns > Narrow::BN ? Width::wide : columns > Thin::BN ? Width::narrow : Width::thin;
}

template <class T, int VEC>
void forward_with(const Params& p, const float* x, const float* w, const float* bias, float* y,
                  GemmMath math, gpu::Stream stream) {
  const ForwardProblem<T, VEC> prob{p, x, w, bias, y, p.N * p.P * p.Q, p.Kg};
  launch<T>(prob, p.G, math, stream, "conv2d_forward_nhwc");
}

template <class T, int VEC>
void data_with(const Params& p, const float* dy, const float* wt, float* dx, GemmMath math,
               gpu::Stream stream) {
  const DataProblem<T, VEC> prob{p, dy, wt, dx, p.N * p.H * p.W, p.Cg};
  launch<T>(prob, p.G, math, stream, "conv2d_backward_data_nhwc");
}

// Whether the filter gradient takes the 16-byte copies (k-outer tiles; no thin tile there).
bool filter_runs(const Conv2dGeometry& g) {
  return (g.C / g.groups) % 4 == 0 && (g.K / g.groups) % 4 == 0;
}

Width filter_width(const Conv2dGeometry& g) {
  const Width width = width_for(g.K / g.groups);
  return filter_runs(g) && width == Width::thin ? Width::narrow : width;
}

// The filter gradient's cut of N*P*Q: `length` inner indices (a multiple of kBK) per slice.
struct Slices {
  int count, length;
};
Slices filter_slices(const Conv2dGeometry& g) {
  const int64_t NPQ = g.N * g.P() * g.Q(), M = g.R * g.S * (g.C / g.groups), N = g.K / g.groups;
  const Width width = filter_width(g);
  const int64_t bn = width == Width::wide     ? Wide::BN
                     : width == Width::narrow ? Narrow::BN
                                              : Thin::BN;
  const int64_t blocks = (M + Wide::BM - 1) / Wide::BM * ((N + bn - 1) / bn) * g.groups;
  const int64_t most =
      std::max<int64_t>(1, std::min((NPQ + kMinSlabsPerSlice * kBK - 1) / (kMinSlabsPerSlice * kBK),
                                    int64_t(65535) / g.groups));
  const int64_t wanted = std::clamp<int64_t>((kTargetBlocks + blocks - 1) / blocks, 1, most);
  const int64_t length = ((NPQ + wanted - 1) / wanted + kBK - 1) / kBK * kBK;
  return {int((NPQ + length - 1) / length), int(length)};
}

template <class T, bool RUNS>
void filter_with(const Params& p, const Slices& slices, const float* x, const float* dy,
                 float* partial, GemmMath math, gpu::Stream stream) {
  const FilterProblem<T, RUNS> prob{p, x, dy, partial, p.RS * p.Cg, p.Kg, slices.length};
  launch<T>(prob, slices.count * p.G, math, stream, "conv2d_backward_filter_nhwc");
}

}  // namespace
}  // namespace nhwc

size_t conv2d_forward_nhwc_workspace(const Conv2dGeometry&) {
  return 0;
}

size_t conv2d_backward_data_nhwc_workspace(const Conv2dGeometry& g) {
  if (g.depthwise()) return 0;  // the depthwise kernel reads w into shared memory itself
  const size_t transposed_filter = size_t(g.K * g.R * g.S * (g.C / g.groups));
  const size_t col2im_bytes =
      col2im_nhwc::fits(g, 4) ? col2im_nhwc::workspace_f32(g, GemmMath::tf32) : 0;
  const size_t direct = few_channels_nhwc::fits(g) ? few_channels_nhwc::workspace_bytes(g) : 0;
  const size_t direct_mma =
      few_channels_mma::fits(g, few_channels_mma::Element::f32)
          ? few_channels_mma::workspace_bytes(g, few_channels_mma::Element::f32)
          : 0;
  return std::max(
      {transposed_filter, (col2im_bytes + 3) / 4, (direct + 3) / 4, (direct_mma + 3) / 4});
}

size_t conv2d_backward_filter_nhwc_workspace(const Conv2dGeometry& g) {
  if (g.depthwise()) {
    return (depthwise_nhwc::backward_filter_workspace(g) + sizeof(float) - 1) / sizeof(float);
  }
  const size_t slices =
      size_t(nhwc::filter_slices(g).count) * size_t(g.K * g.R * g.S * (g.C / g.groups));
  // The wgmma kernel's groups' partials (tf32 on Hopper): host-side plan, any device.
  const size_t wgmma = tc::wgmma_backward_filter_fits(g, 4)
                           ? (tc::wgmma_backward_filter_workspace(g, true) + 3) / 4
                           : 0;
  return std::max(slices, wgmma);
}

// f32 operands in 16-byte units: channel counts multiples of 4.
bool conv2d_forward_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math, TcKernels kernels) {
  return math == GemmMath::tf32 && wgmma_allowed(kernels) && tc::wgmma_forward_fits(g, 4) &&
         detail::device_is_sm90();
}

// tf32 only: fp32 math keeps the exact FFMA kernels.
bool conv2d_backward_data_nhwc_uses_col2im(const Conv2dGeometry& g, GemmMath math,
                                           TcKernels kernels) {
  const bool allowed =
      kernels == TcKernels::col2im ||
      (kernels == TcKernels::best && !conv2d_backward_data_nhwc_uses_direct(g, math) &&
       !conv2d_backward_data_nhwc_uses_direct_mma(g, math));
  return math == GemmMath::tf32 && allowed && col2im_nhwc::fits(g, 4);
}

// Either math: the direct kernel rounds the operands as the math says (tf32, bf16) and sums
// their exact products in fp32, as the mma.sync kernels do. `best`: as for 16-bit tensors
// (conv2d_tc_backward_data_uses_direct) with 4-float vectors, col2im running in tf32 only.
bool conv2d_backward_data_nhwc_uses_direct(const Conv2dGeometry& g, GemmMath math,
                                           TcKernels kernels) {
  const bool col2im = math == GemmMath::tf32 && col2im_nhwc::fits(g, 4);
  const bool allowed = kernels == TcKernels::direct ||
                       (kernels == TcKernels::best && few_channels_direct_pays(g, col2im, 4) &&
                        !conv2d_backward_data_nhwc_uses_direct_mma(g, math));
  return allowed && !g.depthwise() && few_channels_nhwc::fits(g);
}

// tf32 only (fp32 math keeps exact products, bf16 math the direct kernel's rounding).
bool conv2d_backward_data_nhwc_uses_direct_mma(const Conv2dGeometry& g, GemmMath math,
                                               TcKernels kernels) {
  const bool allowed = kernels == TcKernels::direct_mma ||
                       (kernels == TcKernels::best && few_channels_mma_pays(g, 4));
  return math == GemmMath::tf32 && allowed && !g.depthwise() &&
         few_channels_mma::fits(g, few_channels_mma::Element::f32);
}

bool conv2d_backward_data_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math,
                                          TcKernels kernels) {
  // As for 16-bit tensors (tf32, same call: 32,8,56,56 -> 32 3x3 halo 0.040 ms, mma.sync 0.035;
  // 128,8,28,28 -> 16 5x5 0.069 against 0.044).
  if (kernels == TcKernels::best && !(g.R == 1 && g.S == 1) && g.C / g.groups <= 8) return false;
  return math == GemmMath::tf32 && wgmma_allowed(kernels) && tc::wgmma_backward_data_fits(g, 4) &&
         detail::device_is_sm90();
}

// tf32 only (fp32 math keeps the exact FFMA kernels). `best`: where the 16-bit rule takes wgmma
// (wgmma_backward_filter_pays), which session 22's tf32 timings follow too (H200, 2026-11-28,
// call 1, ms wgmma / mma.sync: 64@56 3x3 paired 0.196 / 0.281, 128@28 0.130 / 0.206, 512@14 0.551
// / 0.788, 64 -> 128 3x3 s2 0.075 / 0.101, 1x1 2048 -> 512 at 7 0.056 / 0.105, 96 -> 24 1x1 at 56
// 0.020 / 0.029; but 32 -> 64 3x3 at 56 0.318 / 0.141, 16 -> 32 5x5 0.217 / 0.053, 4 -> 64 3x3
// 0.316 / 0.060: a tile mostly empty).
bool conv2d_backward_filter_nhwc_uses_wgmma(const Conv2dGeometry& g, GemmMath math,
                                            TcKernels kernels) {
  if (kernels == TcKernels::best && !tc::wgmma_backward_filter_pays(g)) return false;
  return math == GemmMath::tf32 && wgmma_allowed(kernels) && !g.depthwise() &&
         tc::wgmma_backward_filter_fits(g, 4) && detail::device_is_sm90();
}

void conv2d_forward_nhwc(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float*, gpu::Stream stream, GemmMath math, TcKernels kernels) {
  using namespace nhwc;
  if (g.depthwise()) {  // no GEMM: the direct kernel, in fp32 whatever the math
    TcEpilogue epilogue;
    epilogue.bias = bias;
    return depthwise_nhwc::forward(g, depthwise_nhwc::Element::f32, x, w, y, epilogue, nullptr,
                                   stream);
  }
  const Params p = params_of(g);
  if (aligned16(x) && aligned16(w) && aligned16(y) &&
      conv2d_forward_nhwc_uses_wgmma(g, math, kernels)) {
    TcEpilogue epilogue;
    epilogue.bias = bias;
    return tc::wgmma_forward_f32(g, x, w, y, epilogue, stream, tc::wgmma_launch(kernels));
  }
  const bool vec = p.Cg % 4 == 0 && aligned16(x) && aligned16(w);
  switch (width_for(p.Kg)) {
    case Width::wide:
      return vec ? forward_with<Wide, 4>(p, x, w, bias, y, math, stream)
                 : forward_with<Wide, 1>(p, x, w, bias, y, math, stream);
    case Width::narrow:
      return vec ? forward_with<Narrow, 4>(p, x, w, bias, y, math, stream)
                 : forward_with<Narrow, 1>(p, x, w, bias, y, math, stream);
    case Width::thin:
      return vec ? forward_with<Thin, 4>(p, x, w, bias, y, math, stream)
                 : forward_with<Thin, 1>(p, x, w, bias, y, math, stream);
  }
}

void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, gpu::Stream stream, GemmMath math,
                               TcKernels kernels) {
  using namespace nhwc;
  if (g.depthwise()) {
    return depthwise_nhwc::backward_data(g, depthwise_nhwc::Element::f32, dy, w, dx, stream);
  }
  if (conv2d_backward_data_nhwc_uses_direct_mma(g, math, kernels)) {
    return few_channels_mma::backward_data(g, few_channels_mma::Element::f32, dy, w, dx, workspace,
                                           stream);
  }
  if (conv2d_backward_data_nhwc_uses_direct(g, math, kernels)) {
    const auto operands = math == GemmMath::tf32   ? few_channels_nhwc::Operands::tf32
                          : math == GemmMath::bf16 ? few_channels_nhwc::Operands::bf16
                                                   : few_channels_nhwc::Operands::stored;
    return few_channels_nhwc::backward_data(g, few_channels_nhwc::Element::f32, dy, w, dx,
                                            workspace, stream, operands);
  }
  if (conv2d_backward_data_nhwc_uses_col2im(g, math, kernels)) {
    return col2im_nhwc::backward_data_f32(g, dy, w, dx, workspace, stream, math);
  }
  const Params p = params_of(g);
  float* wt = workspace;  // [G, Cg, R, S, Kg]; the wgmma path: [C, R*S in phase order, K]
  if (aligned16(dy) && aligned16(wt) && aligned16(dx) &&
      conv2d_backward_data_nhwc_uses_wgmma(g, math, kernels)) {
    tc::transpose_filter_phase_order(g, w, wt, stream);
    return tc::wgmma_backward_data_f32(g, dy, wt, dx, stream, tc::wgmma_launch(kernels));
  }
  tc::transpose_filter_groups(g, w, wt, stream);
  const bool vec = p.Kg % 4 == 0 && aligned16(dy) && aligned16(wt);
  switch (width_for(p.Cg)) {
    case Width::wide:
      return vec ? data_with<Wide, 4>(p, dy, wt, dx, math, stream)
                 : data_with<Wide, 1>(p, dy, wt, dx, math, stream);
    case Width::narrow:
      return vec ? data_with<Narrow, 4>(p, dy, wt, dx, math, stream)
                 : data_with<Narrow, 1>(p, dy, wt, dx, math, stream);
    case Width::thin:
      return vec ? data_with<Thin, 4>(p, dy, wt, dx, math, stream)
                 : data_with<Thin, 1>(p, dy, wt, dx, math, stream);
  }
}

void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* db, float* workspace, gpu::Stream stream,
                                 GemmMath math, TcKernels kernels) {
  using namespace nhwc;
  if (g.depthwise()) {
    depthwise_nhwc::backward_filter(g, depthwise_nhwc::Element::f32, x, dy, dw, workspace, stream);
    // dy [N*P*Q, K] is an NCHW-style [N', C, 1] tensor with N' = N*P*Q.
    if (db != nullptr) channel_bias_gradient(g.N * g.P() * g.Q(), g.K, 1, dy, db, stream);
    return;
  }
  if (aligned16(x) && aligned16(dy) && conv2d_backward_filter_nhwc_uses_wgmma(g, math, kernels)) {
    tc::wgmma_backward_filter_f32(g, x, dy, dw, workspace, stream);
    if (db != nullptr) channel_bias_gradient(g.N * g.P() * g.Q(), g.K, 1, dy, db, stream);
    return;
  }
  const Params p = params_of(g);
  const Slices slices = filter_slices(g);
  if (filter_runs(g) && aligned16(x) && aligned16(dy)) {
    if (filter_width(g) == Width::wide) {
      filter_with<Wide, true>(p, slices, x, dy, workspace, math, stream);
    } else {
      filter_with<Narrow, true>(p, slices, x, dy, workspace, math, stream);
    }
  } else {
    switch (filter_width(g)) {
      case Width::wide:
        filter_with<Wide, false>(p, slices, x, dy, workspace, math, stream);
        break;
      case Width::narrow:
        filter_with<Narrow, false>(p, slices, x, dy, workspace, math, stream);
        break;
      case Width::thin:
        filter_with<Thin, false>(p, slices, x, dy, workspace, math, stream);
        break;
    }
  }
  tc::sum_filter_slices(workspace, slices.count, p.G, p.Kg, p.RS, p.Cg, p.Cg, dw, stream);
  // dy [N*P*Q, K] is an NCHW-style [N', C, 1] tensor with N' = N*P*Q.
  if (db != nullptr) channel_bias_gradient(int64_t(p.N) * p.P * p.Q, p.K, 1, dy, db, stream);
}

}  // namespace crema::kernels::cuda
