// convert on the GPU: transpose_tiled's 32 x 32 tiles (layout_cuda.cu) with a type change: each
// element is widened to float at the load (exact for bf16 and f16) and rounded once at the store
// (from_float, the host's rounding), so the GPU gives the CPU's bits. R = 1 or S = 1 (a
// same-layout call) is a plain converting copy: a grid-stride loop, one element per step.
// Few rows (R <= kThinRows, e.g. NCHW images with C = 3 going to NHWC) skip the tiles, which would
// leave 32 - R of every 32 tile rows idle: one thread per column s reads x[r][s] for each r
// (coalesced along s within each row) and writes the R contiguous y[s][0 .. R); the same
// conversion of each element, so the same bits.
#include "core/error.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/layout/layout.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr int64_t kMaxTileBlocks = 1 << 16;
constexpr int64_t kThinRows = 8;

// y = x (or y += x into float), rounded once.
template <class Out>
__device__ inline void put(Out* out, float v, bool accumulate) {
  if constexpr (std::is_same_v<Out, float>) {
    *out = accumulate ? *out + v : v;
  } else {
    *out = from_float<Out>(v);
  }
}

template <class In, class Out>
__global__ void convert_tiled(int64_t B, int64_t R, int64_t S, const In* __restrict__ x,
                              Out* __restrict__ y, bool accumulate) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tiles_r = (R + kTile - 1) / kTile, tiles_s = (S + kTile - 1) / kTile;
  const int64_t tiles = B * tiles_r * tiles_s;
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_s), rest = t % (tiles_r * tiles_s);
    const int64_t r0 = (rest / tiles_s) * kTile, s0 = (rest % tiles_s) * kTile;
    const In* xb = x + b * R * S;
    Out* yb = y + b * R * S;
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, s = s0 + tx;
      if (r < R && s < S) tile[i][tx] = to_float(xb[r * S + s]);
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t s = s0 + i, r = r0 + tx;
      if (s < S && r < R) {
        put(yb + s * R + r, tile[tx][i], accumulate);
      }
    }
    __syncthreads();
  }
}

template <class In, class Out>
__global__ void convert_flat(int64_t n, const In* __restrict__ x, Out* __restrict__ y,
                             bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    put(y + i, to_float(x[i]), accumulate);
  }
}

// x [B, R, S] -> y [B, S, R] for R <= kThinRows: thread i is column s = i % S of batch b = i / S.
template <class In, class Out>
__global__ void convert_thin(int64_t B, int R, int64_t S, const In* __restrict__ x,
                             Out* __restrict__ y, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < B * S;
       i += int64_t(gridDim.x) * blockDim.x) {
    const In* column = x + (i / S) * R * S + i % S;  // x[b][0][s], rows S apart
    Out* pixel = y + i * R;                          // y[b][s][0 .. R)
    for (int r = 0; r < R; ++r) put(pixel + r, to_float(column[r * S]), accumulate);
  }
}

template <class In, class Out>
void launch(int64_t B, int64_t R, int64_t S, const void* x, void* y, bool accumulate,
            gpu::Stream stream) {
  if (R == 1 || S == 1) {
    const int64_t n = B * R * S;
    if (n == 0) return;
    convert_flat<In, Out><<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(
        n, static_cast<const In*>(x), static_cast<Out*>(y), accumulate);
    gpu::check_launch("convert");
    return;
  }
  if (R <= kThinRows) {
    const int64_t n = B * S;
    if (n == 0) return;
    convert_thin<In, Out><<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(
        B, int(R), S, static_cast<const In*>(x), static_cast<Out*>(y), accumulate);
    gpu::check_launch("convert");
    return;
  }
  const int64_t tiles = B * ((R + kTile - 1) / kTile) * ((S + kTile - 1) / kTile);
  if (tiles == 0) return;
  const int blocks = int(tiles < kMaxTileBlocks ? tiles : kMaxTileBlocks);
  convert_tiled<In, Out><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(
      B, R, S, static_cast<const In*>(x), static_cast<Out*>(y), accumulate);
  gpu::check_launch("convert");
}

template <class In>
void launch_from(int64_t B, int64_t R, int64_t S, const void* x, DType to, void* y, bool accumulate,
                 gpu::Stream stream) {
  switch (to) {
    case DType::f32:
      return launch<In, float>(B, R, S, x, y, accumulate, stream);
    case DType::bf16:
      return launch<In, bf16_t>(B, R, S, x, y, false, stream);
    case DType::f16:
      return launch<In, f16_t>(B, R, S, x, y, false, stream);
    case DType::f64:
      break;
  }
  throw Error("cuda::convert: no f64 on the GPU");
}

}  // namespace

void convert(int64_t B, int64_t R, int64_t S, DType from, const void* x, DType to, void* y,
             bool accumulate, gpu::Stream stream) {
  CREMA_CHECK(!accumulate || to == DType::f32, "cuda::convert accumulates into f32 only");
  switch (from) {
    case DType::f32:
      return launch_from<float>(B, R, S, x, to, y, accumulate, stream);
    case DType::bf16:
      return launch_from<bf16_t>(B, R, S, x, to, y, accumulate, stream);
    case DType::f16:
      return launch_from<f16_t>(B, R, S, x, to, y, accumulate, stream);
    case DType::f64:
      break;
  }
  throw Error("cuda::convert: no f64 on the GPU");
}

}  // namespace crema::kernels::cuda
