// Depthwise NHWC convolution (convolution_depthwise_nhwc.h): forward and backward data. The filter
// gradient is convolution_depthwise_nhwc_filter_cuda.cu.
//
// Both passes are one kernel shape, a correlation of a read tensor `in` [N, H, W, Cin] into a
// written one `out` [N, P, Q, Cout]: out[n,p,q,o] = sum over m < taps_in and the taps (r, s) of
// f[o*taps_in + m, r, s] in[n, p*sh - ph + r*dh, q*sw - pw + s*dw, (o*taps_in + m) / per_in].
//   forward                 in = x, out = y, taps_in = 1, per_in = M, f = w
//   data at stride 1        in = dy, out = dx, taps_in = M, per_in = 1, f = w rotated by 180
//                           degrees, padding (R-1)*dh - ph (negative where ph is larger: fine)
// Backward data at a larger stride is the gather form (gather_kernel): dx[n,h,w,c] sums the taps
// (r, s) for which h + ph - r*dh and w + pw - s*dw divide by the strides (and land inside dy).
//
// A block: a slab of output channels (tx threads of V channels) x ty strips of QT consecutive
// outputs of one row (consecutive strips along the row, then the next row). It first reads the
// slab's taps into shared memory, transposed to [m][tap][channel] and widened to fp32, so each
// thread reads its V channels of a tap as one or two float4s. For the common filters (S = 3, 5, 7,
// horizontal stride 1 or 2, no horizontal dilation; 16-byte vectors) a thread walks each input
// row once across its strip -- (QT-1)*sw + S vectors for QT outputs instead of QT*S -- with the
// row's taps in registers; the other geometries loop over the taps. x rows shared by the strips
// above and below come from L1/L2: DRAM reads each input element about once.
//
// That is v1; v2 and v3, the halo tile, are convolution_depthwise_nhwc_tile_cuda.cu (the versions:
// convolution_depthwise_nhwc.h; which runs: convolution_depthwise_nhwc_versions.cpp).
//
// The forward's epilogue: + bias (fp32), + residual (the tensor's type), ReLU, one rounding at the
// store; and, when asked, each block's per-channel sums of the stored y and y^2 (its strips added
// in row order) into the workspace [block][2][K], then channel_stats_kernel adds the blocks in
// order: deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

using implicit_gemm::FastDivmod;

// c with its rows cut into strips of QT outputs.
Corr cut(Corr c, int QT) {
  c.strips = (c.Q + QT - 1) / QT;
  c.positions = c.rows * c.strips;
  return c;
}

// KS > 0: the row walk for S == KS, stride_w == ST, dil_w == 1 (V > 1, taps_in == per_in == 1);
// KS == 0: any geometry.
template <class E, int V, int KS, int ST, int QT>
__global__ void __launch_bounds__(kBlockThreads)
    correlate_kernel(Corr c, const typename E::T* __restrict__ in,
                     const typename E::T* __restrict__ w, typename E::T* out,
                     const float* __restrict__ bias, const typename E::T* residual, bool relu,
                     float* __restrict__ stats) {
  using T = typename E::T;
  extern __shared__ __align__(16) float smem[];
  const int CH = c.tx * V, RS = c.R * c.S, o_first = blockIdx.y * CH;
  float* ws = smem;
  load_taps<E>(w, o_first, CH, c.Cout, c.taps_in, RS, c.flip, ws);
  __syncthreads();
  const int lane = threadIdx.x % c.tx, row = threadIdx.x / c.tx;
  const int64_t strip = int64_t(blockIdx.x) * c.ty + row;
  const int o0 = o_first + lane * V;
  const bool active = strip < c.positions && o0 < c.Cout;
  int n = 0, p = 0, q0 = 0;
  if (active) {
    const int64_t np = strip / c.strips;
    q0 = int(strip - np * c.strips) * QT, p = int(np % c.P), n = int(np / c.P);
  }
  float acc[QT][V] = {};
  if (active) {
    const T* image = in + int64_t(n) * c.H * c.W * c.Cin;
    for (int m = 0; m < c.taps_in; ++m) {
      const int cin = (o0 * c.taps_in + m) / c.per_in;  // V > 1: o0 itself
      const float* wm = ws + m * RS * CH + lane * V;
      for (int r = 0; r < c.R; ++r) {
        const int h = p * c.stride_h - c.pad_h + r * c.dil_h;
        if (unsigned(h) >= unsigned(c.H)) continue;
        const T* line = image + int64_t(h) * c.W * c.Cin + cin;
        const float* wr = wm + r * c.S * CH;
        if constexpr (KS > 0) {
          float taps[KS][V];
#pragma unroll
          for (int s = 0; s < KS; ++s) read_shared<V>(wr + s * CH, taps[s]);
          const int col0 = q0 * ST - c.pad_w;
#pragma unroll
          for (int j = 0; j < (QT - 1) * ST + KS; ++j) {
            const int col = col0 + j;
            if (unsigned(col) >= unsigned(c.W)) continue;
            float xv[V];
            load_channels<E, V>(line + int64_t(col) * c.Cin, xv);
#pragma unroll
            for (int qi = 0; qi < QT; ++qi) {
              const int s = j - qi * ST;
              if (s >= 0 && s < KS) fma_channels<V>(acc[qi], taps[s], xv);
            }
          }
        } else {
          for (int s = 0; s < c.S; ++s) {
            float tap[V];
            read_shared<V>(wr + s * CH, tap);
#pragma unroll
            for (int qi = 0; qi < QT; ++qi) {
              const int col = (q0 + qi) * c.stride_w - c.pad_w + s * c.dil_w;
              if (unsigned(col) >= unsigned(c.W)) continue;
              float xv[V];
              load_channels<E, V>(line + int64_t(col) * c.Cin, xv);
              fma_channels<V>(acc[qi], tap, xv);
            }
          }
        }
      }
    }
  }
  // The epilogue, and the block's sums of what was stored (its strips in row order).
  float sum[V] = {}, squares[V] = {};
  if (active) {
    store_strip<E, V, QT>(c, acc, n, p, q0, o0, out, bias, residual, relu, sum, squares);
  }
  if (stats == nullptr) return;
  block_stats<V>(c, lane, row, o_first, sum, squares, smem + ((c.taps_in * RS * CH + 3) & ~3),
                 stats);
}

// Backward data by gathering (any stride): dx[n, h, w0 + qi, c..] over QT columns of one row.
template <class E, int V, int QT>
__global__ void __launch_bounds__(kBlockThreads)
    gather_kernel(Corr c, FastDivmod by_stride_h, FastDivmod by_stride_w,
                  const typename E::T* __restrict__ dy, const typename E::T* __restrict__ w,
                  typename E::T* __restrict__ dx) {
  // Here c describes the convolution: in = dy [N, P, Q, K], out = dx [N, H, W, C] with
  // (H, W, Cin) = dy's (P, Q, K) and (P, Q, Cout) = dx's (H, W, C); taps_in = M.
  using T = typename E::T;
  extern __shared__ __align__(16) float smem[];
  const int CH = c.tx * V, RS = c.R * c.S, c_first = blockIdx.y * CH;
  load_taps<E>(w, c_first, CH, c.Cout, c.taps_in, RS, false, smem);
  __syncthreads();
  const int lane = threadIdx.x % c.tx, row = threadIdx.x / c.tx;
  const int64_t strip = int64_t(blockIdx.x) * c.ty + row;
  const int c0 = c_first + lane * V;
  if (strip >= c.positions || c0 >= c.Cout) return;
  const int64_t nh = strip / c.strips;
  const int w0 = int(strip - nh * c.strips) * QT, h = int(nh % c.P), n = int(nh / c.P);
  const T* image = dy + int64_t(n) * c.H * c.W * c.Cin;
  float acc[QT][V] = {};
  for (int m = 0; m < c.taps_in; ++m) {
    const int k = c0 * c.taps_in + m;  // V > 1: c0 itself
    const float* wm = smem + m * RS * CH + lane * V;
    for (int r = 0; r < c.R; ++r) {
      const int hp = h + c.pad_h - r * c.dil_h;  // = out_p * stride_h when tap r reads row h
      if (hp < 0) break;                         // and smaller still for larger r
      int out_p, rest;
      by_stride_h.divmod(hp, out_p, rest);
      if (rest != 0 || out_p >= c.H) continue;
      const T* line = image + int64_t(out_p) * c.W * c.Cin + k;
      for (int s = 0; s < c.S; ++s) {
        float tap[V];
        read_shared<V>(wm + (r * c.S + s) * CH, tap);
#pragma unroll
        for (int qi = 0; qi < QT; ++qi) {
          const int wq = w0 + qi + c.pad_w - s * c.dil_w;
          if (wq < 0) continue;
          int out_q, rest_w;
          by_stride_w.divmod(wq, out_q, rest_w);
          if (rest_w != 0 || out_q >= c.W) continue;
          float g[V];
          load_channels<E, V>(line + int64_t(out_q) * c.Cin, g);
          fma_channels<V>(acc[qi], tap, g);
        }
      }
    }
  }
  const int64_t first = ((int64_t(n) * c.P + h) * c.Q) * c.Cout + c0;
#pragma unroll
  for (int qi = 0; qi < QT; ++qi) {
    if (w0 + qi >= c.Q) break;
    store_channels<E, V>(dx + first + int64_t(w0 + qi) * c.Cout, acc[qi]);
  }
}

// The correlation of a pass, V channels a thread (not yet cut into strips).
Corr corr_of(int H, int W, int Cin, int P, int Q, int Cout, const Conv2dGeometry& g, int V,
             int taps_in, int per_in, bool flip) {
  return make_corr(H, W, Cin, P, Q, Cout, g, taps_in, per_in, flip,
                   block_shape(Cout / V, V > 1 ? 8 : 32));
}

dim3 grid_of(const Corr& c, int V, const char* what) {
  const int64_t blocks = (c.positions + c.ty - 1) / c.ty;
  const int64_t slabs = (c.Cout / V + c.tx - 1) / c.tx;
  if (blocks > INT32_MAX || slabs > 65535) {
    throw Error(std::string(what) + " (depthwise, nhwc): " + std::to_string(c.Cout) +
                " channels of " + std::to_string(c.positions) + " strips are too many blocks");
  }
  return dim3(unsigned(blocks), unsigned(slabs));
}

// Shared memory of a block: the slab's taps, then (statistics) the block's sums.
size_t shared_bytes(const Corr& c, int V, bool with_stats) {
  const size_t CH = size_t(c.tx) * V, taps = (size_t(c.taps_in) * c.R * c.S * CH + 3) & ~size_t(3);
  return (taps + (with_stats ? 2 * size_t(c.ty) * CH : 0)) * sizeof(float);
}

template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes, const char* what) {
  if (bytes > 48 * 1024) detail::set_shared_memory_limit(kernel, int(bytes), what);
}

// QT: outputs a strip on the row walk (registers: QT*V sums, S*V taps), and on the tap loop.
constexpr int kWalkQT = 4, kLoopQT = 2;

// Whether the correlation takes the row walk: 16-byte vectors, S = 3, 5 or 7, horizontal stride
// 1 or 2, no horizontal dilation.
bool walks(const Corr& c, int V) {
  return V > 1 && c.dil_w == 1 && (c.stride_w == 1 || c.stride_w == 2) &&
         (c.S == 3 || c.S == 5 || c.S == 7);
}

template <class E, int V, int KS, int ST>
void correlate(const Corr& uncut, const void* in, const void* w, void* out, const TcEpilogue& ep,
               float* stats, gpu::Stream stream, const char* what) {
  using T = typename E::T;
  constexpr int QT = KS > 0 ? kWalkQT : kLoopQT;
  const Corr c = cut(uncut, QT);
  const auto kernel = correlate_kernel<E, V, KS, ST, QT>;
  const size_t smem = shared_bytes(c, V, stats != nullptr);
  allow_shared(kernel, smem, what);
  kernel<<<grid_of(c, V, what), unsigned(c.tx * c.ty), smem, stream>>>(
      c, static_cast<const T*>(in), static_cast<const T*>(w), static_cast<T*>(out), ep.bias,
      static_cast<const T*>(ep.residual), ep.relu, stats);
  gpu::check_launch(what);
}

// Picks the row walk where the geometry has one (V > 1 only), else the tap loop.
template <class E, int V>
void correlate_any(const Corr& c, const void* in, const void* w, void* out, const TcEpilogue& ep,
                   float* stats, gpu::Stream stream, const char* what) {
  if constexpr (V > 1) {
    if (walks(c, V)) {
      const bool one = c.stride_w == 1;
      switch (c.S) {
        case 3:
          return one ? correlate<E, V, 3, 1>(c, in, w, out, ep, stats, stream, what)
                     : correlate<E, V, 3, 2>(c, in, w, out, ep, stats, stream, what);
        case 5:
          return one ? correlate<E, V, 5, 1>(c, in, w, out, ep, stats, stream, what)
                     : correlate<E, V, 5, 2>(c, in, w, out, ep, stats, stream, what);
        default:
          return one ? correlate<E, V, 7, 1>(c, in, w, out, ep, stats, stream, what)
                     : correlate<E, V, 7, 2>(c, in, w, out, ep, stats, stream, what);
      }
    }
  }
  correlate<E, V, 0, 0>(c, in, w, out, ep, stats, stream, what);
}

const char* const kForward = "conv2d_forward (depthwise, nhwc)";
const char* const kData = "conv2d_backward_data (depthwise, nhwc)";

Corr forward_corr(const Conv2dGeometry& g, int V) {
  return corr_of(int(g.H), int(g.W), int(g.C), int(g.P()), int(g.Q()), int(g.K), g, V, 1,
                 int(g.K / g.C), false);
}

// Blocks of the forward's grid (rows of the statistics' partials).
int64_t blocks_of(const Corr& c, int V) {
  const Corr strips = cut(c, walks(c, V) ? kWalkQT : kLoopQT);
  return (strips.positions + c.ty - 1) / c.ty;
}

// Whether the forward takes 16-byte vectors: one filter a channel, whole vectors, aligned.
bool forward_vectors(const Conv2dGeometry& g, int vec, const void* x, const void* y,
                     const void* residual) {
  return g.K == g.C && g.C % vec == 0 && aligned16(x) && aligned16(y) &&
         (residual == nullptr || aligned16(residual));
}

// The forward's blocks on the largest of its paths (which one runs depends on the version and
// the pointers).
int64_t forward_blocks(const Conv2dGeometry& g, int vec) {
  int64_t most = blocks_of(forward_corr(g, 1), 1);
  if (g.K == g.C && g.C % vec == 0) {
    const Corr c = forward_corr(g, vec);
    most = std::max(most, blocks_of(c, vec));
    if (tile_fits(c, vec)) {
      most = std::max({most, tile_blocks(c, vec, false), tile_blocks(c, vec, true)});
    }
  }
  return most;
}

template <class E>
void forward_typed(const Conv2dGeometry& g, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, void* workspace, gpu::Stream stream, Version version) {
  constexpr int kVec = E::kVec;
  float* stats = ep.sum != nullptr ? static_cast<float*>(workspace) : nullptr;
  const bool vec = forward_vectors(g, kVec, x, y, ep.residual);
  const Corr c = forward_corr(g, vec ? kVec : 1);
  int64_t rows = 0;  // the statistics' partial rows: the grid's blocks
  const Version v = runs(Pass::forward, g, E::kElement, version);
  if (vec && (v == Version::v2 || v == Version::v3) && tile_fits(c, kVec)) {
    const bool pipelined = v == Version::v3;
    correlate_tile(E::kElement, c, x, w, y, ep, stats, pipelined, stream, kForward);
    rows = tile_blocks(c, kVec, pipelined);
  } else if (vec) {
    correlate_any<E, kVec>(c, x, w, y, ep, stats, stream, kForward);
    rows = blocks_of(c, kVec);
  } else {
    correlate_any<E, 1>(c, x, w, y, ep, stats, stream, kForward);
    rows = blocks_of(c, 1);
  }
  if (stats != nullptr) tc::sum_channel_stats(stats, int(rows), int(g.K), ep, stream);
}

template <class E, int V>
void gather(const Corr& c, const Conv2dGeometry& g, const void* dy, const void* w, void* dx,
            gpu::Stream stream) {
  using T = typename E::T;
  const auto kernel = gather_kernel<E, V, kLoopQT>;
  const size_t smem = shared_bytes(c, V, false);
  allow_shared(kernel, smem, kData);
  kernel<<<grid_of(c, V, kData), unsigned(c.tx * c.ty), smem, stream>>>(
      c, FastDivmod(int(g.stride_h)), FastDivmod(int(g.stride_w)), static_cast<const T*>(dy),
      static_cast<const T*>(w), static_cast<T*>(dx));
  gpu::check_launch(kData);
}

template <class E>
void data_typed(const Conv2dGeometry& g, const void* dy, const void* w, void* dx,
                gpu::Stream stream, Version version) {
  constexpr int kVec = E::kVec;
  const int M = int(g.K / g.C);
  const bool vec = M == 1 && g.C % kVec == 0 && aligned16(dy) && aligned16(dx);
  const int V = vec ? kVec : 1;
  const int P = int(g.P()), Q = int(g.Q());
  if (g.stride_h == 1 && g.stride_w == 1) {
    // A forward correlation of dy with the rotated filter, padded (R-1)*dil - pad.
    Corr c = corr_of(P, Q, int(g.K), int(g.H), int(g.W), int(g.C), g, V, M, 1, true);
    c.pad_h = int((g.R - 1) * g.dilation_h - g.pad_h);
    c.pad_w = int((g.S - 1) * g.dilation_w - g.pad_w);
    const TcEpilogue none;
    const Version v = runs(Pass::data, g, E::kElement, version);
    if (vec && (v == Version::v2 || v == Version::v3) && tile_fits(c, kVec)) {
      return correlate_tile(E::kElement, c, dy, w, dx, none, nullptr, v == Version::v3, stream,
                            kData);
    }
    return vec ? correlate_any<E, kVec>(c, dy, w, dx, none, nullptr, stream, kData)
               : correlate_any<E, 1>(c, dy, w, dx, none, nullptr, stream, kData);
  }
  const Corr c =
      cut(corr_of(P, Q, int(g.K), int(g.H), int(g.W), int(g.C), g, V, M, 1, false), kLoopQT);
  vec ? gather<E, kVec>(c, g, dy, w, dx, stream) : gather<E, 1>(c, g, dy, w, dx, stream);
}

}  // namespace

size_t forward_workspace(const Conv2dGeometry& g, bool with_statistics) {
  if (!with_statistics) return 0;
  return size_t(std::max<int64_t>(forward_blocks(g, 4), forward_blocks(g, 8))) * 2 * size_t(g.K) *
         sizeof(float);
}

void forward(const Conv2dGeometry& g, Element type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, void* workspace, gpu::Stream stream, Version version) {
  implicit_gemm::check_sizes(g);
  if ((epilogue.sum == nullptr) != (epilogue.sum_squares == nullptr)) {
    throw Error(std::string(kForward) + ": channel statistics need both sum and sum_squares");
  }
  switch (type) {
    case Element::f32:
      return forward_typed<F32>(g, x, w, y, epilogue, workspace, stream, version);
    case Element::bf16:
      return forward_typed<Bf16>(g, x, w, y, epilogue, workspace, stream, version);
    case Element::f16:
      return forward_typed<F16>(g, x, w, y, epilogue, workspace, stream, version);
  }
}

void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   gpu::Stream stream, Version version) {
  implicit_gemm::check_sizes(g);
  switch (type) {
    case Element::f32:
      return data_typed<F32>(g, dy, w, dx, stream, version);
    case Element::bf16:
      return data_typed<Bf16>(g, dy, w, dx, stream, version);
    case Element::f16:
      return data_typed<F16>(g, dy, w, dx, stream, version);
  }
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
