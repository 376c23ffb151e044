// The filter gradient of the convolutions on 16-bit NHWC tensors on Hopper: wgmma fed
// by TMA (convolution_tc_wgmma.cuh's kernel and ring, this file its Problem). Compiled for sm_90a
// alone (CMakeLists.txt); convolution_tc_filter_cuda.cu calls it on a device of compute capability
// 9.0 for the geometries it fits (wgmma_backward_filter_fits), the mma.sync kernels otherwise.
//
//   dw[K, r, s, C] += dy[N*P*Q, K]^T * x_rs[N*P*Q, C]   (fp32), one GEMM per tap (r, s), where
//   x_rs[n, p, q] = x[n, stride_h p + r*dil_h - pad_h, stride_w q + s*dil_w - pad_w] (zero
//   outside the image)
//
// The inner index N*P*Q is the outer index of both tensors: the operands are MN-major, a box of
// 64 channels x 64 pixels lands as 64 rows (pixels) of 128 bytes (channels), and the wgmma's
// transpose immediates read it as such (convolution_tc_wgmma.cuh). The GEMM's rows are the
// tensor with more channels (R = dy and rows k, or R = x and rows c), its columns the other (S), so
// that a 64-channel side does not leave half of the 128-row tile empty:
//
//   D[i, j] = sum over the slice's pixels of R[pixel, i] * S[pixel, j]   (tile 128 x BN, BN = 128,
//             or 64 when S has at most 64 channels)
//
// Slabs of 64 pixels: a 1x1 at stride 1 without padding reads both tensors flat (64 consecutive
// pixels of N*P*Q, 2-D maps); any other filter (a strided 1x1 as one tap) reads boxes of bh x bw
// output positions of one image (bw = Q rounded up to a power of two, at most 64; bh = 64 / bw),
// dy at (q0, p0) and x at (stride_w q0 + s*dil_w - pad_w, stride_h p0 + r*dil_h - pad_h), its box
// stepping stride_w pixels and stride_h rows, through 4-D maps {channels, width, height, N}: the
// TMA zero-fills what lies outside either tensor, so positions past Q or P (dy
// zero) and taps over the padding (x zero) add nothing. Each block has one tap, except:
//
// Two taps a tile where x has 64 channels (and the filter taps): one tap's product is only 64
// rows (64 x J), so the tile's rows are x at two taps instead, box 0 = x at tap t, box 1 = x at
// tap t+1 (R = x, rows c twice), B = dy's BN channels loaded once for both; warpgroup 0 computes
// tap t's 64 x BN block, warpgroup 1 tap t+1's, each stored into its own tap of the partials. With
// an odd tap count the last tile's box 1 is not asked for (nor its bytes expected): warpgroup 1
// multiplies stale shared memory and stores nothing.
//
// The slabs are cut into fixed slices (enough blocks for two waves on 132 SMs, each slice at least
// 8 slabs), one block per (tile, tap or tap pair, slice); each writes its fp32 D into
// partial[slice][r][s][c][k] (the layout of the mma.sync filter pass's partials), and
// convolution_tc_filter_cuda.cu's sum_slices_kernel adds the slices to dw in slice order:
// deterministic, no float atomics. Channels past C or K are zero-filled by the TMA. What fits:
// groups 1, strides up to 4, C and K multiples of 8.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"

namespace crema::kernels::cuda::tc {
namespace {

using wg::kBM, wg::kSlab;

// About two waves of two blocks an SM on an H100 or H200 (132 SMs).
constexpr int kTargetBlocks = 264;
constexpr int kMinSlabsPerSlice = 8;

// The cut: which tensor gives the rows, the tile, the slab boxes, the slices (length: pixels a
// slice when flat, slabs a slice with taps).
struct FilterPlan {
  bool rows_are_dy;  // R = dy (rows k, columns c) or R = x (rows c, columns k)
  bool flat;         // a 1x1 at stride 1 without padding: slabs of 64 consecutive pixels of N*P*Q
  bool paired;       // two taps a tile (C = 64 with taps): R = x, I = 64, (taps + 1) / 2 tap blocks
  int I, J, bn, tiles_j, tiles, taps, tap_blocks, slices, length;
  int bw, bh, blocks_q, blocks_pq, slabs;  // with taps: bh x bw boxes, slabs in all
};

FilterPlan filter_plan(const Conv2dGeometry& g) {
  FilterPlan f{};
  const int64_t NPQ = g.N * g.P() * g.Q();
  const int P = int(g.P()), Q = int(g.Q());
  f.flat =
      g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 && g.stride_w == 1;
  f.taps = int(g.R * g.S);
  f.paired = wgmma_backward_filter_pairs_taps(g);
  f.rows_are_dy = !f.paired && g.K >= g.C;
  f.I = int(f.rows_are_dy ? g.K : g.C), f.J = int(f.rows_are_dy ? g.C : g.K);
  f.bn = f.J > 64 ? 128 : 64;
  f.tiles_j = (f.J + f.bn - 1) / f.bn;
  f.tiles = (f.paired ? 1 : (f.I + kBM - 1) / kBM) * f.tiles_j;
  f.tap_blocks = f.paired ? (f.taps + 1) / 2 : f.taps;
  f.bw = 1;
  while (f.bw < Q && f.bw < kSlab) f.bw *= 2;
  f.bh = kSlab / f.bw;
  f.blocks_q = (Q + f.bw - 1) / f.bw;
  f.blocks_pq = (P + f.bh - 1) / f.bh * f.blocks_q;
  const int64_t slabs = f.flat ? (NPQ + kSlab - 1) / kSlab : g.N * f.blocks_pq;
  f.slabs = int(slabs);
  const int64_t most =
      std::clamp<int64_t>((slabs + kMinSlabsPerSlice - 1) / kMinSlabsPerSlice, 1, 65535);
  const int64_t blocks = int64_t(f.tiles) * f.tap_blocks;
  // Paired: at most kTargetBlocks blocks in all (rounded down), so that all are resident at once;
  // rounded up, 64@56 would run 5 x 53 = 265, one block left alone for a second round. (The
  // unpaired cut keeps rounding up, as measured: 64@56 there is 9 x 30 = 270.)
  const int64_t per_tile = f.paired ? std::max<int64_t>(1, kTargetBlocks / blocks)
                                    : (kTargetBlocks + blocks - 1) / blocks;
  const int64_t wanted = std::clamp<int64_t>(per_tile, 1, most);
  const int64_t length = (slabs + wanted - 1) / wanted;  // slabs
  f.slices = int((slabs + length - 1) / length);
  f.length = int(f.flat ? length * kSlab : length);
  return f;
}

// Unit (tile + tiles * tap, slice): D's 128 x BN tile of one tap over the slice's slabs, into
// partial[slice][tap][c][k]; paired, unit (tile + tiles * (tap / 2), slice) with taps tap and
// tap + 1, one a warpgroup.
template <int BN, bool FLAT>
struct FilterProblem {
  static constexpr bool kMnMajorA = true, kMnMajorB = true;
  int I, J, tiles, tiles_j, length, slabs_all;
  int64_t stride_i, stride_j;  // D[i, j] lands at partial[(slice * taps + tap) * I * J + ...]
  float* partial;
  // FLAT: N*P*Q. Taps: the boxes, the filter's S and its offsets, which map is x's.
  int NPQ, bw, bh, blocks_q, blocks_pq, taps, S, dil_h, dil_w, pad_h, pad_w, stride_h, stride_w;
  bool rows_are_dy, paired;
  int blocks_x, slices;  // unit u: block u % blocks_x (tile + tiles * slot) of slice u / blocks_x

  __device__ int units() const { return blocks_x * slices; }

  struct Where {
    int i0, j0, slice, begin, tap;
    int shift_h, shift_w, shift_h1, shift_w1;  // x's offsets: the tap's (paired: and tap + 1's)
  };
  __device__ Where locate(int unit) const {
    const int x = unit % blocks_x, tile = x % tiles, slot = x / tiles, slice = unit / blocks_x;
    Where w;
    w.i0 = tile / tiles_j * kBM, w.j0 = tile % tiles_j * BN;
    w.slice = slice, w.begin = slice * length, w.tap = paired ? 2 * slot : slot;
    w.shift_h = w.tap / S * dil_h - pad_h, w.shift_w = w.tap % S * dil_w - pad_w;
    const int next = w.tap + 1;  // paired: warpgroup 1's tap (used only where < taps)
    w.shift_h1 = next / S * dil_h - pad_h, w.shift_w1 = next % S * dil_w - pad_w;
    return w;
  }
  __device__ int slabs(const Where& w) const {
    if constexpr (FLAT) return (min(NPQ - w.begin, length) + kSlab - 1) / kSlab;
    return min(slabs_all - w.begin, length);
  }
  // A: channels i0 .. i0+127 of R as two 64-channel boxes (one per warpgroup; paired: x's 64
  // channels at taps tap and tap + 1), B: channels j0 .. j0+BN-1 of S as BN / 64 boxes, each box
  // 64 pixels deep, 8192 bytes. A box that would lie wholly past the channels (paired: past the
  // last tap) is not asked for: its stale rows or columns of D are never stored.
  __device__ void fill(const Where& w, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_r, const CUtensorMap* map_s) const {
    const bool second = paired ? w.tap + 1 < taps : w.i0 + 64 < I;
    const int boxes_a = second ? 2 : 1, boxes_b = min(BN / 64, (J - w.j0 + 63) / 64);
    wg::mbarrier_arrive_expect_tx(bar, uint32_t(boxes_a + boxes_b) * 8192);
    if constexpr (FLAT) {
      const int npq = w.begin + slab * kSlab;
      for (int h = 0; h < boxes_a; ++h) {
        wg::tma_load_2d(stage + 8192 * h, map_r, bar, w.i0 + 64 * h, npq);
      }
      for (int h = 0; h < boxes_b; ++h) {
        wg::tma_load_2d(stage + wg::Ring<BN>::A_BYTES + 8192 * h, map_s, bar, w.j0 + 64 * h, npq);
      }
    } else {
      const int t = w.begin + slab, n = t / blocks_pq, pq = t % blocks_pq;
      const int p0 = pq / blocks_q * bh, q0 = pq % blocks_q * bw;
      // dy's box at (q0, p0); x's at (stride_w q0, stride_h p0) + the tap's offset, its map
      // stepping `stride` pixels and rows.
      const int xw = stride_w * q0 + w.shift_w, xh = stride_h * p0 + w.shift_h;
      const int rw = rows_are_dy ? q0 : xw, rh = rows_are_dy ? p0 : xh;
      const int sw = rows_are_dy ? xw : q0, sh = rows_are_dy ? xh : p0;
      if (paired) {  // R = x: box 0 at tap `tap` (rw, rh, i0 = 0), box 1 at the next tap
        wg::tma_load_4d(stage, map_r, bar, 0, rw, rh, n);
        if (second) {
          wg::tma_load_4d(stage + 8192, map_r, bar, 0, stride_w * q0 + w.shift_w1,
                          stride_h * p0 + w.shift_h1, n);
        }
      } else {
        for (int h = 0; h < boxes_a; ++h) {
          wg::tma_load_4d(stage + 8192 * h, map_r, bar, w.i0 + 64 * h, rw, rh, n);
        }
      }
      for (int h = 0; h < boxes_b; ++h) {
        wg::tma_load_4d(stage + wg::Ring<BN>::A_BYTES + 8192 * h, map_s, bar, w.j0 + 64 * h, sw, sh,
                        n);
      }
    }
  }
  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3. The partials are fp32 written once,
  // straight from the fragments (no scratch: the ring goes unused here). Paired, warpgroup
  // `consumer` holds rows 0..63 (x's channels) of tap tap + consumer.
  template <int STAGED>
  __device__ void store(const Where& w, int consumer, const float (&acc)[BN / 2], float*) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int tap = paired ? w.tap + consumer : w.tap;
    if (tap >= taps) return;  // an odd tap count's last tile: box 1 was never loaded
    const int i = (paired ? 0 : w.i0 + consumer * 64) + warp * 16 + lane / 4;
    float* first = partial + (int64_t(w.slice) * taps + tap) * I * J;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int n = w.j0 + 8 * j + 2 * (lane % 4);
      if (n >= J) continue;  // J is a multiple of 8: n + 1 < J too
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (i + 8 * half >= I) continue;
        float* at = first + (i + 8 * half) * stride_i + n * stride_j;
        at[0] = acc[4 * j + 2 * half], at[stride_j] = acc[4 * j + 2 * half + 1];
      }
    }
  }
};

// An NHWC tensor [N, height, width, channels] in boxes of 64 channels x bw x bh pixels, every
// stride_w-th pixel of every stride_h-th row from the box's corner (x at a strided convolution's
// positions; dy: 1).
CUtensorMap image_map(TcType type, const void* base, int64_t N, int64_t height, int64_t width,
                      int64_t channels, const FilterPlan& f, int stride_h, int stride_w) {
  const cuuint64_t dims[4] = {cuuint64_t(channels), cuuint64_t(width), cuuint64_t(height),
                              cuuint64_t(N)};
  const cuuint64_t strides[3] = {cuuint64_t(channels * 2), cuuint64_t(width * channels * 2),
                                 cuuint64_t(height * width * channels * 2)};
  const cuuint32_t box[4] = {cuuint32_t(kSlab), cuuint32_t(f.bw * stride_w),
                             cuuint32_t(f.bh * stride_h), 1};
  const cuuint32_t steps[4] = {1, cuuint32_t(stride_w), cuuint32_t(stride_h), 1};
  return wg::tensor_map(type, base, 4, dims, strides, box, steps);
}

template <class E>
void filter_typed(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                  float* partial, gpu::Stream stream) {
  const FilterPlan f = filter_plan(g);
  const int64_t NPQ = g.N * g.P() * g.Q();
  CUtensorMap map_x, map_dy;
  if (f.flat) {
    map_x = wg::matrix_map(type, x, NPQ, g.C, 64), map_dy = wg::matrix_map(type, dy, NPQ, g.K, 64);
  } else {
    map_x = image_map(type, x, g.N, g.H, g.W, g.C, f, int(g.stride_h), int(g.stride_w));
    map_dy = image_map(type, dy, g.N, g.P(), g.Q(), g.K, f, 1, 1);
  }
  const CUtensorMap& map_r = f.rows_are_dy ? map_dy : map_x;
  const CUtensorMap& map_s = f.rows_are_dy ? map_x : map_dy;
  // partial[slice][tap][c][k]: k = i (stride 1), c = j (stride K = I), or c = i, k = j.
  const int64_t stride_i = f.rows_are_dy ? 1 : f.J, stride_j = f.rows_are_dy ? f.I : 1;
  const int blocks_x = f.tiles * f.tap_blocks;
  auto go = [&](auto bn, auto flat) {
    constexpr int BN = decltype(bn)::value;
    const FilterProblem<BN, decltype(flat)::value> problem{f.I,
                                                           f.J,
                                                           f.tiles,
                                                           f.tiles_j,
                                                           f.length,
                                                           f.slabs,
                                                           stride_i,
                                                           stride_j,
                                                           partial,
                                                           int(NPQ),
                                                           f.bw,
                                                           f.bh,
                                                           f.blocks_q,
                                                           f.blocks_pq,
                                                           f.taps,
                                                           int(g.S),
                                                           int(g.dilation_h),
                                                           int(g.dilation_w),
                                                           int(g.pad_h),
                                                           int(g.pad_w),
                                                           int(g.stride_h),
                                                           int(g.stride_w),
                                                           f.rows_are_dy,
                                                           f.paired,
                                                           blocks_x,
                                                           f.slices};
    wg::launch<E, BN>(map_r, map_s, problem, int64_t(blocks_x) * f.slices, stream,
                      "conv2d_tc_backward_filter (wgmma)");
  };
  using Flat = std::true_type;
  using Taps = std::false_type;
  if (f.bn == 128) {
    f.flat ? go(std::integral_constant<int, 128>{}, Flat{})
           : go(std::integral_constant<int, 128>{}, Taps{});
  } else {
    f.flat ? go(std::integral_constant<int, 64>{}, Flat{})
           : go(std::integral_constant<int, 64>{}, Taps{});
  }
}

}  // namespace

// Strides up to 4: x's box spans bw * stride_w by bh * stride_h pixels (bw, bh <= 64), and the
// TMA's boxes are at most 256 a dimension.
bool wgmma_backward_filter_pairs_taps(const Conv2dGeometry& g) {
  return g.C == 64 && g.R * g.S >= 2;
}

bool wgmma_backward_filter_fits(const Conv2dGeometry& g) {
  return g.groups == 1 && g.stride_h <= 4 && g.stride_w <= 4 && g.C % 8 == 0 && g.K % 8 == 0;
}

int wgmma_backward_filter_slices(const Conv2dGeometry& g) {
  return filter_plan(g).slices;
}

void wgmma_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                           float* partial, gpu::Stream stream) {
  if (type == TcType::bf16) {
    filter_typed<Bf16>(g, type, x, dy, partial, stream);
  } else {
    filter_typed<F16>(g, type, x, dy, partial, stream);
  }
}

}  // namespace crema::kernels::cuda::tc
