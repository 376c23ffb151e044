// The filter gradient of the stride-1 1x1 convolutions on 16-bit NHWC tensors on Hopper: wgmma fed
// by TMA (convolution_tc_wgmma.cuh's kernel and ring, this file its Problem). Compiled for sm_90a
// alone (CMakeLists.txt); convolution_tc_filter_cuda.cu calls it on a device of compute capability
// 9.0 for the geometries it fits (wgmma_backward_filter_fits), the mma.sync kernels otherwise.
//
//   dw[K, C] += dy[N*P*Q, K]^T * x[N*P*Q, C]   (fp32)
//
// The inner index N*P*Q is the outer index of both tensors: the operands are MN-major, a box of
// 64 channels x 64 pixels lands as 64 rows (pixels) of 128 bytes (channels), and the wgmma's
// transpose immediates read it as such (convolution_tc_wgmma.cuh). The GEMM's rows are the
// tensor with more channels (R = dy and rows k, or R = x and rows c), its columns the other (S), so
// that a 64-channel side does not leave half of the 128-row tile empty:
//
//   D[i, j] = sum over the slice's npq of R[npq, i] * S[npq, j]   (tile 128 x BN, BN = 128, or 64
//             when S has at most 64 channels)
//
// N*P*Q is cut into fixed slices (enough blocks for two waves on 132 SMs, each slice at least 8
// slabs of 64, a whole number of slabs), one block per (tile, slice); each writes its fp32 D into
// partial[slice][c][k] (the layout of the mma.sync filter pass's partials), and
// convolution_tc_filter_cuda.cu's sum_slices_kernel adds the slices to dw in slice order:
// deterministic, no float atomics. Pixels past N*P*Q and channels past C or K are zero-filled by
// the TMA. What fits: groups 1, a 1x1 filter, no padding, stride 1, C and K multiples of 8.
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

// The cut: which tensor gives the rows, the tile, the slices.
struct FilterPlan {
  bool rows_are_dy;  // R = dy (rows k, columns c) or R = x (rows c, columns k)
  int I, J, bn, tiles_j, tiles, slices, length;
};

FilterPlan filter_plan(const Conv2dGeometry& g) {
  FilterPlan f;
  const int64_t NPQ = g.N * g.P() * g.Q();
  f.rows_are_dy = g.K >= g.C;
  f.I = int(f.rows_are_dy ? g.K : g.C), f.J = int(f.rows_are_dy ? g.C : g.K);
  f.bn = f.J > 64 ? 128 : 64;
  f.tiles_j = (f.J + f.bn - 1) / f.bn;
  f.tiles = (f.I + kBM - 1) / kBM * f.tiles_j;
  const int64_t most = std::clamp<int64_t>(
      (NPQ + kMinSlabsPerSlice * kSlab - 1) / (kMinSlabsPerSlice * kSlab), 1, 65535);
  const int64_t wanted = std::clamp<int64_t>((kTargetBlocks + f.tiles - 1) / f.tiles, 1, most);
  const int64_t length = ((NPQ + wanted - 1) / wanted + kSlab - 1) / kSlab * kSlab;
  f.length = int(length), f.slices = int((NPQ + length - 1) / length);
  return f;
}

// Block (tile, slice): D's 128 x BN tile over the slice's pixels, into partial[slice][c][k].
template <int BN>
struct FilterProblem {
  static constexpr bool kMnMajor = true;
  int I, J, tiles_j, NPQ, length;
  int64_t stride_i, stride_j;  // D[i, j] lands at partial[slice * I * J + i stride_i + j stride_j]
  float* partial;

  struct Where {
    int i0, j0, slice, begin;
  };
  __device__ Where locate() const {
    const int tile = blockIdx.x, slice = blockIdx.y;
    return {tile / tiles_j * kBM, tile % tiles_j * BN, slice, slice * length};
  }
  __device__ int slabs(const Where& w) const {
    return (min(NPQ - w.begin, length) + kSlab - 1) / kSlab;
  }
  // A: channels i0 .. i0+127 of R as two 64 x 64 boxes (one per warpgroup), B: channels j0 ..
  // j0+BN-1 of S as BN / 64 boxes, each box 64 pixels deep, 8192 bytes. A box that would lie
  // wholly past the channels is not asked for: its stale rows or columns of D are never stored.
  __device__ void fill(const Where& w, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_r, const CUtensorMap* map_s) const {
    const int npq = w.begin + slab * kSlab;
    const int boxes_a = w.i0 + 64 < I ? 2 : 1, boxes_b = min(BN / 64, (J - w.j0 + 63) / 64);
    wg::mbarrier_arrive_expect_tx(bar, uint32_t(boxes_a + boxes_b) * 8192);
    for (int h = 0; h < boxes_a; ++h) {
      wg::tma_load_2d(stage + 8192 * h, map_r, bar, w.i0 + 64 * h, npq);
    }
    for (int h = 0; h < boxes_b; ++h) {
      wg::tma_load_2d(stage + wg::Ring<BN>::A_BYTES + 8192 * h, map_s, bar, w.j0 + 64 * h, npq);
    }
  }
  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3.
  __device__ void store(const Where& w, int consumer, const float (&acc)[BN / 2]) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int i = w.i0 + consumer * 64 + warp * 16 + lane / 4;
    float* first = partial + int64_t(w.slice) * I * J;
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
  const void* r = f.rows_are_dy ? dy : x;
  const void* s = f.rows_are_dy ? x : dy;
  const CUtensorMap map_r = wg::matrix_map(type, r, NPQ, f.I, 64);
  const CUtensorMap map_s = wg::matrix_map(type, s, NPQ, f.J, 64);
  // partial[slice][c][k]: k = i (stride 1), c = j (stride K = I), or c = i, k = j.
  const int64_t stride_i = f.rows_are_dy ? 1 : f.J, stride_j = f.rows_are_dy ? f.I : 1;
  const dim3 grid(unsigned(f.tiles), unsigned(f.slices));
  auto go = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    const FilterProblem<BN> problem{f.I,      f.J,      f.tiles_j, int(NPQ),
                                    f.length, stride_i, stride_j,  partial};
    wg::launch<E, BN>(map_r, map_s, problem, grid, stream, "conv2d_tc_backward_filter (wgmma)");
  };
  f.bn == 128 ? go(std::integral_constant<int, 128>{}) : go(std::integral_constant<int, 64>{});
}

}  // namespace

bool wgmma_backward_filter_fits(const Conv2dGeometry& g) {
  return g.groups == 1 && g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 &&
         g.stride_w == 1 && g.C % 8 == 0 && g.K % 8 == 0;
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
