// Grouped NHWC convolution with few channels a group (convolution_grouped_nhwc.h): forward and
// backward data, one correlation kernel; the filter gradient is
// convolution_grouped_nhwc_filter_cuda.cu.
//
// The correlation reads `in` [N, H, W, Cin] and writes `out` [N, P, Q, Cout] (Corr, with
// taps_in = CI inputs a group and per_in = CO outputs a group):
//   out[n,p,q,o] = sum over the taps (r, s) and i < CI of f[o][r,s][i] in[n, .., .., g(o) CI + i]
//   forward        in = x, out = y, CI = Cg, CO = Kg, f = w, (row, column) = p sh - ph + r dh, ..
//   data, stride 1 in = dy, out = dx, CI = Kg, CO = Cg, f[c][r,s][k] = w[g Kg + k][R-1-r, S-1-s]
//                  [c mod Cg] (transposed in its group, rotated), padding (R-1) dh - ph
//   data, GATHER   the same f unrotated; row p = (h + ph - r dh) / sh where that divides (and
//                  lies in dy), columns the same: any stride
// A block: tx threads across a slab of output channels (4 each, one group's) x ty strips of QT
// outputs of one row, the blocks striding over the strips (one wave of them a slab: resident()).
// It first copies the slab's filter into shared memory, widened, as [tap][chunk][thread][4]:
// thread t's 4*CI floats of a tap are CI chunks of 4, each read by the warp as consecutive 16-byte
// words (no bank conflicts). Then each thread, filter row by filter row, loads the inputs its
// strip reads (3x3 at horizontal stride 1 or 2: the row's (QT-1)*stride + 3 columns at once, each
// once; other filters tap by tap), the group's CI channels of each as one or a few vector loads
// (neighbouring threads read neighbouring groups: a warp's loads are whole 128-byte lines), and
// for each tap reads its 4*CI weights and does 4*CI FMAs an output.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_grouped_nhwc.cuh"
#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::grouped_nhwc {
namespace {

using depthwise_nhwc::block_stats;
using depthwise_nhwc::Corr;
using depthwise_nhwc::kBlockThreads;
using depthwise_nhwc::store_strip;
using implicit_gemm::FastDivmod;

constexpr int kQT = 4;  // outputs a strip on the tap loop

// Blocks across the strips: each takes every gridDim.x-th group of ty strips, at most one wave of
// them a slab: resident(CI) blocks an SM (the kernel's __launch_bounds__: 3 at 4 inputs a group,
// <= 85 registers; else 2) on an H200's kSms, a function of the geometry alone (the statistics'
// partial rows). H200, 2026-11-29, `crema bench conv-tc --math bf16`, forward / data ms at
// 1,024 blocks, 792, 396, 264 a slab: ResNeXt's 4 x 4 groups at 56 (one slab) 0.0332 / 0.0348,
// 0.0320 / 0.0334, 0.0296 / 0.0300, 0.0302 / 0.0308; 8 x 8 at stride 2 (two slabs) 0.0812 /
// 0.1143, 0.0811 / 0.1049, 0.0646 / 0.0891, 0.0584 / 0.0777. (Each block first copies its slab
// of the filter: with a block a group of strips, that copy was 3/4 of the forward's time.)
constexpr int kSms = 132;
__host__ __device__ constexpr int resident(int CI) {
  return CI == 4 ? 3 : 2;
}

// The slab's filter into shared memory (the layout above), zero past the last channel: thread
// (lane, row) writes lane's float4s, rows taking the (tap, chunk) pairs in turn. transposed
// (data): f[o][tap][i] = w[g(o) CI + i][tap'][o mod CO] (CO = Cg, a power of two; CI = Kg); else
// f[o][tap][i] = w[o][tap'][i]; tap' = the tap rotated by 180 degrees where flipped.
template <class E, int CI>
__device__ void load_filter(const typename E::T* __restrict__ w, const Corr& c, int o_first,
                            bool transposed, float* ws) {
  const int RS = c.R * c.S, lane = threadIdx.x % c.tx, row = threadIdx.x / c.tx;
  const int o_lane = o_first + lane * kOT, CO = c.per_in, co_shift = __ffs(CO) - 1;
  for (int pair = row; pair < RS * CI; pair += c.ty) {
    const int tap = pair / CI, chunk = pair % CI, t = c.flip ? RS - 1 - tap : tap;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int o = o_lane + (chunk * 4 + e) / CI, i = (chunk * 4 + e) % CI;
      const int64_t at = transposed
                             ? ((int64_t(o >> co_shift) * CI + i) * RS + t) * CO + (o & (CO - 1))
                             : (int64_t(o) * RS + t) * CI + i;
      v[e] = o < c.Cout ? E::widen(w[at]) : 0.0f;
    }
    *reinterpret_cast<float4*>(ws + ((tap * CI + chunk) * c.tx + lane) * 4) =
        make_float4(v[0], v[1], v[2], v[3]);
  }
}

// GATHER: the dy row (or column) that tap offset `at` = out + pad - r*dil reads, or -1.
__device__ __forceinline__ int gathered(int at, const FastDivmod& by_stride, int size) {
  if (at < 0) return -1;
  int q, rest;
  by_stride.divmod(at, q, rest);
  return rest == 0 && q < size ? q : -1;
}

// KS > 0: the row walk for S == KS, stride_w == ST, dil_w == 1 (CORR only): the strip's
// (QT-1)*ST + KS input columns of a filter row loaded at once (each read once, not once a tap,
// all in flight together), then the row's taps; KS == 0: the tap loop, any geometry.
template <class E, int CI, bool GATHER, int KS, int ST, int QT>
__global__ void __launch_bounds__(kBlockThreads, resident(CI))
    correlate_kernel(Corr c, FastDivmod by_stride_h, FastDivmod by_stride_w, bool transposed,
                     const typename E::T* __restrict__ in, const typename E::T* __restrict__ w,
                     typename E::T* out, const float* __restrict__ bias,
                     const typename E::T* residual, bool relu, float* __restrict__ stats) {
  using T = typename E::T;
  static_assert(KS == 0 || !GATHER, "the row walk correlates");
  extern __shared__ __align__(16) float smem[];
  const int CH = c.tx * kOT, RS = c.R * c.S, o_first = blockIdx.y * CH;
  load_filter<E, CI>(w, c, o_first, transposed, smem);
  __syncthreads();
  const int lane = threadIdx.x % c.tx, row = threadIdx.x / c.tx, o0 = o_first + lane * kOT;
  const float* wl = smem + lane * 4;
  // A tap's 4*CI weights of this thread.
  auto read_tap = [&](int tap, float(&f)[kOT * CI]) {
    const float* wt = wl + tap * CI * c.tx * 4;
#pragma unroll
    for (int chunk = 0; chunk < CI; ++chunk) {
      const float4 v = *reinterpret_cast<const float4*>(wt + chunk * c.tx * 4);
      f[4 * chunk] = v.x, f[4 * chunk + 1] = v.y, f[4 * chunk + 2] = v.z, f[4 * chunk + 3] = v.w;
    }
  };
  float sum[kOT] = {}, squares[kOT] = {};  // of the strips' stored outputs (the statistics)
  for (int64_t strip = int64_t(blockIdx.x) * c.ty + row; o0 < c.Cout && strip < c.positions;
       strip += int64_t(gridDim.x) * c.ty) {
    const int64_t np = strip / c.strips;
    const int q0 = int(strip - np * c.strips) * QT, p = int(np % c.P), n = int(np / c.P);
    const T* image = in + int64_t(n) * c.H * c.W * c.Cin + (o0 / c.per_in) * CI;
    float acc[QT][kOT] = {};
    for (int r = 0; r < c.R; ++r) {
      const int h = GATHER ? gathered(p + c.pad_h - r * c.dil_h, by_stride_h, c.H)
                           : p * c.stride_h - c.pad_h + r * c.dil_h;
      if (unsigned(h) >= unsigned(c.H)) continue;
      const T* line = image + int64_t(h) * c.W * c.Cin;
      if constexpr (KS > 0) {
        constexpr int J = (QT - 1) * ST + KS;
        const int col0 = q0 * ST - c.pad_w;
        float xs[J][CI];
        load_columns<E, CI, J>(line, col0, c.W, c.Cin, xs);
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          float tap[kOT * CI];
          read_tap(r * KS + s, tap);
#pragma unroll
          for (int qi = 0; qi < QT; ++qi) add_tap<CI>(acc[qi], tap, xs[qi * ST + s]);
        }
      } else {
        for (int s = 0; s < c.S; ++s) {
          float tap[kOT * CI];
          read_tap(r * c.S + s, tap);
#pragma unroll
          for (int qi = 0; qi < QT; ++qi) {
            const int col = GATHER ? gathered(q0 + qi + c.pad_w - s * c.dil_w, by_stride_w, c.W)
                                   : (q0 + qi) * c.stride_w - c.pad_w + s * c.dil_w;
            if (unsigned(col) >= unsigned(c.W)) continue;
            float v[CI];
            load_run<E, CI>(line + int64_t(col) * c.Cin, v);
            add_tap<CI>(acc[qi], tap, v);
          }
        }
      }
    }
    store_strip<E, kOT, QT>(c, acc, n, p, q0, o0, out, bias, residual, relu, sum, squares);
  }
  if (stats == nullptr) return;
  block_stats<kOT>(c, lane, row, o_first, sum, squares, smem + RS * CI * CH, stats);
}

// The correlation of a pass (in [N,H,W,Cin] -> out [N,P,Q,Cout], CI inputs and CO outputs a
// group), with its block (not yet cut into strips).
Corr corr_of(int H, int W, int Cin, int P, int Q, int Cout, int CI, int CO, const Conv2dGeometry& g,
             bool flip) {
  // At most 48 KB of filter a block: tx * 4 * CI * R * S floats; tx a multiple of 8 where it can.
  int most = std::min(32, std::max(1, int(48 * 1024 / (16 * CI * g.R * g.S))));
  if (most > 8) most -= most % 8;
  return depthwise_nhwc::make_corr(H, W, Cin, P, Q, Cout, g, CI, CO, flip,
                                   depthwise_nhwc::block_shape(Cout / kOT, most));
}

// c with its rows cut into strips of QT outputs.
Corr cut(Corr c, int QT) {
  c.strips = (c.Q + QT - 1) / QT;
  c.positions = c.rows * c.strips;
  return c;
}

Corr forward_corr(const Conv2dGeometry& g) {
  return corr_of(int(g.H), int(g.W), int(g.C), int(g.P()), int(g.Q()), int(g.K),
                 int(g.C / g.groups), int(g.K / g.groups), g, false);
}

dim3 grid_of(const Corr& c, const char* what) {
  const int64_t blocks =
      std::min<int64_t>(resident(c.taps_in) * kSms, (c.positions + c.ty - 1) / c.ty);
  const int64_t slabs = (c.Cout / kOT + c.tx - 1) / c.tx;
  if (blocks > INT32_MAX || slabs > 65535) {
    throw Error(std::string(what) + ": " + std::to_string(c.Cout) + " channels of " +
                std::to_string(c.positions) + " strips are too many blocks");
  }
  return dim3(unsigned(blocks), unsigned(slabs));
}

template <class E, int CI, bool GATHER, int KS, int ST, int QT>
int launch(const Corr& uncut, bool transposed, const void* in, const void* w, void* out,
           const TcEpilogue& ep, float* stats, gpu::Stream stream, const char* what) {
  using T = typename E::T;
  const Corr c = cut(uncut, QT);
  const auto kernel = correlate_kernel<E, CI, GATHER, KS, ST, QT>;
  const size_t CH = size_t(c.tx) * kOT;
  const size_t smem =
      (size_t(c.R * c.S) * CI * CH + (stats != nullptr ? 2 * size_t(c.ty) * CH : 0)) * 4;
  if (smem > 48 * 1024) detail::set_shared_memory_limit(kernel, int(smem), what);
  const dim3 grid = grid_of(c, what);
  kernel<<<grid, unsigned(c.tx * c.ty), smem, stream>>>(
      c, FastDivmod(c.stride_h), FastDivmod(c.stride_w), transposed, static_cast<const T*>(in),
      static_cast<const T*>(w), static_cast<T*>(out), ep.bias, static_cast<const T*>(ep.residual),
      ep.relu, stats);
  gpu::check_launch(what);
  return int(grid.x);
}

// The row walk's outputs a strip: the most of 4, 2, 1 whose (QT-1)*ST + 3 input columns of CI
// floats fit 64 registers (CI 4: 4 at stride 1; CI 8: 4 at stride 1, 2 at 2; CI 16: 2, 1), but 2
// for 4 inputs at stride 2 (4 spilled 116 bytes under the 85 registers of resident(4)). (8
// outputs of 4 channels, 120 registers then, ran 10% slower.)
constexpr int walk_outputs(int CI, int ST) {
  return CI == 4 && ST == 2 ? 2 : (3 * ST + 3) * CI <= 64 ? 4 : (ST + 3) * CI <= 64 ? 2 : 1;
}

template <class E, int CI, bool GATHER>
int launch_with(const Corr& c, bool transposed, const void* in, const void* w, void* out,
                const TcEpilogue& ep, float* stats, gpu::Stream stream, const char* what) {
  if constexpr (!GATHER) {
    if (c.S == 3 && c.dil_w == 1 && c.stride_w == 1) {
      return launch<E, CI, false, 3, 1, walk_outputs(CI, 1)>(c, transposed, in, w, out, ep, stats,
                                                             stream, what);
    }
    if (c.S == 3 && c.dil_w == 1 && c.stride_w == 2) {
      return launch<E, CI, false, 3, 2, walk_outputs(CI, 2)>(c, transposed, in, w, out, ep, stats,
                                                             stream, what);
    }
  }
  return launch<E, CI, GATHER, 0, 0, kQT>(c, transposed, in, w, out, ep, stats, stream, what);
}

// Launches the pass; returns its blocks across the strips (the statistics' partial rows).
template <class E, bool GATHER>
int launch_any(const Corr& c, bool transposed, const void* in, const void* w, void* out,
               const TcEpilogue& ep, float* stats, gpu::Stream stream, const char* what) {
  switch (c.taps_in) {
    case 4:
      return launch_with<E, 4, GATHER>(c, transposed, in, w, out, ep, stats, stream, what);
    case 8:
      return launch_with<E, 8, GATHER>(c, transposed, in, w, out, ep, stats, stream, what);
    default:
      return launch_with<E, 16, GATHER>(c, transposed, in, w, out, ep, stats, stream, what);
  }
}

const char* const kForward = "conv2d_forward (grouped, nhwc)";
const char* const kData = "conv2d_backward_data (grouped, nhwc)";

template <class E>
void forward_typed(const Conv2dGeometry& g, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, void* workspace, gpu::Stream stream) {
  float* stats = ep.sum != nullptr ? static_cast<float*>(workspace) : nullptr;
  const int rows =
      launch_any<E, false>(forward_corr(g), false, x, w, y, ep, stats, stream, kForward);
  if (stats != nullptr) tc::sum_channel_stats(stats, rows, int(g.K), ep, stream);
}

template <class E>
void data_typed(const Conv2dGeometry& g, const void* dy, const void* w, void* dx,
                gpu::Stream stream) {
  const int P = int(g.P()), Q = int(g.Q()), Cg = int(g.C / g.groups), Kg = int(g.K / g.groups);
  const TcEpilogue none;
  if (g.stride_h == 1 && g.stride_w == 1) {
    Corr c = corr_of(P, Q, int(g.K), int(g.H), int(g.W), int(g.C), Kg, Cg, g, true);
    c.pad_h = int((g.R - 1) * g.dilation_h - g.pad_h);
    c.pad_w = int((g.S - 1) * g.dilation_w - g.pad_w);
    launch_any<E, false>(c, true, dy, w, dx, none, nullptr, stream, kData);
    return;
  }
  const Corr c = corr_of(P, Q, int(g.K), int(g.H), int(g.W), int(g.C), Kg, Cg, g, false);
  launch_any<E, true>(c, true, dy, w, dx, none, nullptr, stream, kData);
}

}  // namespace

bool fits(const Conv2dGeometry& g) {
  if (g.groups <= 1 || g.depthwise() || g.C % g.groups != 0 || g.K % g.groups != 0) return false;
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  auto few = [](int64_t n) { return n == 4 || n == 8 || n == 16; };
  return few(Cg) && few(Kg) && g.R * g.S * std::max(Cg, Kg) <= 3072;
}

bool aligned(std::initializer_list<const void*> pointers) {
  return std::all_of(pointers.begin(), pointers.end(), [](const void* p) {
    return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0;
  });
}

size_t forward_workspace(const Conv2dGeometry& g, bool with_statistics) {
  if (!with_statistics || !fits(g)) return 0;
  // The most blocks of any of its launches: strips of one output.
  return size_t(grid_of(cut(forward_corr(g), 1), kForward).x) * 2 * size_t(g.K) * sizeof(float);
}

void forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, void* workspace, gpu::Stream stream) {
  implicit_gemm::check_sizes(g);
  if (!fits(g)) throw Error(std::string(kForward) + ": the geometry does not fit (fits())");
  if ((epilogue.sum == nullptr) != (epilogue.sum_squares == nullptr)) {
    throw Error(std::string(kForward) + ": channel statistics need both sum and sum_squares");
  }
  switch (type) {
    case TcType::bf16:
      return forward_typed<depthwise_nhwc::Bf16>(g, x, w, y, epilogue, workspace, stream);
    case TcType::f16:
      return forward_typed<depthwise_nhwc::F16>(g, x, w, y, epilogue, workspace, stream);
  }
}

void backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* w, void* dx,
                   gpu::Stream stream) {
  implicit_gemm::check_sizes(g);
  if (!fits(g)) throw Error(std::string(kData) + ": the geometry does not fit (fits())");
  switch (type) {
    case TcType::bf16:
      return data_typed<depthwise_nhwc::Bf16>(g, dy, w, dx, stream);
    case TcType::f16:
      return data_typed<depthwise_nhwc::F16>(g, dy, w, dx, stream);
  }
}

}  // namespace crema::kernels::cuda::grouped_nhwc
