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
// Slabs of 64 consecutive output positions of N*P*Q, read flat from both tensors: dy [N*P*Q, K] as
// a matrix (a 2-D map), x at the tap's pixel of each position -- through an im2col map (the TMA
// walks the 64 positions from the slab's first, wrapping at the end of a row and of an image, and
// reads x at position + the tap's offset, zeros over the padding and past the last image), or,
// for a 1x1 at stride 1 without padding, as a matrix too. Positions past N*P*Q are zeros in dy:
// they add nothing. Each block has one tap, except:
//
// Two taps a tile where x has 64 channels (and the filter taps): one tap's product is only 64
// rows (64 x J), so the tile's rows are x at two taps instead, box 0 = x at tap t, box 1 = x at
// tap t+1 (R = x, rows c twice), B = dy's BN channels loaded once for both; warpgroup 0 computes
// tap t's 64 x BN block, warpgroup 1 tap t+1's, each stored into its own tap of the partials. With
// an odd tap count the last tile's box 1 is not asked for (nor its bytes expected): warpgroup 1
// multiplies stale shared memory and stores nothing.
//
// The slabs are cut into slices (filter_plan's cost model), one block per (tile, tap or tap pair,
// slice); each writes its fp32 D into partial[slice][r][s][c][k] (the layout of the mma.sync
// filter pass's partials), and convolution_tc_filter_cuda.cu's sum_slices_kernel adds the slices
// to dw in slice order: deterministic, no float atomics. Channels past C or K are zero-filled by
// the TMA. What fits: groups 1, strides up to 8, C and K multiples of 8, the im2col corners
// (-pad, pad - (taps - 1) * dilation) within [-128, 127].
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"

namespace crema::kernels::cuda::tc {
namespace {

using wg::kBM, wg::kSlab;

// Two blocks an SM on an H100 or H200 (132 SMs).
constexpr int kTargetBlocks = 264;
constexpr int kMinSlabsPerSlice = 8;

// The slices' cost model, in microseconds (H200 estimates, not tuned per shape): a slab of a
// 128 x 128 tile (2 x 128 x 128 x 64 flops) takes a block sharing its SM with another about 0.75
// us (0.37 at 64 columns); a block has about kEpilogueSlabs slabs' worth of pipeline fill and
// store on top; a round of at most kTargetBlocks / 2 blocks runs one an SM, each kLoneRound of a
// shared round's time; a slice's partials are written and read back at about 3 TB/s.
constexpr double kEpilogueSlabs = 2.0, kLoneRound = 0.75, kPartialBytesPerUs = 3.0e6;

// The slice count (1 .. most) whose rounds of blocks and partials cost least: `units` blocks a
// slice, `slabs` in all, `slab_us` a slab, `slice_bytes` a slice's partials. Fewer slices leave
// SMs idle or a second round nearly empty (256@14 3x3: 36 units x 8 slices = 288 blocks, 24 of
// them a round of their own); more write more partials.
int64_t cheapest_slices(int64_t units, int64_t slabs, double slab_us, double slice_bytes,
                        int64_t most) {
  int64_t best = 1;
  double best_us = 0.0;
  for (int64_t wanted = 1; wanted <= most; ++wanted) {
    const int64_t length = (slabs + wanted - 1) / wanted, slices = (slabs + length - 1) / length;
    if (slices != wanted) continue;  // the same cut as a smaller count
    const int64_t blocks = units * slices, full = blocks / kTargetBlocks;
    const int64_t rest = blocks % kTargetBlocks;
    const double rounds = double(full) + (rest == 0                   ? 0.0
                                          : rest <= kTargetBlocks / 2 ? kLoneRound
                                                                      : 1.0);
    const double us = rounds * (double(length) + kEpilogueSlabs) * slab_us +
                      double(slices) * 2.0 * slice_bytes / kPartialBytesPerUs;
    if (wanted == 1 || us < best_us) best = slices, best_us = us;
  }
  return best;
}

// The cut: which tensor gives the rows, the tile, the slices (`length` slabs each).
struct FilterPlan {
  bool rows_are_dy;  // R = dy (rows k, columns c) or R = x (rows c, columns k)
  bool plain;        // a 1x1 at stride 1 without padding: x read as a matrix, not im2col
  bool paired;       // two taps a tile (C = 64 with taps): R = x, I = 64, (taps + 1) / 2 tap blocks
  int I, J, bn, tiles_j, tiles, taps, tap_blocks, slices, length, slabs;
};

FilterPlan filter_plan(const Conv2dGeometry& g) {
  FilterPlan f{};
  const int64_t NPQ = g.N * g.P() * g.Q();
  f.plain =
      g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 && g.stride_w == 1;
  f.taps = int(g.R * g.S);
  f.paired = wgmma_backward_filter_pairs_taps(g);
  f.rows_are_dy = !f.paired && g.K >= g.C;
  f.I = int(f.rows_are_dy ? g.K : g.C), f.J = int(f.rows_are_dy ? g.C : g.K);
  f.bn = f.J > 64 ? 128 : 64;
  f.tiles_j = (f.J + f.bn - 1) / f.bn;
  f.tiles = (f.paired ? 1 : (f.I + kBM - 1) / kBM) * f.tiles_j;
  f.tap_blocks = f.paired ? (f.taps + 1) / 2 : f.taps;
  const int64_t slabs = (NPQ + kSlab - 1) / kSlab;
  f.slabs = int(slabs);
  const int64_t most =
      std::clamp<int64_t>((slabs + kMinSlabsPerSlice - 1) / kMinSlabsPerSlice, 1, 65535);
  const double slice_bytes = double(f.taps) * f.I * f.J * 4;
  f.slices = int(cheapest_slices(int64_t(f.tiles) * f.tap_blocks, slabs, f.bn == 128 ? 0.75 : 0.37,
                                 slice_bytes, most));
  f.length = int((slabs + f.slices - 1) / f.slices);
  return f;
}

// Unit (tile + tiles * tap, slice): D's 128 x BN tile of one tap over the slice's slabs, into
// partial[slice][tap][c][k]; paired, unit (tile + tiles * (tap / 2), slice) with taps tap and
// tap + 1, one a warpgroup. IM2COL: x through the im2col map (else a matrix, like dy).
template <int BN, bool IM2COL>
struct FilterProblem {
  static constexpr bool kMnMajorA = true, kMnMajorB = true;
  int I, J, tiles, tiles_j, length, slabs_all;
  int64_t stride_i, stride_j;  // D[i, j] lands at partial[(slice * taps + tap) * I * J + ...]
  float* partial;
  // The output positions (P*Q an image, Q a row), x's window corners and steps, the filter.
  int PQ, Q, lower_h, lower_w, stride_h, stride_w, taps, S, dil_h, dil_w;
  bool rows_are_dy, paired;
  int blocks_x, slices;  // unit u: block u % blocks_x (tile + tiles * slot) of slice u / blocks_x

  __device__ int units() const { return blocks_x * slices; }

  struct Where {
    int i0, j0, slice, begin, tap;
    uint16_t off_h, off_w, off_h1, off_w1;  // x's offsets: the tap's (paired: and tap + 1's)
  };
  __device__ Where locate(int unit) const {
    const int x = unit % blocks_x, tile = x % tiles, slot = x / tiles, slice = unit / blocks_x;
    Where w;
    w.i0 = tile / tiles_j * kBM, w.j0 = tile % tiles_j * BN;
    w.slice = slice, w.begin = slice * length, w.tap = paired ? 2 * slot : slot;
    w.off_h = uint16_t(w.tap / S * dil_h), w.off_w = uint16_t(w.tap % S * dil_w);
    const int next = w.tap + 1;  // paired: warpgroup 1's tap (used only where < taps)
    w.off_h1 = uint16_t(next / S * dil_h), w.off_w1 = uint16_t(next % S * dil_w);
    return w;
  }
  __device__ int slabs(const Where& w) const { return min(slabs_all - w.begin, length); }
  // A: channels i0 .. i0+127 of R as two 64-channel boxes (one per warpgroup; paired: x's 64
  // channels at taps tap and tap + 1), B: channels j0 .. j0+BN-1 of S as BN / 64 boxes, each box
  // 64 positions deep, 8192 bytes. A box that would lie wholly past the channels (paired: past
  // the last tap) is not asked for: its stale rows or columns of D are never stored.
  __device__ void fill(const Where& w, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_r, const CUtensorMap* map_s) const {
    const bool second = paired ? w.tap + 1 < taps : w.i0 + 64 < I;
    const int boxes_a = second ? 2 : 1, boxes_b = min(BN / 64, (J - w.j0 + 63) / 64);
    wg::mbarrier_arrive_expect_tx(bar, uint32_t(boxes_a + boxes_b) * 8192);
    const int npq = (w.begin + slab) * kSlab;
    // The slab's first position (n, p, q): x's window corner there (IM2COL).
    int n = 0, h = 0, wx = 0;
    if constexpr (IM2COL) {
      n = npq / PQ;
      const int pq = npq - n * PQ, p = pq / Q;
      h = lower_h + p * stride_h, wx = lower_w + (pq - p * Q) * stride_w;
    }
    auto load_x = [&](uint32_t dst, const CUtensorMap* map, int c, uint16_t oh, uint16_t ow) {
      if constexpr (IM2COL) {
        wg::tma_load_im2col_4d(dst, map, bar, c, wx, h, n, ow, oh);
      } else {
        wg::tma_load_2d(dst, map, bar, c, npq);
      }
    };
    const uint32_t stage_b = stage + wg::Ring<BN>::A_BYTES;
    if (paired) {  // R = x: box 0 at tap `tap`, box 1 at the next tap
      load_x(stage, map_r, 0, w.off_h, w.off_w);
      if (second) load_x(stage + 8192, map_r, 0, w.off_h1, w.off_w1);
      for (int b = 0; b < boxes_b; ++b) {
        wg::tma_load_2d(stage_b + 8192 * b, map_s, bar, w.j0 + 64 * b, npq);
      }
    } else if (rows_are_dy) {
      for (int a = 0; a < boxes_a; ++a) {
        wg::tma_load_2d(stage + 8192 * a, map_r, bar, w.i0 + 64 * a, npq);
      }
      for (int b = 0; b < boxes_b; ++b) {
        load_x(stage_b + 8192 * b, map_s, w.j0 + 64 * b, w.off_h, w.off_w);
      }
    } else {
      for (int a = 0; a < boxes_a; ++a) {
        load_x(stage + 8192 * a, map_r, w.i0 + 64 * a, w.off_h, w.off_w);
      }
      for (int b = 0; b < boxes_b; ++b) {
        wg::tma_load_2d(stage_b + 8192 * b, map_s, bar, w.j0 + 64 * b, npq);
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

template <class E>
void filter_typed(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                  float* partial, gpu::Stream stream) {
  const FilterPlan f = filter_plan(g);
  const int64_t NPQ = g.N * g.P() * g.Q();
  const int pad_h = int(g.pad_h), pad_w = int(g.pad_w);
  const CUtensorMap map_dy = wg::matrix_map(type, dy, NPQ, g.K, 64);
  const CUtensorMap map_x = f.plain ? wg::matrix_map(type, x, NPQ, g.C, 64)
                                    : wg::im2col_map(type, x, g.N, g.H, g.W, g.C, -pad_h, -pad_w,
                                                     pad_h - int((g.R - 1) * g.dilation_h),
                                                     pad_w - int((g.S - 1) * g.dilation_w),
                                                     int(g.stride_h), int(g.stride_w));
  const CUtensorMap& map_r = f.rows_are_dy ? map_dy : map_x;
  const CUtensorMap& map_s = f.rows_are_dy ? map_x : map_dy;
  // partial[slice][tap][c][k]: k = i (stride 1), c = j (stride K = I), or c = i, k = j.
  const int64_t stride_i = f.rows_are_dy ? 1 : f.J, stride_j = f.rows_are_dy ? f.I : 1;
  const int blocks_x = f.tiles * f.tap_blocks;
  auto go = [&](auto bn, auto im2col) {
    constexpr int BN = decltype(bn)::value;
    FilterProblem<BN, decltype(im2col)::value> problem{};
    problem.I = f.I, problem.J = f.J, problem.tiles = f.tiles, problem.tiles_j = f.tiles_j;
    problem.length = f.length, problem.slabs_all = f.slabs;
    problem.stride_i = stride_i, problem.stride_j = stride_j, problem.partial = partial;
    problem.PQ = int(g.P() * g.Q()), problem.Q = int(g.Q());
    problem.lower_h = -pad_h, problem.lower_w = -pad_w;
    problem.stride_h = int(g.stride_h), problem.stride_w = int(g.stride_w);
    problem.taps = f.taps, problem.S = int(g.S);
    problem.dil_h = int(g.dilation_h), problem.dil_w = int(g.dilation_w);
    problem.rows_are_dy = f.rows_are_dy, problem.paired = f.paired;
    problem.blocks_x = blocks_x, problem.slices = f.slices;
    wg::launch<E, BN>(map_r, map_s, problem, int64_t(blocks_x) * f.slices, stream,
                      "conv2d_tc_backward_filter (wgmma)");
  };
  using Im2col = std::true_type;
  using Plain = std::false_type;
  if (f.bn == 128) {
    f.plain ? go(std::integral_constant<int, 128>{}, Plain{})
            : go(std::integral_constant<int, 128>{}, Im2col{});
  } else {
    f.plain ? go(std::integral_constant<int, 64>{}, Plain{})
            : go(std::integral_constant<int, 64>{}, Im2col{});
  }
}

}  // namespace

// The im2col map's limits: steps (the strides) 1..8, corners -pad and pad - (taps - 1) *
// dilation within [-128, 127], offsets (taps - 1) * dilation 16-bit; N*P*Q an int.
bool wgmma_backward_filter_pairs_taps(const Conv2dGeometry& g) {
  return g.C == 64 && g.R * g.S >= 2;
}

bool wgmma_backward_filter_fits(const Conv2dGeometry& g) {
  auto corner = [](int64_t v) { return v >= -128 && v <= 127; };
  const int64_t reach_h = (g.R - 1) * g.dilation_h, reach_w = (g.S - 1) * g.dilation_w;
  return g.groups == 1 && g.stride_h <= 8 && g.stride_w <= 8 && g.C % 8 == 0 && g.K % 8 == 0 &&
         corner(-g.pad_h) && corner(-g.pad_w) && corner(g.pad_h - reach_h) &&
         corner(g.pad_w - reach_w) && reach_h < 65536 && reach_w < 65536 &&
         g.N * g.P() * g.Q() + kSlab < INT32_MAX;
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
