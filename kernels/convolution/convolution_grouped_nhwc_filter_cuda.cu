// The filter gradient of a grouped NHWC convolution with few channels a group
// (convolution_grouped_nhwc.h):
//
//   dw[k,r,s,c] += sum over n, p, q of dy[n,p,q,k] x[n, p sh - ph + r dh, q sw - pw + s dw,
//                  g(k) Cg + c]
//
// A block: tx threads across a slab of output channels (4 each: kOT, one group's) x ty rows; the
// grid: slices of the output's row strips x slabs x (filter row r, a run of TS of its taps). A
// thread holds the TS x 4 x Cg sums of its taps (row_taps), walks a run of consecutive strips of
// QF outputs of one row (its share of the block's slice, in order), and for each loads dy's 4
// channels of the QF outputs and the (QF-1)*stride + TS columns of x they read (the group's Cg
// channels each) at once, then adds the products. Then the block adds its rows in row order, 8
// sums at a time through shared memory, into its slice's partial sums,
// partial[slice][group][r*S + s][c][k] (the workspace), and sum_slices_kernel adds the slices in
// a fixed order into dw: deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/convolution/convolution_grouped_nhwc.cuh"
#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"

namespace crema::kernels::cuda::grouped_nhwc {
namespace {

using depthwise_nhwc::kBlockThreads;

struct FilterArgs {
  int H, W, C, P, Q, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int Kg, G;
  int tx, ty;
  int runs;           // runs of TS taps a filter row: ceil(S / TS)
  int row_strips;     // strips of QF outputs a row: ceil(Q / QF)
  int64_t strips;     // N * P * row_strips
  int64_t per_slice;  // strips a slice (the last may have fewer)
};

// The taps of a filter row a thread holds (TS, a template argument): 3 for 4 channels a group
// (48 sums), else 1 (32 or 64), wider rows in runs of them; and the outputs of a row it takes at
// once (QF: its dy vectors and the (QF-1)*stride + TS columns of x they read, loaded together),
// the most of 4, 2, 1 that keep sums and loads within ~112 registers. (6 taps of 4 channels
// spilled; 3 taps of 8, 150 registers, ran one block an SM.)
constexpr int row_taps(int Cg, int S) {
  return S > 1 && Cg == 4 ? 3 : 1;
}
constexpr int row_outputs(int Cg, int TS, int stride) {
  auto fits = [=](int QF) {
    return TS * kOT * Cg + QF * kOT + ((QF - 1) * stride + TS) * Cg <= 112;
  };
  return fits(4) ? 4 : fits(2) ? 2 : 1;
}

// SW > 0: stride_w == SW and dil_w == 1, the strip's x columns loaded once for all its outputs
// and taps; SW == 0: any geometry, QF == 1.
template <class E, int CG, int TS, int QF, int SW>
__global__ void __launch_bounds__(kBlockThreads)
    filter_kernel(FilterArgs a, const typename E::T* __restrict__ x,
                  const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  using T = typename E::T;
  constexpr int kSums = TS * kOT * CG, kStep = 8;
  static_assert(kSums % kStep == 0, "the block adds its rows 8 sums at a time");
  static_assert(SW > 0 || QF == 1, "the generic walk takes one output at a time");
  __shared__ float red[kBlockThreads * kStep];
  const int lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx;
  const int k_first = blockIdx.y * a.tx * kOT, k0 = k_first + lane * kOT;
  const int r = blockIdx.z / a.runs, s0 = blockIdx.z % a.runs * TS;
  const int64_t begin = blockIdx.x * a.per_slice;
  const int64_t end = min(a.strips, begin + a.per_slice);
  const int64_t share = (end - begin + a.ty - 1) / a.ty;
  const int64_t first = begin + row * share, last = min(end, first + share);
  float acc[TS][kOT][CG] = {};
  if (k0 < a.K && first < last) {
    const T* xg = x + (k0 / a.Kg) * CG;
    int qs = int(first % a.row_strips), p = int(first / a.row_strips % a.P);
    int n = int(first / (int64_t(a.row_strips) * a.P));
    for (int64_t i = first; i < last; ++i) {
      const int h = p * a.stride_h - a.pad_h + r * a.dil_h, q0 = qs * QF;
      if (unsigned(h) < unsigned(a.H)) {
        const T* dy_at = dy + ((int64_t(n) * a.P + p) * a.Q + q0) * a.K + k0;
        float d[QF][kOT];
#pragma unroll
        for (int qi = 0; qi < QF; ++qi) {
          if (q0 + qi < a.Q) {
            depthwise_nhwc::load_channels<E, kOT>(dy_at + int64_t(qi) * a.K, d[qi]);
          } else {
#pragma unroll
            for (int o = 0; o < kOT; ++o) d[qi][o] = 0.0f;
          }
        }
        const T* line = xg + (int64_t(n) * a.H + h) * a.W * a.C;
        if constexpr (SW > 0) {
          constexpr int J = (QF - 1) * SW + TS;
          const int col0 = q0 * SW - a.pad_w + s0;
          float xs[J][CG];
          load_columns<E, CG, J>(line, col0, a.W, a.C, xs);
#pragma unroll
          for (int qi = 0; qi < QF; ++qi) {
#pragma unroll
            for (int s = 0; s < TS; ++s) add_outer<CG>(acc[s], d[qi], xs[qi * SW + s]);
          }
        } else {
#pragma unroll
          for (int s = 0; s < TS; ++s) {
            const int col = q0 * a.stride_w - a.pad_w + (s0 + s) * a.dil_w;
            if (s0 + s >= a.S || unsigned(col) >= unsigned(a.W)) continue;
            float v[CG];
            load_run<E, CG>(line + int64_t(col) * a.C, v);
            add_outer<CG>(acc[s], d[0], v);
          }
        }
      }
      if (++qs == a.row_strips) {
        qs = 0;
        if (++p == a.P) p = 0, ++n;
      }
    }
  }
  // The block's rows added in row order, kStep sums at a time, into the slice's partial sums.
  const float* sums = &acc[0][0][0];
  const int RS = a.R * a.S, Cg = CG;
  const int64_t slice_floats = int64_t(a.G) * RS * Cg * a.Kg;
#pragma unroll
  for (int base = 0; base < kSums; base += kStep) {
#pragma unroll
    for (int j = 0; j < kStep; ++j) red[(row * kStep + j) * a.tx + lane] = sums[base + j];
    __syncthreads();
    for (int idx = threadIdx.x; idx < kStep * a.tx; idx += blockDim.x) {
      const int j = idx / a.tx, l = idx % a.tx, m = base + j;
      const int s = m / (kOT * CG), o = m / CG % kOT, c = m % CG, k = k_first + l * kOT + o;
      if (k >= a.K || s0 + s >= a.S) continue;
      float total = 0.0f;
      for (int rr = 0; rr < a.ty; ++rr) total += red[(rr * kStep + j) * a.tx + l];
      const int tap = r * a.S + s0 + s;
      partial[blockIdx.x * slice_floats + ((int64_t(k / a.Kg) * RS + tap) * Cg + c) * a.Kg +
              k % a.Kg] = total;
    }
    __syncthreads();
  }
}

// dw[(g Kg + k) R S + tap][c] += the sum over slices of partial[slice][g][tap][c][k] (`floats` a
// slice): a block takes 32 consecutive partial floats, warp w the slices w, w + 8, ..., then the
// eight warps' sums are added in warp order: a fixed order, and every slice's loads coalesced and
// many in flight. (tc::sum_filter_slices' 32 x 32 tiles gave a 4 x 4 group's 16 floats a block of
// 256 threads, each walking every slice: the pass 0.097 ms with it, 0.080 with this, H200,
// 2026-11-29, ResNeXt's 4 x 4 groups at 56.)
__global__ void __launch_bounds__(256)
    sum_slices_kernel(const float* __restrict__ partial, int slices, int64_t floats, int RS, int Cg,
                      int Kg, float* __restrict__ dw) {
  __shared__ float red[8][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t i = int64_t(blockIdx.x) * 32 + lane;
  float sum = 0.0f;
  if (i < floats) {
#pragma unroll 4
    for (int s = warp; s < slices; s += 8) sum += partial[s * floats + i];
  }
  red[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || i >= floats) return;
  float total = red[0][lane];
  for (int w = 1; w < 8; ++w) total += red[w][lane];
  const int64_t k = i % Kg, c = i / Kg % Cg, tap = i / (int64_t(Kg) * Cg) % RS,
                g = i / (int64_t(Kg) * Cg * RS);
  dw[((g * Kg + k) * RS + tap) * Cg + c] += total;
}

// The cut: the walk's shape (TS, QF, SW: the kernel's template arguments), and slices of at
// least 256 output positions (32 a row of 8 threads), kBlocks blocks in all where there are
// enough: one wave of an H200's 132 SMs at two blocks an SM (H200, 2026-11-29, `crema bench
// conv-tc --math bf16`, ResNeXt's 4 x 4 groups at 56: 264 blocks 0.067 ms, 528 0.075, 588 (the
// first cut: ~1,000 blocks at 256 positions a slice at least) 0.085). A function of the
// geometry alone.
constexpr int64_t kBlocks = 264;

struct Cut {
  int TS, QF, SW;
  int tx, ty, runs, slabs, slices, row_strips;
  int64_t strips, per_slice;
};

Cut cut_of(const Conv2dGeometry& g) {
  const int Cg = int(g.C / g.groups);
  Cut c{};
  c.TS = row_taps(Cg, int(g.S));
  const bool walks = g.dilation_w == 1 && (g.stride_w == 1 || g.stride_w == 2);
  c.SW = walks ? int(g.stride_w) : 0;
  c.QF = walks ? row_outputs(Cg, c.TS, c.SW) : 1;
  const depthwise_nhwc::BlockShape b = depthwise_nhwc::block_shape(int(g.K / kOT), 32);
  c.tx = b.tx, c.ty = b.ty, c.slabs = b.slabs;
  c.runs = int((g.S + c.TS - 1) / c.TS);
  c.row_strips = int((g.Q() + c.QF - 1) / c.QF);
  c.strips = g.N * g.P() * c.row_strips;
  const int64_t others = int64_t(c.slabs) * g.R * c.runs, positions = g.N * g.P() * g.Q();
  const int64_t slices = std::clamp<int64_t>(
      std::min((positions + 255) / 256, std::max<int64_t>(1, kBlocks / others)), 1, 65535);
  c.per_slice = (c.strips + slices - 1) / slices;
  c.slices = int((c.strips + c.per_slice - 1) / c.per_slice);
  return c;
}

template <class E, int CG, int TS, int QF, int SW>
void filter_launch(const FilterArgs& a, const Cut& cut, const void* x, const void* dy,
                   float* partial, gpu::Stream stream) {
  using T = typename E::T;
  if (int64_t(a.R) * a.runs > 65535) {
    throw Error("conv2d_backward_filter (grouped, nhwc): the filter has too many rows");
  }
  const dim3 grid(unsigned(cut.slices), unsigned(cut.slabs), unsigned(a.R * a.runs));
  filter_kernel<E, CG, TS, QF, SW><<<grid, unsigned(a.tx * a.ty), 0, stream>>>(
      a, static_cast<const T*>(x), static_cast<const T*>(dy), partial);
  gpu::check_launch("conv2d_backward_filter (grouped, nhwc)");
}

// The kernel of cut's shape (the compile-time combinations cut_of can give).
template <class E, int CG, int TS>
void filter_with(const FilterArgs& a, const Cut& cut, const void* x, const void* dy, float* partial,
                 gpu::Stream stream) {
  constexpr int one = row_outputs(CG, TS, 1), two = row_outputs(CG, TS, 2);
  if (cut.SW == 1) return filter_launch<E, CG, TS, one, 1>(a, cut, x, dy, partial, stream);
  if (cut.SW == 2) return filter_launch<E, CG, TS, two, 2>(a, cut, x, dy, partial, stream);
  filter_launch<E, CG, TS, 1, 0>(a, cut, x, dy, partial, stream);
}

template <class E>
void filter_typed(const Conv2dGeometry& g, const void* x, const void* dy, float* dw,
                  void* workspace, gpu::Stream stream) {
  const Cut cut = cut_of(g);
  FilterArgs a{};
  a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.P = int(g.P()), a.Q = int(g.Q());
  a.K = int(g.K), a.R = int(g.R), a.S = int(g.S), a.pad_h = int(g.pad_h), a.pad_w = int(g.pad_w);
  a.stride_h = int(g.stride_h), a.stride_w = int(g.stride_w);
  a.dil_h = int(g.dilation_h), a.dil_w = int(g.dilation_w);
  a.Kg = int(g.K / g.groups), a.G = int(g.groups);
  a.tx = cut.tx, a.ty = cut.ty, a.runs = cut.runs;
  a.row_strips = cut.row_strips, a.strips = cut.strips, a.per_slice = cut.per_slice;
  auto* partial = static_cast<float*>(workspace);
  const int Cg = int(g.C / g.groups);
  switch (Cg) {
    case 4:
      cut.TS == 3 ? filter_with<E, 4, 3>(a, cut, x, dy, partial, stream)
                  : filter_with<E, 4, 1>(a, cut, x, dy, partial, stream);
      break;
    case 8:
      filter_with<E, 8, 1>(a, cut, x, dy, partial, stream);
      break;
    default:
      filter_with<E, 16, 1>(a, cut, x, dy, partial, stream);
  }
  const int64_t floats = g.K * g.R * g.S * Cg;
  sum_slices_kernel<<<unsigned((floats + 31) / 32), 256, 0, stream>>>(partial, cut.slices, floats,
                                                                      a.R * a.S, Cg, a.Kg, dw);
  gpu::check_launch("conv2d_backward_filter (grouped, nhwc: slice sums)");
}

}  // namespace

size_t backward_filter_workspace(const Conv2dGeometry& g) {
  if (!fits(g)) return 0;
  return size_t(cut_of(g).slices) * size_t(g.K * g.R * g.S * (g.C / g.groups)) * sizeof(float);
}

void backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy, float* dw,
                     void* workspace, gpu::Stream stream) {
  implicit_gemm::check_sizes(g);
  if (!fits(g)) {
    throw Error("conv2d_backward_filter (grouped, nhwc): the geometry does not fit (fits())");
  }
  switch (type) {
    case TcType::bf16:
      return filter_typed<depthwise_nhwc::Bf16>(g, x, dy, dw, workspace, stream);
    case TcType::f16:
      return filter_typed<depthwise_nhwc::F16>(g, x, dy, dw, workspace, stream);
  }
}

}  // namespace crema::kernels::cuda::grouped_nhwc
