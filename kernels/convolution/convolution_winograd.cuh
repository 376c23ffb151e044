// Winograd convolution F(m x m, 3 x 3), v5 (m = 2) and v6 (m = 4): the transforms and the batched
// GEMM that forward / backward data (convolution_winograd_cuda.cu) and the filter gradient
// (convolution_winograd_filter_cuda.cu) share. Included by those two files only.
//
// Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks" (2016). In one dimension
// F(m, 3) gets m outputs of a 3-tap correlation y_i = sum_r d_{i+r} g_r from alpha = m + 2
// inputs with alpha multiplications: y = A^T [(G g) .* (B^T d)]. Nested in two dimensions, for
// one m x m output tile and its alpha x alpha input tile d:
//
//   Y = A^T [ (G g G^T) .* (B^T d B) ] A
//
// Summed over input channels, the element-wise product at each of the alpha^2 positions xi is a
// matrix product over channels, so a whole convolution is (t: a tile (n, tile row, tile column)):
//
//   U[xi][k][c] = (G w[k, c] G^T)[xi]                  filter transform
//   V[xi][c][t] = (B^T d[n, c, tile t] B)[xi]           input transform
//   M[xi][k][t] = sum_c U[xi][k][c] V[xi][c][t]         alpha^2 GEMMs (per group)
//   y[n, k, tile t] = A^T M[.][k][t] A                  output transform
//
// F(2x2,3x3) does 16 multiplies per 4 outputs where direct convolution does 36 (2.25x fewer);
// F(4x4,3x3) 36 per 16 where direct does 144 (4x fewer). The price: the transforms, and rounding
// in them that grows with alpha (both stay near 1e-6 relative in fp32 on uniform data; tests).
//
// Interpolation points: F(2,3) 0, 1, -1 and infinity (Lavin's matrices); F(4,3) 0, 1, -1, 1/2,
// -1/2 and infinity, with the rows of B^T scaled to small integers (the scale moves into G, whose
// transform runs once per filter). Each function below is one matrix written out, so the
// compiler sees no multiplies by 0 or 1.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/convolution/convolution_mma.cuh"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda::winograd {

template <int M>
struct Transform;

template <>
struct Transform<2> {
  static constexpr int kAlpha = 4;
  // B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
  __device__ static void input(const float (&d)[4], float (&o)[4]) {
    o[0] = d[0] - d[2], o[1] = d[1] + d[2], o[2] = d[2] - d[1], o[3] = d[1] - d[3];
  }
  // G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
  __device__ static void filter(const float (&g)[3], float (&o)[4]) {
    o[0] = g[0], o[1] = 0.5f * (g[0] + g[1] + g[2]), o[2] = 0.5f * (g[0] - g[1] + g[2]);
    o[3] = g[2];
  }
  // A^T = [1 1 1 0; 0 1 -1 -1]
  __device__ static void output(const float (&v)[4], float (&o)[2]) {
    o[0] = v[0] + v[1] + v[2], o[1] = v[1] - v[2] - v[3];
  }
  // A (the filter gradient's transform of dy)
  __device__ static void output_adjoint(const float (&y)[2], float (&o)[4]) {
    o[0] = y[0], o[1] = y[0] + y[1], o[2] = y[0] - y[1], o[3] = -y[1];
  }
  // G^T (the filter gradient's inverse transform)
  __device__ static void filter_adjoint(const float (&v)[4], float (&o)[3]) {
    o[0] = v[0] + 0.5f * (v[1] + v[2]), o[1] = 0.5f * (v[1] - v[2]);
    o[2] = 0.5f * (v[1] + v[2]) + v[3];
  }
};

template <>
struct Transform<4> {
  static constexpr int kAlpha = 6;
  // B^T = [1 0 -5 0 4 0; 0 -1 -1 4 4 0; 0 1 -1 -4 4 0; 0 -1 -2 1 2 0; 0 1 -2 -1 2 0;
  //        0 1 0 -5 0 4]
  __device__ static void input(const float (&d)[6], float (&o)[6]) {
    o[0] = d[0] - 5.0f * d[2] + 4.0f * d[4];
    o[1] = 4.0f * (d[3] + d[4]) - d[1] - d[2];
    o[2] = 4.0f * (d[4] - d[3]) + d[1] - d[2];
    o[3] = d[3] - d[1] + 2.0f * (d[4] - d[2]);
    o[4] = d[1] - d[3] + 2.0f * (d[4] - d[2]);
    o[5] = d[1] - 5.0f * d[3] + 4.0f * d[5];
  }
  // G = [1 0 0; 1/6 1/6 1/6; 1/6 -1/6 1/6; -4/3 -2/3 -1/3; -4/3 2/3 -1/3; 0 0 1/4]
  __device__ static void filter(const float (&g)[3], float (&o)[6]) {
    const float even = g[0] + g[2], far = 4.0f * g[0] + g[2];
    o[0] = g[0];
    o[1] = (even + g[1]) / 6.0f, o[2] = (even - g[1]) / 6.0f;
    o[3] = -(far + 2.0f * g[1]) / 3.0f, o[4] = -(far - 2.0f * g[1]) / 3.0f;
    o[5] = 0.25f * g[2];
  }
  // A^T = [1 1 1 1 1 0; 0 1 -1 1/2 -1/2 0; 0 1 1 1/4 1/4 0; 0 1 -1 1/8 -1/8 1]
  __device__ static void output(const float (&v)[6], float (&o)[4]) {
    const float s1 = v[1] + v[2], d1 = v[1] - v[2], s2 = v[3] + v[4], d2 = v[3] - v[4];
    o[0] = v[0] + s1 + s2;
    o[1] = d1 + 0.5f * d2;
    o[2] = s1 + 0.25f * s2;
    o[3] = d1 + 0.125f * d2 + v[5];
  }
  // A
  __device__ static void output_adjoint(const float (&y)[4], float (&o)[6]) {
    const float even = y[0] + y[2], odd = y[1] + y[3];
    const float even_h = y[0] + 0.25f * y[2], odd_h = 0.5f * y[1] + 0.125f * y[3];
    o[0] = y[0];
    o[1] = even + odd, o[2] = even - odd;
    o[3] = even_h + odd_h, o[4] = even_h - odd_h;
    o[5] = y[3];
  }
  // G^T
  __device__ static void filter_adjoint(const float (&v)[6], float (&o)[3]) {
    const float s1 = (v[1] + v[2]) / 6.0f, d1 = (v[1] - v[2]) / 6.0f;
    const float s2 = (v[3] + v[4]) / 3.0f, d2 = (v[3] - v[4]) / 3.0f;
    o[0] = v[0] + s1 - 4.0f * s2;
    o[1] = d1 - 2.0f * d2;
    o[2] = s1 - s2 + 0.25f * v[5];
  }
};

// out = T in T^T for a square tile: the 1-D transform `f` (IN -> OUT points) applied to every
// row, then to every column.
template <int IN, int OUT, class F>
__device__ __forceinline__ void transform_2d(const float (&in)[IN][IN], float (&out)[OUT][OUT],
                                             F f) {
  float rows[IN][OUT];
#pragma unroll
  for (int i = 0; i < IN; ++i) f(in[i], rows[i]);
#pragma unroll
  for (int j = 0; j < OUT; ++j) {
    float column[IN], result[OUT];
#pragma unroll
    for (int i = 0; i < IN; ++i) column[i] = rows[i][j];
    f(column, result);
#pragma unroll
    for (int i = 0; i < OUT; ++i) out[i][j] = result[i];
  }
}

// The tiles of a convolution's output: tile t = (n, tile row, tile column) covers outputs
// [row*m, row*m + m) x [column*m, ...) of image n; its input tile starts m*row - pad_h, ...
struct TileGrid {
  int tiles_h, tiles_w, T;  // T = N * tiles_h * tiles_w
  int64_t ld;               // row length of V and M: T rounded up to 4 (float4 rows)
};

inline TileGrid tile_grid(int64_t N, int64_t P, int64_t Q, int m) {
  TileGrid grid;
  grid.tiles_h = int((P + m - 1) / m), grid.tiles_w = int((Q + m - 1) / m);
  grid.T = int(N * grid.tiles_h * grid.tiles_w);
  grid.ld = (int64_t(grid.T) + 3) / 4 * 4;
  return grid;
}

// V[xi][c][t] = (B^T d B)[xi] for every channel c < C and tile t of src [N, C, H, W] (positions
// outside the image read 0). One thread per (c, t); consecutive threads take consecutive tiles.
template <int M>
__global__ void input_transform_kernel(const float* __restrict__ src, int C, int H, int W,
                                       int pad_h, int pad_w, TileGrid grid, float* __restrict__ V) {
  constexpr int A = Transform<M>::kAlpha;
  const int64_t total = int64_t(C) * grid.T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(i / grid.T), t = int(i % grid.T);
    const int per_image = grid.tiles_h * grid.tiles_w;
    const int n = t / per_image, tile = t % per_image;
    const int h0 = tile / grid.tiles_w * M - pad_h, w0 = tile % grid.tiles_w * M - pad_w;
    const float* image = src + (int64_t(n) * C + c) * H * W;
    float d[A][A], v[A][A];
#pragma unroll
    for (int r = 0; r < A; ++r) {
#pragma unroll
      for (int s = 0; s < A; ++s) {
        const int h = h0 + r, w = w0 + s;
        d[r][s] = unsigned(h) < unsigned(H) && unsigned(w) < unsigned(W) ? image[h * W + w] : 0.0f;
      }
    }
    transform_2d(d, v, [](const float(&in)[A], float(&out)[A]) { Transform<M>::input(in, out); });
#pragma unroll
    for (int xi = 0; xi < A * A; ++xi) V[(int64_t(xi) * C + c) * grid.ld + t] = v[xi / A][xi % A];
  }
}

// C_z[rows, cols] = A_z[rows, inner] B_z[inner, cols] for z = (split, batch) over a grid of
// groups: the alpha^2 GEMMs of a Winograd convolution in one launch. A is row-major (inner
// contiguous); B is [inner][cols] (B_K_CONTIGUOUS false) or [cols][inner] (true). Block
// (x, y, z): column tile x, group y / tiles_m and its row tile y % tiles_m, batch z % batches,
// inner positions [split*chunk, (split+1)*chunk) for split z / batches (chunk: a multiple of BK).
struct Operand {
  const float* p;
  int64_t ld, batch_stride, group_stride;
};

struct BatchedGemm {
  int rows, cols, inner, batches, chunk;
  Operand a, b;
  float* c;
  int64_t ldc, c_batch, c_group, c_split;
  bool vec_a, vec_b, vec_c;  // float4 loads / stores (16-byte aligned, strides multiples of 4)
};

// Blocks per SM the registers must allow: 2 for 8 x 8 micro-tiles (about 128 registers a thread;
// one more would leave one block of 256 threads per SM), 4 for the smaller ones.
template <class Cfg>
constexpr int kMinBlocks = Cfg::TM* Cfg::TN >= 64 ? 2 : 4;

// One block's tile of one batch and split, in MATH: FFMA tiles (fp32) or conv_mma's tensor cores
// (tf32, bf16; Cfg is then conv_mma::Tile).
template <class Cfg, bool B_K_CONTIGUOUS, GemmMath MATH>
__device__ __forceinline__ void batched_gemm_block(const BatchedGemm& p) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const int tiles_m = (p.rows + Cfg::BM - 1) / Cfg::BM;
  const int group = blockIdx.y / tiles_m;
  const int m0 = blockIdx.y % tiles_m * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int batch = blockIdx.z % p.batches, split = blockIdx.z / p.batches;
  const int k_begin = split * p.chunk;
  const int k_end = p.inner - k_begin < p.chunk ? p.inner : k_begin + p.chunk;
  const int tid = threadIdx.x;
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, true> load_a{
      p.a.p + batch * p.a.batch_stride + group * p.a.group_stride,
      p.a.ld,
      m0,
      p.rows,
      k_end,
      p.vec_a,
      tid};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, B_K_CONTIGUOUS> load_b{
      p.b.p + batch * p.b.batch_stride + group * p.b.group_stride,
      p.b.ld,
      n0,
      p.cols,
      k_end,
      p.vec_b,
      tid};
  float* c = p.c + split * p.c_split + batch * p.c_batch + group * p.c_group;
  auto store = [&](int m, int n, const float* v, int count) {
    float* dst = c + m * p.ldc + n;
    if (count == 4 && p.vec_c) {
      *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
    for (int e = 0; e < count; ++e) dst[e] = v[e];
  };
  if constexpr (MATH == GemmMath::fp32) {
    const tile::ThreadTile<Cfg> t(tid);
    float acc[Cfg::TM][Cfg::TN] = {};
    tile::accumulate(load_a, load_b, k_begin, k_end, sm, t, acc);
    tile::finish(sm, t, acc, m0, n0, p.rows, p.cols, store);
  } else {
    conv_mma::gemm<MATH == GemmMath::bf16>(load_a, load_b, k_begin, k_end, sm, m0, n0, p.rows,
                                           p.cols, store);
  }
}

template <class Cfg, bool B_K_CONTIGUOUS>
__global__ void __launch_bounds__(Cfg::THREADS, kMinBlocks<Cfg>)
    batched_gemm_kernel(BatchedGemm p) {
  batched_gemm_block<Cfg, B_K_CONTIGUOUS, GemmMath::fp32>(p);
}

// Two blocks per SM: 32 accumulators, the fragments and the next slab need about 100 registers.
template <bool B_K_CONTIGUOUS, GemmMath MATH>
__global__ void __launch_bounds__(conv_mma::Tile::THREADS, 2)
    batched_gemm_mma_kernel(BatchedGemm p) {
  batched_gemm_block<conv_mma::Tile, B_K_CONTIGUOUS, MATH>(p);
}

// 64 x 256 tiles with 8 x 8 per thread (Large's micro-tile): the shape for 64 output channels
// over many tiles. It needs 16 shared loads per 64 FMAs where the 64 x 128 tile with 4 x 8 per
// thread it replaced needed 12 per 32: the 64-channel forward GEMM's shared-memory pipe went from
// 86% to 58% busy, at the same time (ncu, H200; README.md).
using Wide = tile::Config<64, 256, 8, 8, 8, 1>;

enum class GemmTile { small, medium, wide, large };

// Rows up to 32: Small (k split in the block); up to 64: Medium or, with more than 64 columns,
// Wide; more: Large.
inline GemmTile gemm_tile(int rows, int cols) {
  if (rows <= 32) return GemmTile::small;
  if (rows <= 64) return cols <= 64 ? GemmTile::medium : GemmTile::wide;
  return GemmTile::large;
}

inline tile::TileInfo gemm_tile_info(GemmTile shape) {
  switch (shape) {
    case GemmTile::small:
      return tile::tile_info(tile::TileShape::small);
    case GemmTile::medium:
      return tile::tile_info(tile::TileShape::medium);
    case GemmTile::wide:
      return {Wide::BM, Wide::BN, Wide::BK, 1.0};
    case GemmTile::large:
      break;
  }
  return tile::tile_info(tile::TileShape::large);
}

template <class Cfg, bool B_K_CONTIGUOUS>
void launch_gemm(const BatchedGemm& p, int groups, int splits, gpu::Stream stream) {
  const dim3 grid(unsigned((p.cols + Cfg::BN - 1) / Cfg::BN),
                  unsigned(groups * ((p.rows + Cfg::BM - 1) / Cfg::BM)),
                  unsigned(p.batches * splits));
  batched_gemm_kernel<Cfg, B_K_CONTIGUOUS><<<grid, Cfg::THREADS, 0, stream>>>(p);
  gpu::check_launch("conv2d (Winograd: batched GEMM)");
}

template <bool B_K_CONTIGUOUS, GemmMath MATH>
void launch_gemm_mma(const BatchedGemm& p, int groups, int splits, gpu::Stream stream) {
  using Cfg = conv_mma::Tile;
  const dim3 grid(unsigned((p.cols + Cfg::BN - 1) / Cfg::BN),
                  unsigned(groups * ((p.rows + Cfg::BM - 1) / Cfg::BM)),
                  unsigned(p.batches * splits));
  batched_gemm_mma_kernel<B_K_CONTIGUOUS, MATH><<<grid, Cfg::THREADS, 0, stream>>>(p);
  gpu::check_launch("conv2d (Winograd: batched GEMM on tensor cores)");
}

// `shape` picks the FFMA tile (fp32); tf32 and bf16 run conv_mma's one tile.
template <bool B_K_CONTIGUOUS>
void run_gemm(GemmTile shape, const BatchedGemm& p, int groups, int splits, gpu::Stream stream,
              GemmMath math) {
  if (math == GemmMath::tf32) {
    return launch_gemm_mma<B_K_CONTIGUOUS, GemmMath::tf32>(p, groups, splits, stream);
  }
  if (math == GemmMath::bf16) {
    return launch_gemm_mma<B_K_CONTIGUOUS, GemmMath::bf16>(p, groups, splits, stream);
  }
  switch (shape) {
    case GemmTile::small:
      return launch_gemm<tile::Small, B_K_CONTIGUOUS>(p, groups, splits, stream);
    case GemmTile::medium:
      return launch_gemm<tile::Medium, B_K_CONTIGUOUS>(p, groups, splits, stream);
    case GemmTile::wide:
      return launch_gemm<Wide, B_K_CONTIGUOUS>(p, groups, splits, stream);
    case GemmTile::large:
      return launch_gemm<tile::Large, B_K_CONTIGUOUS>(p, groups, splits, stream);
  }
}

inline bool vec_ok(const float* p, std::initializer_list<int64_t> strides) {
  bool ok = reinterpret_cast<uintptr_t>(p) % 16 == 0;
  for (int64_t s : strides) ok = ok && s % 4 == 0;
  return ok;
}

inline int64_t round_up4(int64_t n) {
  return (n + 3) / 4 * 4;
}

}  // namespace crema::kernels::cuda::winograd
