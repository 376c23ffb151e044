// Layout transforms, CUDA versions.
//
// Batched transpose, y[b, s, r] = x[b, r, s]:
//   TransposeVersion::naive  one thread per y element: writes coalesced, reads strided by S.
//   TransposeVersion::tiled  a block moves a 32 x 32 tile through shared memory: it reads 32 rows
//                            of x along s (coalesced), then writes 32 rows of y along r
//                            (coalesced); the tile is padded to 33 columns so that the
//                            transposed reads tile[tx][.] of a warp fall in 32 different banks.
//   batched_transpose with alpha and beta: the tiled kernel blending into y (transform_tensor).
// General permutation: one thread per y element, its x offset decoded from its index (writes
// coalesced, reads gathered). All are copies, so they equal the CPU bit for bit.
#include "core/error.h"
#include "kernels/common/map_cuda.cuh"
#include "kernels/layout/layout.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // a block is 32 x 8 threads; each thread moves 4 rows of a tile
// Enough blocks to fill an H100 several times over; beyond that, blocks loop over tiles.
constexpr int64_t kMaxTileBlocks = 1 << 16;

// v1: one thread per y element.
__global__ void transpose_naive(int64_t B, int64_t R, int64_t S, const float* __restrict__ x,
                                float* __restrict__ y) {
  const int64_t n = B * R * S;
  for (int64_t out = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; out < n;
       out += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = out % R, bs = out / R;
    const int64_t s = bs % S, b = bs / S;
    y[out] = x[(b * R + r) * S + s];
  }
}

// v2: tiles through shared memory with a padded row. kBlend: y = alpha * x^T + beta * y (y not
// read when beta is 0), for transform_tensor; without it a plain copy.
template <bool kBlend>
__global__ void transpose_tiled(int64_t B, int64_t R, int64_t S, const float* __restrict__ x,
                                float* __restrict__ y, float alpha, float beta) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tiles_r = (R + kTile - 1) / kTile, tiles_s = (S + kTile - 1) / kTile;
  const int64_t tiles = B * tiles_r * tiles_s;
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_s), rest = t % (tiles_r * tiles_s);
    const int64_t r0 = (rest / tiles_s) * kTile, s0 = (rest % tiles_s) * kTile;
    const float* xb = x + b * R * S;
    float* yb = y + b * R * S;
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, s = s0 + tx;
      if (r < R && s < S) tile[i][tx] = xb[r * S + s];
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t s = s0 + i, r = r0 + tx;
      if (s < S && r < R) {
        float* out = yb + s * R + r;
        if constexpr (kBlend) {
          *out = beta == 0.0f ? alpha * tile[tx][i] : alpha * tile[tx][i] + beta * *out;
        } else {
          *out = tile[tx][i];
        }
      }
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

// y's extents and, for each of y's axes, the stride of the x axis it reads.
struct PermuteAxes {
  int ndim;
  int64_t extent[kMaxPermuteAxes];
  int64_t stride[kMaxPermuteAxes];
};

__global__ void permute_general(int64_t n, PermuteAxes axes, const float* __restrict__ x,
                                float* __restrict__ y) {
  for (int64_t out = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; out < n;
       out += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = out, in = 0;
#pragma unroll
    for (int k = kMaxPermuteAxes - 1; k >= 0; --k) {
      if (k < axes.ndim) {
        in += (rest % axes.extent[k]) * axes.stride[k];
        rest /= axes.extent[k];
      }
    }
    y[out] = x[in];
  }
}

}  // namespace

void batched_transpose(int64_t B, int64_t R, int64_t S, const float* x, float* y,
                       TransposeVersion version, gpu::Stream stream) {
  const int64_t n = B * R * S;
  if (n == 0) return;
  if (version == TransposeVersion::naive) {
    transpose_naive<<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(B, R, S, x, y);
  } else {
    const int64_t tiles = B * ((R + kTile - 1) / kTile) * ((S + kTile - 1) / kTile);
    const int blocks = int(tiles < kMaxTileBlocks ? tiles : kMaxTileBlocks);
    transpose_tiled<false>
        <<<blocks, dim3(kTile, kTileRows), 0, stream>>>(B, R, S, x, y, 1.0f, 0.0f);
  }
  gpu::check_launch("batched_transpose");
}

void batched_transpose(int64_t B, int64_t R, int64_t S, float alpha, const float* x, float beta,
                       float* y, gpu::Stream stream) {
  const int64_t tiles = B * ((R + kTile - 1) / kTile) * ((S + kTile - 1) / kTile);
  if (tiles == 0) return;
  const int blocks = int(tiles < kMaxTileBlocks ? tiles : kMaxTileBlocks);
  transpose_tiled<true><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(B, R, S, x, y, alpha, beta);
  gpu::check_launch("batched_transpose (blended)");
}

void permute(int ndim, const int64_t* x_shape, const int* order, const float* x, float* y,
             gpu::Stream stream) {
  CREMA_CHECK(ndim >= 0 && ndim <= kMaxPermuteAxes, "cuda::permute takes at most 8 axes");
  PermuteAxes axes{};
  axes.ndim = ndim;
  int64_t x_stride[kMaxPermuteAxes], n = 1;
  for (int a = ndim - 1; a >= 0; --a) {
    x_stride[a] = n;
    n *= x_shape[a];
  }
  for (int k = 0; k < ndim; ++k) {
    axes.extent[k] = x_shape[order[k]];
    axes.stride[k] = x_stride[order[k]];
  }
  if (n == 0) return;
  permute_general<<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(n, axes, x, y);
  gpu::check_launch("permute");
}

}  // namespace crema::kernels::cuda
