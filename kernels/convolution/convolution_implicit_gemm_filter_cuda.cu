// Convolution v2, backward filter (and bias): the implicit GEMM
//
//   dw_g[Kg, CRS+1] += dy_g[Kg, N*PQ] * [patches_g; ones]^T[N*PQ, CRS+1]
//
// per group g, whose extra column of ones makes the last output column the bias gradient
// (convolution_implicit_gemm_cuda.cu has the notation). The result is small and the inner
// dimension N*P*Q long (LeNet's conv1: 20 x 26 over 36864 at N = 64), so N*P*Q is split over
// blocks (grid z); each split writes its partial tile to the workspace and a second kernel adds
// the splits in split order into dw and db. No atomics: the same bits every run. In tf32 and bf16
// the same loaders feed convolution_mma.cuh's tensor-core loop (64 x 128 tiles) over the same
// number of splits (so the workspace does not depend on the math).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_mma.cuh"

namespace crema::kernels::cuda::implicit_gemm {
namespace {

using tile::kPad;
using tile::TileShape;

// ---- backward filter: A = dy_g [Kg, N*PQ], B = [patches_g; ones]^T [N*PQ, CRS+1] ------------

// Both loaders give thread t the inner index j = k0 + t % BK of each slab (one (n, p, q) per
// slab; consecutive threads read consecutive q), A for output channels t / BK + i * THREADS / BK,
// B for patch rows (c, r, s) t / BK + i * THREADS / BK, whose offsets are found once.
template <int BM, int BK, int THREADS>
struct OutputGradientRowsLoader {
  static constexpr int PER_THREAD = BM * BK / THREADS, ROW_STEP = THREADS / BK;
  static_assert(THREADS % BK == 0 && PER_THREAD * THREADS == BM * BK, "slab must split evenly");

  ConvParams p;
  const float* channels;  // dy[0, g*Kg]
  int m0, j_end, inner, row;
  float regs[PER_THREAD];

  __device__ OutputGradientRowsLoader(const ConvParams& params, const float* dy, int group, int m0_,
                                      int j_end_, int tid)
      : p(params),
        channels(dy + int64_t(group) * p.Kg * p.PQ),
        m0(m0_),
        j_end(j_end_),
        inner(tid % BK),
        row(tid / BK) {}
  __device__ void fetch(int k0) {
    const int j = k0 + inner;
    const float* base = nullptr;  // dy[n, g*Kg, p, q]
    if (j < j_end) {
      int n, pq;
      p.by_PQ.divmod(j, n, pq);
      base = channels + int64_t(n) * p.K * p.PQ + pq;
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int k = m0 + row + i * ROW_STEP;
      regs[i] = base != nullptr && k < p.Kg ? base[k * p.PQ] : 0.0f;
    }
  }
  __device__ void stash(float (*slab)[BM + kPad]) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) slab[inner][row + i * ROW_STEP] = regs[i];
  }
};

template <int BN, int BK, int THREADS>
struct PatchColumnsLoader {
  static constexpr int PER_THREAD = BK * BN / THREADS, COL_STEP = THREADS / BK;
  static_assert(THREADS % BK == 0 && PER_THREAD * THREADS == BK * BN, "slab must split evenly");
  static constexpr int kOnes = -1, kZeros = -2;  // offset of the bias column and of padding

  ConvParams p;
  const float* images;  // x[0, g*Cg]
  int j_end, inner, col;
  int offset[PER_THREAD];              // c*H*W of the column's patch row, or kOnes / kZeros
  int dh[PER_THREAD], dw[PER_THREAD];  // r*dilation_h, s*dilation_w
  float regs[PER_THREAD];

  __device__ PatchColumnsLoader(const ConvParams& params, const float* x, int group, int n0,
                                int j_end_, bool with_bias, int tid)
      : p(params),
        images(x + int64_t(group) * p.Cg * p.HW),
        j_end(j_end_),
        inner(tid % BK),
        col(tid / BK) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int crs = n0 + col + i * COL_STEP;
      offset[i] = crs == p.CRS && with_bias ? kOnes : kZeros;
      dh[i] = dw[i] = 0;
      if (crs < p.CRS) {
        int c, rs, r, s;
        p.by_RS.divmod(crs, c, rs);
        p.by_S.divmod(rs, r, s);
        offset[i] = c * p.HW;
        dh[i] = r * p.dilation_h;
        dw[i] = s * p.dilation_w;
      }
    }
  }
  __device__ void fetch(int k0) {
    const int j = k0 + inner;
    const float* image = nullptr;  // x[n, g*Cg]
    int h0 = 0, w0 = 0;
    if (j < j_end) {
      int n, pq, out_p, out_q;
      p.by_PQ.divmod(j, n, pq);
      p.by_Q.divmod(pq, out_p, out_q);
      image = images + int64_t(n) * p.C * p.HW;
      h0 = out_p * p.stride_h - p.pad_h;
      w0 = out_q * p.stride_w - p.pad_w;
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      float v = 0.0f;
      if (image != nullptr) {
        const int h = h0 + dh[i], w = w0 + dw[i];
        if (offset[i] >= 0) {
          if (unsigned(h) < unsigned(p.H) && unsigned(w) < unsigned(p.W)) {
            v = image[offset[i] + h * p.W + w];
          }
        } else if (offset[i] == kOnes) {
          v = 1.0f;
        }
      }
      regs[i] = v;
    }
  }
  __device__ void stash(float (*slab)[BN + kPad]) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) slab[inner][col + i * COL_STEP] = regs[i];
  }
};

// Block (x, y, z) computes tile x of the CRS(+1) columns, tile y % tiles_m of group y / tiles_m's
// output channels, over split z of N*P*Q (j in [z*chunk, (z+1)*chunk)). With one split it adds
// into dw and db itself; otherwise it writes partial[z][k][column] (columns = CRS + with_bias).
template <class Cfg, GemmMath MATH>
__global__ void __launch_bounds__(Cfg::THREADS)
    backward_filter_kernel(ConvParams p, const float* __restrict__ x, const float* __restrict__ dy,
                           int columns, int chunk, float* __restrict__ dw, float* __restrict__ db,
                           float* __restrict__ partial) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const int tiles_m = (p.Kg + Cfg::BM - 1) / Cfg::BM;
  const int group = blockIdx.y / tiles_m;
  const int m0 = blockIdx.y % tiles_m * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int split = blockIdx.z;
  const int j_begin = split * chunk;
  const int j_end = chunk < p.N * p.PQ - j_begin ? j_begin + chunk : p.N * p.PQ;
  const int tid = threadIdx.x;
  OutputGradientRowsLoader<Cfg::BM, Cfg::BK, Cfg::THREADS> load_dy(p, dy, group, m0, j_end, tid);
  PatchColumnsLoader<Cfg::BN, Cfg::BK, Cfg::THREADS> load_x(p, x, group, n0, j_end, columns > p.CRS,
                                                            tid);
  auto store = [&](int m, int column, const float* v, int count) {
    const int k = group * p.Kg + m;
    for (int e = 0; e < count; ++e) {
      const int crs = column + e;
      if (partial != nullptr) {
        partial[(int64_t(split) * p.K + k) * columns + crs] = v[e];
      } else if (crs < p.CRS) {
        dw[int64_t(k) * p.CRS + crs] += v[e];
      } else {
        db[k] += v[e];
      }
    }
  };
  if constexpr (MATH == GemmMath::fp32) {
    const tile::ThreadTile<Cfg> t(tid);
    float acc[Cfg::TM][Cfg::TN] = {};
    tile::accumulate(load_dy, load_x, j_begin, j_end, sm, t, acc);
    tile::finish(sm, t, acc, m0, n0, p.Kg, columns, store);
  } else {
    static_assert(std::is_same_v<Cfg, conv_mma::Tile>, "tensor cores run conv_mma's tile");
    conv_mma::gemm<MATH == GemmMath::bf16>(load_dy, load_x, j_begin, j_end, sm, m0, n0, p.Kg,
                                           columns, store);
  }
}

// dw[k, crs] += sum over splits z, in order, of partial[z][k][crs]; db[k] likewise from the
// last column. Block: 32 outputs x 8 lanes; lane l adds splits l, l+8, ..., then lane 0 adds the
// 8 lane sums in lane order.
constexpr int kReduceOutputs = 32, kReduceLanes = 8;

__global__ void reduce_splits_kernel(const float* __restrict__ partial, int splits, int K,
                                     int columns, int CRS, float* __restrict__ dw,
                                     float* __restrict__ db) {
  __shared__ float lanes[kReduceLanes][kReduceOutputs + 1];
  const int64_t outputs = int64_t(K) * columns;
  const int64_t o = blockIdx.x * int64_t(kReduceOutputs) + threadIdx.x;
  float sum = 0.0f;
  if (o < outputs) {
    for (int z = threadIdx.y; z < splits; z += kReduceLanes) sum += partial[z * outputs + o];
  }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || o >= outputs) return;
  for (int l = 1; l < kReduceLanes; ++l) sum += lanes[l][threadIdx.x];
  const int k = int(o / columns), crs = int(o % columns);
  if (crs < CRS) {
    dw[int64_t(k) * CRS + crs] += sum;
  } else {
    db[k] += sum;
  }
}

// How the filter gradient is cut: a tile shape for the small [Kg, CRS+1] result (padding and the
// tile's penalty only: the splits fill the machine), then enough splits of N*P*Q for about two
// blocks per SM, each at least kMinSlabs slabs long.
struct FilterPlan {
  TileShape shape;
  int columns;  // CRS + 1 with a bias gradient, CRS without
  int splits;
  int chunk;  // N*P*Q positions per split, a multiple of the slab depth
};

FilterPlan filter_plan(const Conv2dGeometry& g, bool with_bias) {
  constexpr int64_t kTargetBlocks = 2 * 132, kMinSlabs = 4;
  const int64_t Kg = g.K / g.groups, CRS = g.C / g.groups * g.R * g.S, NPQ = g.N * g.P() * g.Q();
  FilterPlan plan;
  plan.columns = int(CRS + (with_bias ? 1 : 0));
  plan.shape = tile::choose_tile(Kg, plan.columns, 0, TileShape::small);
  const tile::TileInfo info = tile::tile_info(plan.shape);
  const int64_t tiles =
      g.groups * ((Kg + info.bm - 1) / info.bm) * ((plan.columns + info.bn - 1) / info.bn);
  const int64_t slabs = (NPQ + info.bk - 1) / info.bk;
  const int64_t wanted = (kTargetBlocks + tiles - 1) / tiles;
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, slabs / kMinSlabs));
  const int64_t slabs_per_split = (slabs + splits - 1) / splits;
  plan.chunk = int(slabs_per_split * info.bk);
  plan.splits = int((slabs + slabs_per_split - 1) / slabs_per_split);
  return plan;
}

// The tensor cores' cut: the fp32 plan's number of splits (at most), chunks a multiple of
// conv_mma::Tile's slab depth.
FilterPlan mma_plan(const Conv2dGeometry& g, bool with_bias) {
  FilterPlan plan = filter_plan(g, with_bias);
  const int64_t NPQ = g.N * g.P() * g.Q(), bk = conv_mma::Tile::BK;
  const int64_t slabs = (NPQ + bk - 1) / bk;
  const int64_t slabs_per_split = (slabs + plan.splits - 1) / plan.splits;
  plan.chunk = int(slabs_per_split * bk);
  plan.splits = int((slabs + slabs_per_split - 1) / slabs_per_split);
  return plan;
}

template <class Cfg, GemmMath MATH = GemmMath::fp32>
void launch_backward_filter(const Conv2dGeometry& g, const ConvParams& p, const FilterPlan& plan,
                            const float* x, const float* dy, float* dw, float* db, float* workspace,
                            gpu::Stream stream) {
  const dim3 grid(unsigned((plan.columns + Cfg::BN - 1) / Cfg::BN), grid_y(g, p.Kg, Cfg::BM),
                  unsigned(plan.splits));
  float* partial = plan.splits > 1 ? workspace : nullptr;
  backward_filter_kernel<Cfg, MATH>
      <<<grid, Cfg::THREADS, 0, stream>>>(p, x, dy, plan.columns, plan.chunk, dw, db, partial);
  gpu::check_launch("conv2d_backward_filter (implicit GEMM)");
  if (partial == nullptr) return;
  const int64_t outputs = int64_t(p.K) * plan.columns;
  const dim3 reduce_grid(unsigned((outputs + kReduceOutputs - 1) / kReduceOutputs));
  reduce_splits_kernel<<<reduce_grid, dim3(kReduceOutputs, kReduceLanes), 0, stream>>>(
      partial, plan.splits, p.K, plan.columns, p.CRS, dw, db);
  gpu::check_launch("conv2d_backward_filter (sum of splits)");
}

}  // namespace

size_t backward_filter_workspace(const Conv2dGeometry& g, bool with_bias) {
  const FilterPlan plan = filter_plan(g, with_bias);
  return plan.splits > 1 ? size_t(plan.splits) * size_t(g.K) * size_t(plan.columns) : 0;
}

size_t filter_workspace_only(ConvPass pass, const Conv2dGeometry& g, bool with_bias) {
  return pass == ConvPass::backward_filter ? backward_filter_workspace(g, with_bias) : 0;
}

void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream, GemmMath math) {
  const ConvParams p = params_of(g);
  if (math != GemmMath::fp32) {
    const FilterPlan plan = mma_plan(g, db != nullptr);
    if (math == GemmMath::tf32) {
      return launch_backward_filter<conv_mma::Tile, GemmMath::tf32>(g, p, plan, x, dy, dw, db,
                                                                    workspace, stream);
    }
    return launch_backward_filter<conv_mma::Tile, GemmMath::bf16>(g, p, plan, x, dy, dw, db,
                                                                  workspace, stream);
  }
  const FilterPlan plan = filter_plan(g, db != nullptr);
  switch (plan.shape) {
    case TileShape::large:
      return launch_backward_filter<tile::Large>(g, p, plan, x, dy, dw, db, workspace, stream);
    case TileShape::medium:
      return launch_backward_filter<tile::Medium>(g, p, plan, x, dy, dw, db, workspace, stream);
    default:
      return launch_backward_filter<tile::Small>(g, p, plan, x, dy, dw, db, workspace, stream);
  }
}

}  // namespace crema::kernels::cuda::implicit_gemm
