// Convolution on 16-bit NHWC tensors with tensor cores (convolution_tc.h): forward and backward
// data (the filter gradient is convolution_tc_filter_cuda.cu). Each is one implicit GEMM
// (convolution_tc_gemm.cuh) per group g (Cg = C/G, Kg = K/G), the inner index (r, s, channel),
// channel fastest:
//
//   forward  y_g[N*P*Q, Kg]   = patches_g[N*P*Q, R*S*Cg] * w_g[Kg, R*S*Cg]^T, then the epilogue
//   data     dx_g[N*H*W, Cg]  = dys_g[N*H*W, R*S*Kg]     * wt_g[Cg, R*S*Kg]^T
//
// Backward data is the gather form (each dx element sums its own terms) against the filter
// transposed once per call into the workspace, wt_g[c, tap, k] = w[g*Kg + k, r, s, c], so that its
// inner index is contiguous (convolution_tc_transpose_cuda.cu; the wgmma kernels read w itself
// for a 1x1 or a stride-1 filter). At a stride > 1 it runs once per output phase: dx pixel (h, w)
// takes tap (r, s) only where h + pad_h - r*dil_h and w + pad_w - s*dil_w divide by the strides, so
// the rows of one phase (rho_h, rho_w) = ((h + pad_h) % stride_h, (w + pad_w) % stride_w) take
// exactly the taps with r*dil_h % stride_h == rho_h and s*dil_w % stride_w == rho_w, and for them
// dy is read at stride 1: with h = h0 + stride_h i and the phase's taps r = r0 + step_h t
// (step_h = stride_h / gcd(dil_h, stride_h)),
//   p = (h + pad_h - r dil_h) / stride_h = i + (h0 + pad_h - r0 dil_h) / stride_h - t dil_h'
// with dil_h' = dil_h / gcd(dil_h, stride_h): a stride-1 correlation of dy with the phase's
// sub-filter (so no GEMM work on the zeros between outputs; a phase with no taps writes zeros).
// wt orders its taps by phase (each phase's taps contiguous, in (r, s) order; the identity at
// stride 1 and for 1x1 filters), convolution_tc_phase.h has the phases' arithmetic: the wgmma
// kernels' backward data of filters with taps runs the same phases.
//
// On a device of compute capability 9.0 (H100, H200), the 1x1 convolutions and the others on large
// enough images that fit (groups 1, C and K multiples of 8, 16-byte aligned tensors;
// convolution_tc.h has the rest) run forward and backward data on the wgmma + TMA kernels instead
// (convolution_tc_wgmma_sm90a.cu, built for sm_90a alone); everything else, and every GPU before
// Hopper, on the mma.sync kernels of convolution_tc_gemm.cuh. Which family `best` picks for a
// geometry: convolution_tc_choice_cuda.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/convolution/convolution_col2im_nhwc.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/convolution_few_channels_mma.h"
#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_loaders.cuh"
#include "kernels/convolution/convolution_tc_phase.h"
#include "kernels/convolution/convolution_tc_transpose.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {
namespace tc {
namespace {

using implicit_gemm::aligned16;

bool aligned4(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 4 == 0;
}

// y[m, g*Kg + n] = act(patches_g[m, :] . w_g[n, :] + bias + residual), rounded once; STATS: each
// warp's per-column sums of the stored y and y^2 into stats[row][2][K] (row: the warp's row of the
// grid), which channel_stats_kernel adds up.
template <class T, class E, int VEC, bool STATS>
struct ForwardProblem {
  static constexpr bool kKOuter = false, kStats = STATS;
  Params p;
  const uint16_t *x, *w, *residual;
  const float* bias;
  uint16_t* y;
  float* stats;
  int M;
  bool relu, pairs;  // pairs: two neighbouring outputs are one aligned 32-bit word
  __device__ void k_range(int, int& begin, int& end) const { begin = 0, end = p.RS * p.Cg; }
  __device__ PixelLoader<T::BM, VEC, false> make_a(int m0, int z, int k_end) const {
    return PixelLoader<T::BM, VEC, false>(p, x, m0, z, k_end);
  }
  __device__ DenseLoader<T::BN, VEC> make_b(int n0, int z, int k_end) const {
    return DenseLoader<T::BN, VEC>(w + int64_t(z) * p.Kg * p.RS * p.Cg, p.Kg, p.RS * p.Cg, n0,
                                   k_end);
  }
  __device__ float2 store(int z, int m, int n, float v0, float v1) const {
    if (n >= p.Kg) return make_float2(0.0f, 0.0f);
    const bool both = n + 1 < p.Kg;
    const int k = z * p.Kg + n;
    const int64_t at = int64_t(m) * p.K + k;
    float v[2] = {v0, v1};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (e == 1 && !both) break;
      if (bias != nullptr) v[e] += bias[k + e];
      if (residual != nullptr) v[e] += E::widen(residual[at + e]);
      if (relu) v[e] = fmaxf(v[e], 0.0f);
    }
    const uint32_t pair = E::pack(v[0], both ? v[1] : 0.0f);
    if (pairs && both) {
      *reinterpret_cast<uint32_t*>(y + at) = pair;
    } else {
      y[at] = uint16_t(pair & 0xffffu);
      if (both) y[at + 1] = uint16_t(pair >> 16);
    }
    return make_float2(E::widen(uint16_t(pair & 0xffffu)), E::widen(uint16_t(pair >> 16)));
  }
  __device__ void store_stats(int row, int z, int n, float sum, float squares) const {
    if (n >= p.Kg) return;
    float* first = stats + int64_t(row) * 2 * p.K + z * p.Kg + n;
    first[0] = sum, first[p.K] = squares;
  }
};

// dx[pixel(m), g*Cg + n] = dys_g[m, :] . wt_g[n, :], rounded once, for one output phase: p is
// the phase's geometry (rows m = (n, i, j) over its H x W, its taps as R x S at stride 1, pad_h
// and pad_w its dy offsets; data_phase), wt points at its first tap, and row (n, i, j) is dx pixel
// (n, h0 + step_h i, w0 + step_w j) of the whole [N, H, W, C].
template <class T, class E, int VEC>
struct DataProblem {
  static constexpr bool kKOuter = false, kStats = false;
  Params p;
  const uint16_t *dy, *wt;
  uint16_t* dx;
  int M;
  bool pairs;
  int wt_length;                     // the whole filter's R*S*Kg: wt's row length
  int h0, w0, step_h, step_w, H, W;  // where the phase's rows lie in dx
  __device__ void k_range(int, int& begin, int& end) const { begin = 0, end = p.RS * p.Kg; }
  __device__ PixelLoader<T::BM, VEC, true> make_a(int m0, int z, int k_end) const {
    return PixelLoader<T::BM, VEC, true>(p, dy, m0, z, k_end);
  }
  __device__ DenseLoader<T::BN, VEC> make_b(int n0, int z, int k_end) const {
    return DenseLoader<T::BN, VEC>(wt + int64_t(z) * p.Cg * wt_length, p.Cg, wt_length, n0, k_end);
  }
  __device__ float2 store(int z, int m, int n, float v0, float v1) const {
    if (n < p.Cg) {
      int image, rest, i, j;
      p.by_HW.divmod(m, image, rest);
      p.by_W.divmod(rest, i, j);
      const int64_t pixel = (int64_t(image) * H + h0 + step_h * i) * W + w0 + step_w * j;
      const bool both = n + 1 < p.Cg;
      const int64_t at = pixel * p.C + z * p.Cg + n;
      if (pairs && both) {
        *reinterpret_cast<uint32_t*>(dx + at) = E::pack(v0, v1);
      } else {
        dx[at] = round_to<E>(v0);
        if (both) dx[at + 1] = round_to<E>(v1);
      }
    }
    return make_float2(v0, v1);
  }
  __device__ void store_stats(int, int, int, float, float) const {}
};

// The rows of forward's statistics partials: one per warp row of the grid (at most 4 per tile).
int stats_rows(int M) {
  return (M + Wide::BM - 1) / Wide::BM * Narrow::WARPS_M;
}

template <class E, int VEC, bool STATS>
void forward_with(const Params& p, const uint16_t* x, const uint16_t* w, const TcEpilogue& ep,
                  uint16_t* y, float* stats, gpu::Stream stream) {
  const auto* residual = static_cast<const uint16_t*>(ep.residual);
  const bool pairs =
      p.K % 2 == 0 && p.Kg % 2 == 0 && aligned4(y) && (residual == nullptr || aligned4(residual));
  const int M = p.N * p.P * p.Q;
  int rows = 0;
  auto run = [&](auto tile) {
    using T = decltype(tile);
    const ForwardProblem<T, E, VEC, STATS> prob{p, x,     w, residual, ep.bias,
                                                y, stats, M, ep.relu,  pairs};
    launch<T, E>(prob, p.Kg, p.G, stream, "conv2d_tc_forward");
    rows = (M + T::BM - 1) / T::BM * T::WARPS_M;
  };
  p.Kg > Narrow::BN ? run(Wide{}) : run(Narrow{});
  if constexpr (STATS) sum_channel_stats(stats, rows, p.K, ep, stream);
}

// The geometry of phase (rho_h, rho_w) of backward data (see the top of this file), as the
// stride-1 problem DataProblem runs; first_tap: where its taps start in wt's rows.
struct DataPhase {
  Params p;
  PhaseAxis h, w;
  int first_tap;
};

DataPhase data_phase(const Params& full, int rho_h, int rho_w) {
  DataPhase d{full, phase_axis(rho_h, full.H, full.R, full.pad_h, full.stride_h, full.dilation_h),
              phase_axis(rho_w, full.W, full.S, full.pad_w, full.stride_w, full.dilation_w), 0};
  Params& p = d.p;
  p.H = d.h.extent, p.W = d.w.extent, p.R = d.h.taps, p.S = d.w.taps, p.RS = p.R * p.S;
  p.pad_h = d.h.offset, p.pad_w = d.w.offset, p.stride_h = 1, p.stride_w = 1;
  p.dilation_h = d.h.dilation, p.dilation_w = d.w.dilation;
  p.by_HW = FastDivmod(std::max(p.H * p.W, 1)), p.by_W = FastDivmod(std::max(p.W, 1));
  p.by_S = FastDivmod(std::max(p.S, 1));
  p.by_stride_h = FastDivmod(1), p.by_stride_w = FastDivmod(1);
  d.first_tap = phase_first_tap(d.h, d.w, full.S);
  return d;
}

template <class E, int VEC>
void data_with(const Params& full, const uint16_t* dy, const uint16_t* wt, uint16_t* dx,
               gpu::Stream stream) {
  const bool pairs = full.C % 2 == 0 && full.Cg % 2 == 0 && aligned4(dx);
  for (int rho_h = 0; rho_h < full.stride_h; ++rho_h) {
    for (int rho_w = 0; rho_w < full.stride_w; ++rho_w) {
      const DataPhase d = data_phase(full, rho_h, rho_w);
      const Params& p = d.p;
      if (p.H == 0 || p.W == 0) continue;
      auto run = [&](auto tile) {
        using T = decltype(tile);
        const DataProblem<T, E, VEC> prob{p,
                                          dy,
                                          wt + int64_t(d.first_tap) * p.Kg,
                                          dx,
                                          p.N * p.H * p.W,
                                          pairs,
                                          full.RS * full.Kg,
                                          d.h.first,
                                          d.w.first,
                                          full.stride_h,
                                          full.stride_w,
                                          full.H,
                                          full.W};
        launch<T, E>(prob, p.Cg, p.G, stream, "conv2d_tc_backward_data");
      };
      p.Cg > Narrow::BN ? run(Wide{}) : run(Narrow{});
    }
  }
}

template <class E, bool STATS>
void forward_typed(const Params& p, const uint16_t* x, const uint16_t* w, const TcEpilogue& ep,
                   uint16_t* y, float* stats, gpu::Stream stream) {
  if (p.Cg % 8 == 0 && aligned16(x) && aligned16(w)) {
    forward_with<E, 8, STATS>(p, x, w, ep, y, stats, stream);
  } else {
    forward_with<E, 1, STATS>(p, x, w, ep, y, stats, stream);
  }
}

template <class E>
void data_typed(const Params& p, const uint16_t* dy, const uint16_t* wt, uint16_t* dx,
                gpu::Stream stream) {
  if (p.Kg % 8 == 0 && aligned16(dy) && aligned16(wt)) {
    data_with<E, 8>(p, dy, wt, dx, stream);
  } else {
    data_with<E, 1>(p, dy, wt, dx, stream);
  }
}

}  // namespace

// sum[k] = sum over rows of stats[row][0][k], squares[k] of stats[row][1][k]: thread (x, y) of a
// 32 x 8 block adds rows y, y + 8, .. of channel blockIdx.x * 32 + x in order, then row 0 adds the
// 8 partial sums in order (deterministic).
__global__ void channel_stats_kernel(const float* __restrict__ stats, int rows, int K,
                                     float* __restrict__ sum, float* __restrict__ squares) {
  __shared__ float part[2][8][32];
  const int k = blockIdx.x * 32 + threadIdx.x;
  float a = 0.0f, b = 0.0f;
  if (k < K) {
    for (int r = threadIdx.y; r < rows; r += 8) {
      a += stats[int64_t(r) * 2 * K + k];
      b += stats[(int64_t(r) * 2 + 1) * K + k];
    }
  }
  part[0][threadIdx.y][threadIdx.x] = a, part[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || k >= K) return;
  for (int i = 1; i < 8; ++i) a += part[0][i][threadIdx.x], b += part[1][i][threadIdx.x];
  sum[k] = a, squares[k] = b;
}

void sum_channel_stats(const float* stats, int rows, int K, const TcEpilogue& ep,
                       gpu::Stream stream) {
  channel_stats_kernel<<<unsigned((K + 31) / 32), dim3(32, 8), 0, stream>>>(stats, rows, K, ep.sum,
                                                                            ep.sum_squares);
  gpu::check_launch("conv2d_tc_forward (channel statistics)");
}

}  // namespace tc

const char* tc_type_name(TcType type) {
  return type == TcType::bf16 ? "bf16" : "f16";
}

namespace {

size_t round_up_256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The forward's workspace: the channel-sum partials where statistics are fused.
size_t forward_stats_bytes(const Conv2dGeometry& g) {
  int rows = tc::stats_rows(int(g.N * g.P() * g.Q()));
  if (tc::wgmma_forward_fits(g)) {  // the ring kernel's tiles or the halo's, device-independent
    rows = std::max({rows, tc::wgmma_forward_stats_rows(g, tc::WgmmaLaunch::wide),
                     tc::wgmma_forward_stats_rows(g, tc::WgmmaLaunch::halo)});
  }
  return size_t(rows) * 2 * size_t(g.K) * sizeof(float);
}

// Backward data's: the transposed filter.
size_t transposed_filter_bytes(const Conv2dGeometry& g) {
  return round_up_256(size_t(g.K * g.R * g.S * (g.C / g.groups)) * 2);
}

}  // namespace

size_t conv2d_tc_forward_workspace(const Conv2dGeometry& g) {
  if (g.depthwise()) return depthwise_nhwc::forward_workspace(g, true);
  return std::max(forward_stats_bytes(g), grouped_nhwc::forward_workspace(g, true));
}

size_t conv2d_tc_backward_data_workspace(const Conv2dGeometry& g, TcType type) {
  if (g.depthwise()) return 0;  // the depthwise kernel reads w into shared memory itself
  const size_t transposed_filter = transposed_filter_bytes(g);
  // Whatever the device: a plan may be made for another one.
  const bool col2im = type == TcType::bf16 && col2im_nhwc::fits(g, 8);
  const size_t direct = few_channels_nhwc::fits(g) ? few_channels_nhwc::workspace_bytes(g) : 0;
  const auto element = depthwise_nhwc::element_of(type);
  const size_t direct_mma =
      few_channels_mma::fits(g, element) ? few_channels_mma::workspace_bytes(g, element) : 0;
  return std::max(
      {transposed_filter, col2im ? col2im_nhwc::workspace_bf16(g) : 0, direct, direct_mma});
}

void conv2d_tc_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                       const TcEpilogue& epilogue, void* workspace, gpu::Stream stream,
                       TcKernels kernels) {
  using namespace tc;
  const Params p = params_of(g);
  if ((epilogue.sum == nullptr) != (epilogue.sum_squares == nullptr)) {
    throw Error("conv2d_tc_forward: channel statistics need both sum and sum_squares");
  }
  if (epilogue.sum != nullptr && workspace == nullptr) {
    throw Error(
        "conv2d_tc_forward: channel statistics need the workspace (conv2d_tc_forward_workspace)");
  }
  if (g.depthwise()) {  // no GEMM to speak of: the direct kernels (whatever `kernels` asks)
    return depthwise_nhwc::forward(g, depthwise_nhwc::element_of(type), x, w, y, epilogue,
                                   workspace, stream);
  }
  if (conv2d_tc_forward_uses_grouped(g, kernels) &&
      grouped_nhwc::aligned({x, w, y, epilogue.residual})) {
    return grouped_nhwc::forward(g, type, x, w, y, epilogue, workspace, stream);
  }
  if (epilogue.sum == nullptr && aligned4(y) &&
      (epilogue.residual == nullptr || aligned4(epilogue.residual)) &&
      conv2d_tc_forward_uses_stem(g, kernels)) {
    return stem_mma::forward(g, type, x, w, y, epilogue, stream);
  }
  const auto* xs = static_cast<const uint16_t*>(x);
  const auto* ws = static_cast<const uint16_t*>(w);
  auto* ys = static_cast<uint16_t*>(y);
  const bool with_stats = epilogue.sum != nullptr;
  auto* stats = with_stats ? static_cast<float*>(workspace) : nullptr;
  if (aligned16(x) && aligned16(w) && aligned16(y) &&
      (epilogue.residual == nullptr || aligned16(epilogue.residual)) &&
      conv2d_tc_forward_uses_wgmma(g, kernels)) {
    wgmma_forward(g, type, x, w, y, epilogue, stats, stream, tc::wgmma_launch(kernels), true);
    if (with_stats) {
      sum_channel_stats(stats, wgmma_forward_stats_rows(g, tc::wgmma_launch(kernels)), p.K,
                        epilogue, stream);
    }
    return;
  }
  if (type == TcType::bf16) {
    with_stats ? forward_typed<Bf16, true>(p, xs, ws, epilogue, ys, stats, stream)
               : forward_typed<Bf16, false>(p, xs, ws, epilogue, ys, stats, stream);
  } else {
    with_stats ? forward_typed<F16, true>(p, xs, ws, epilogue, ys, stats, stream)
               : forward_typed<F16, false>(p, xs, ws, epilogue, ys, stats, stream);
  }
}

void conv2d_tc_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* w,
                             void* dx, void* workspace, gpu::Stream stream, TcKernels kernels) {
  using namespace tc;
  if (g.depthwise()) {
    return depthwise_nhwc::backward_data(g, depthwise_nhwc::element_of(type), dy, w, dx, stream);
  }
  if (conv2d_tc_backward_data_uses_grouped(g, kernels) && grouped_nhwc::aligned({dy, w, dx})) {
    return grouped_nhwc::backward_data(g, type, dy, w, dx, stream);
  }
  if (conv2d_tc_backward_data_uses_direct_mma(g, type, kernels)) {
    return few_channels_mma::backward_data(g, depthwise_nhwc::element_of(type), dy, w, dx,
                                           workspace, stream);
  }
  if (conv2d_tc_backward_data_uses_direct(g, type, kernels)) {
    return few_channels_nhwc::backward_data(g, depthwise_nhwc::element_of(type), dy, w, dx,
                                            workspace, stream, few_channels_nhwc::Operands::stored);
  }
  if (aligned16(dy) && conv2d_tc_backward_data_uses_col2im(g, type, kernels)) {
    return col2im_nhwc::backward_data_bf16(g, dy, w, dx, workspace, stream);
  }
  const Params p = params_of(g);
  auto* wt = static_cast<uint16_t*>(workspace);  // [G, Cg, R*S (phase order), Kg]
  const bool wgmma =
      aligned16(dy) && aligned16(dx) && conv2d_tc_backward_data_uses_wgmma(g, kernels);
  // A 1x1 or a stride-1 filter on wgmma reads w itself (MN-major): no transposed copy.
  if (wgmma && aligned16(w) && wgmma_backward_data_reads_w(g)) {
    return wgmma_backward_data(g, type, dy, w, true, dx, stream, tc::wgmma_launch(kernels), true);
  }
  transpose_filter_phase_order(g, static_cast<const uint16_t*>(w), wt, stream);
  if (wgmma && aligned16(wt)) {
    return wgmma_backward_data(g, type, dy, wt, false, dx, stream, tc::wgmma_launch(kernels), true);
  }
  const auto* dys = static_cast<const uint16_t*>(dy);
  auto* dxs = static_cast<uint16_t*>(dx);
  if (type == TcType::bf16) {
    data_typed<Bf16>(p, dys, wt, dxs, stream);
  } else {
    data_typed<F16>(p, dys, wt, dxs, stream);
  }
}

}  // namespace crema::kernels::cuda
