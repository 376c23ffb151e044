// Convolution v3: pointwise geometries (1x1 filter, stride 1, no padding). The patch matrix of
// image n and group g is x[n, g's channels] itself, [Cg, H*W] with P*Q = H*W, so each pass is a
// plain GEMM per image and group over the tensors in place:
//
//   forward  y[n, g's K]  [Kg, HW] = w_g   [Kg, Cg] * x[n, g's C]  [Cg, HW]   + bias (epilogue)
//   data     dx[n, g's C] [Cg, HW] = w_g^T [Cg, Kg] * dy[n, g's K] [Kg, HW]
//
// All (image, group, tile) triples run in one launch: block x is image * tiles_n + column tile,
// block y is group * tiles_m + row tile. The operands are dense row-major matrices, read by
// kernels/tiles/block_tile.cuh's DenseLoader with float4s when H*W (and, for w, Cg) is a
// multiple of 4: none of v2's per-element patch arithmetic. The filter gradient sums over images, a reduction
// v2's split implicit GEMM already does with trivial patch arithmetic here, so v3 uses it.
// In tf32 and bf16 the same loaders feed convolution_mma.cuh's tensor-core loop (64 x 128 tiles)
// instead of the FFMA one; the filter gradient (v2's) stays fp32.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_mma.cuh"

namespace crema::kernels::cuda::pointwise {
namespace {

using implicit_gemm::aligned16;
using implicit_gemm::ConvParams;
using tile::TileShape;

// Where block (x, y) works: image n, group, the first row m0 and column n0 of its tile.
struct BlockTile {
  int n, group, m0, j0;
  template <class Cfg>
  __device__ static BlockTile of(int rows_per_group, int HW) {
    const int tiles_m = (rows_per_group + Cfg::BM - 1) / Cfg::BM;
    const int tiles_n = (HW + Cfg::BN - 1) / Cfg::BN;
    return {int(blockIdx.x) / tiles_n, int(blockIdx.y) / tiles_m,
            int(blockIdx.y) % tiles_m * Cfg::BM, int(blockIdx.x) % tiles_n * Cfg::BN};
  }
};

// Writes v[0 .. count) to row[j ..]: a float4 when `vec` (row 16-byte aligned, HW % 4 == 0).
__device__ __forceinline__ void store_row(float* row, int j, const float* v, int count, float add,
                                          bool vec) {
  if (count == 4 && vec) {
    *reinterpret_cast<float4*>(row + j) =
        make_float4(v[0] + add, v[1] + add, v[2] + add, v[3] + add);
    return;
  }
  for (int e = 0; e < count; ++e) row[j + e] = v[e] + add;
}

// The block's GEMM over inner indices [0, k_end) in MATH: FFMA tiles (fp32) or tensor cores.
template <class Cfg, GemmMath MATH, class LoadA, class LoadB, class Store>
__device__ __forceinline__ void block_gemm(LoadA& load_a, LoadB& load_b, int k_end,
                                           tile::SharedStorage<Cfg>& sm, int m0, int j0, int M,
                                           int N, Store& store) {
  if constexpr (MATH == GemmMath::fp32) {
    const tile::ThreadTile<Cfg> t(threadIdx.x);
    float acc[Cfg::TM][Cfg::TN] = {};
    tile::accumulate(load_a, load_b, 0, k_end, sm, t, acc);
    tile::finish(sm, t, acc, m0, j0, M, N, store);
  } else {
    static_assert(std::is_same_v<Cfg, conv_mma::Tile>, "tensor cores run conv_mma's tile");
    conv_mma::gemm<MATH == GemmMath::bf16>(load_a, load_b, 0, k_end, sm, m0, j0, M, N, store);
  }
}

// vec_w: w 16-byte aligned and Cg % 4 == 0; vec_hw: x and y 16-byte aligned and HW % 4 == 0.
template <class Cfg, GemmMath MATH>
__global__ void __launch_bounds__(Cfg::THREADS)
    forward_kernel(ConvParams p, const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ bias, float* __restrict__ y, bool vec_w, bool vec_hw) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const BlockTile b = BlockTile::of<Cfg>(p.Kg, p.HW);
  const int tid = threadIdx.x;
  // A = w_g [Kg, Cg] (row-major: k contiguous); B = x[n, g's C] [Cg, HW] (column j contiguous).
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, true> load_w{
      w + int64_t(b.group) * p.Kg * p.Cg, p.Cg, b.m0, p.Kg, p.Cg, vec_w, tid};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, false> load_x{
      x + (int64_t(b.n) * p.C + int64_t(b.group) * p.Cg) * p.HW,
      p.HW,
      b.j0,
      p.HW,
      p.Cg,
      vec_hw,
      tid};
  float* y_ng = y + (int64_t(b.n) * p.K + int64_t(b.group) * p.Kg) * p.HW;  // [Kg, HW]
  auto store = [&](int m, int j, const float* v, int count) {
    const float add = bias != nullptr ? bias[b.group * p.Kg + m] : 0.0f;
    store_row(y_ng + int64_t(m) * p.HW, j, v, count, add, vec_hw);
  };
  block_gemm<Cfg, MATH>(load_w, load_x, p.Cg, sm, b.m0, b.j0, p.Kg, p.HW, store);
}

// vec_w: w 16-byte aligned and Cg % 4 == 0; vec_hw: dy and dx 16-byte aligned and HW % 4 == 0.
template <class Cfg, GemmMath MATH>
__global__ void __launch_bounds__(Cfg::THREADS)
    backward_data_kernel(ConvParams p, const float* __restrict__ dy, const float* __restrict__ w,
                         float* __restrict__ dx, bool vec_w, bool vec_hw) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const BlockTile b = BlockTile::of<Cfg>(p.Cg, p.HW);
  const int tid = threadIdx.x;
  // A = w_g^T: element (c, k) is w_g[k*Cg + c] (c contiguous); B = dy[n, g's K] [Kg, HW].
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, false> load_w{
      w + int64_t(b.group) * p.Kg * p.Cg, p.Cg, b.m0, p.Cg, p.Kg, vec_w, tid};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, false> load_dy{
      dy + (int64_t(b.n) * p.K + int64_t(b.group) * p.Kg) * p.HW,
      p.HW,
      b.j0,
      p.HW,
      p.Kg,
      vec_hw,
      tid};
  float* dx_ng = dx + (int64_t(b.n) * p.C + int64_t(b.group) * p.Cg) * p.HW;  // [Cg, HW]
  auto store = [&](int m, int j, const float* v, int count) {
    store_row(dx_ng + int64_t(m) * p.HW, j, v, count, 0.0f, vec_hw);
  };
  block_gemm<Cfg, MATH>(load_w, load_dy, p.Kg, sm, b.m0, b.j0, p.Cg, p.HW, store);
}

// The grid of one pass: images * column tiles by groups * row tiles.
dim3 grid_of(const Conv2dGeometry& g, const ConvParams& p, int rows_per_group, int bm, int bn) {
  const int64_t x = int64_t(p.N) * ((p.HW + bn - 1) / bn);
  if (x > INT32_MAX) {
    throw Error("conv2d (pointwise) on CUDA: " + std::to_string(p.N) + " images of " +
                std::to_string(p.HW) + " pixels need more than 2^31 blocks; use a smaller batch");
  }
  return dim3(unsigned(x), implicit_gemm::grid_y(g, rows_per_group, bm));
}

template <class Cfg, GemmMath MATH = GemmMath::fp32>
void launch_forward(const Conv2dGeometry& g, const ConvParams& p, const float* x, const float* w,
                    const float* bias, float* y, gpu::Stream stream) {
  const bool vec_hw = aligned16(x) && aligned16(y) && p.HW % 4 == 0;
  forward_kernel<Cfg, MATH><<<grid_of(g, p, p.Kg, Cfg::BM, Cfg::BN), Cfg::THREADS, 0, stream>>>(
      p, x, w, bias, y, aligned16(w) && p.Cg % 4 == 0, vec_hw);
  gpu::check_launch("conv2d_forward (pointwise GEMM)");
}

template <class Cfg, GemmMath MATH = GemmMath::fp32>
void launch_backward_data(const Conv2dGeometry& g, const ConvParams& p, const float* dy,
                          const float* w, float* dx, gpu::Stream stream) {
  const bool vec_hw = aligned16(dy) && aligned16(dx) && p.HW % 4 == 0;
  backward_data_kernel<Cfg, MATH>
      <<<grid_of(g, p, p.Cg, Cfg::BM, Cfg::BN), Cfg::THREADS, 0, stream>>>(
          p, dy, w, dx, aligned16(w) && p.Cg % 4 == 0, vec_hw);
  gpu::check_launch("conv2d_backward_data (pointwise GEMM)");
}

}  // namespace

// Tiles (fp32): the GEMM's cost estimate over one image's [rows, HW] result, N * groups copies of
// it. tf32 and bf16 run conv_mma's one tile.
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream, GemmMath math) {
  const ConvParams p = implicit_gemm::params_of(g);
  if (math == GemmMath::tf32) {
    return launch_forward<conv_mma::Tile, GemmMath::tf32>(g, p, x, w, bias, y, stream);
  }
  if (math == GemmMath::bf16) {
    return launch_forward<conv_mma::Tile, GemmMath::bf16>(g, p, x, w, bias, y, stream);
  }
  switch (tile::choose_tile(p.Kg, p.HW, g.groups * g.N, TileShape::small)) {
    case TileShape::large:
      return launch_forward<tile::Large>(g, p, x, w, bias, y, stream);
    case TileShape::medium:
      return launch_forward<tile::Medium>(g, p, x, w, bias, y, stream);
    default:
      return launch_forward<tile::Small>(g, p, x, w, bias, y, stream);
  }
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream, GemmMath math) {
  const ConvParams p = implicit_gemm::params_of(g);
  if (math == GemmMath::tf32) {
    return launch_backward_data<conv_mma::Tile, GemmMath::tf32>(g, p, dy, w, dx, stream);
  }
  if (math == GemmMath::bf16) {
    return launch_backward_data<conv_mma::Tile, GemmMath::bf16>(g, p, dy, w, dx, stream);
  }
  switch (tile::choose_tile(p.Cg, p.HW, g.groups * g.N, TileShape::small)) {
    case TileShape::large:
      return launch_backward_data<tile::Large>(g, p, dy, w, dx, stream);
    case TileShape::medium:
      return launch_backward_data<tile::Medium>(g, p, dy, w, dx, stream);
    default:
      return launch_backward_data<tile::Small>(g, p, dy, w, dx, stream);
  }
}

}  // namespace crema::kernels::cuda::pointwise

// v3's record: pointwise geometries only; the filter gradient is v2's.
namespace crema::kernels::records {

extern const ConvAlgorithm pointwise_gemm{
    "pointwise_gemm",
    3,
    DType::f32,
    Layout::nchw,
    [](ConvPass, const Conv2dGeometry& g) { return g.pointwise(); },
    "a 1x1 filter with stride 1 and no padding",
    computes_in_every_math,
    cuda::implicit_gemm::filter_workspace_only,
    [](const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y, float*,
       gpu::Stream stream,
       cuda::GemmMath math) { cuda::pointwise::forward(g, x, w, bias, y, stream, math); },
    [](const Conv2dGeometry& g, const float* dy, const float* w, float* dx, float*,
       gpu::Stream stream,
       cuda::GemmMath math) { cuda::pointwise::backward_data(g, dy, w, dx, stream, math); },
    cuda::implicit_gemm::backward_filter};

}  // namespace crema::kernels::records
