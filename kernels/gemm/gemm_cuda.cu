// CUDA GEMM: cuda::sgemm, production's one entry point, which checks the arguments and switches
// over the production versions, and s16's smaller tiles (gemm_tiled.cuh). The versions live in
// their own files (declared in gemm_cuda_internal.h); README.md has the ladder, whose rungs before
// these (s1-s15) live in ladder/.
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C      row-major, leading dimensions
//
// t1 tf32_mma        (gemm_mma_cuda.cu) tensor cores: mma.sync m16n8k8 on TF32-rounded operands,
//                    a 3-stage cp.async ring.
// t2 bf16_mma        (gemm_mma_cuda.cu) t1 with mma.sync m16n8k16 on bf16-rounded operands.
// t3 wgmma           (gemm_wgmma_sm90a.cu) sm_90a warpgroup MMA, TF32 or bf16, from swizzled
//                    shared memory filled through registers (rounding and transposing there).
// t4 wgmma_pipelined (gemm_wgmma_pipelined_sm90a.cu) t3 fed by TMA, 4 stages on mbarriers, a
//                    producer warpgroup and two consumers; TF32 truncated, NT only (else t3).
// t5 wgmma_repacked  (gemm_wgmma_repacked_sm90a.cu) t4 for every layout and bf16 math: the
//                    operands it cannot read in place repacked K-major (bf16) into a workspace.
// s16 ffma_tuned     s15's choice of tile per shape (tile::choose_tile): its 128x128 tile runs the
//                    loop of gemm_ffma_tuned_cuda.cu (two shared slabs, one barrier per slab, the
//                    next k step's fragments read during the FFMAs, edge-free interior loads);
//                    the 64x64, 32x32 and 16x16 tiles (the last two split k four ways inside the
//                    block) run block_tile.cuh's loop, as in s15. A small C with a long K (too
//                    few tiles to occupy the GPU) splits K over the grid, given a workspace.
//
// All versions are deterministic (no atomics; each sum's order depends on the shape only).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda {
namespace {

// C = beta * C (alpha == 0 or K == 0: A and B are not read).
__global__ void scale_matrix(int M, int N, float beta, float* __restrict__ C, int64_t ldc) {
  const int64_t count = int64_t(M) * N;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < count;
       index += int64_t(gridDim.x) * blockDim.x) {
    float* c = C + index / N * ldc + index % N;
    *c = beta == 0.0f ? 0.0f : beta * *c;
  }
}

void scale(int64_t M, int64_t N, float beta, float* C, int64_t ldc, gpu::Stream stream) {
  scale_matrix<<<blocks_for(M * N), kThreads, 0, stream>>>(int(M), int(N), beta, C, ldc);
  gpu::check_launch("scale_matrix");
}

// s16 on one tile shape: the 128 x 128 tile runs its own loop, the smaller ones s15's.
void sgemm_on_tiles(tile::TileShape shape, const detail::GemmArgs& args, gpu::Stream stream,
                    const detail::KSplit& split = {}) {
  switch (shape) {
    case tile::TileShape::large:
      return detail::sgemm_ffma_tuned(args, stream, split);
    case tile::TileShape::medium:
      return detail::sgemm_tiled<tile::Medium>(args, stream, split);
    case tile::TileShape::small:
      return detail::sgemm_tiled<tile::Small>(args, stream, split);
    case tile::TileShape::tiny:
      return detail::sgemm_tiled<tile::Tiny>(args, stream, split);
  }
}

// ---- s16's split of K -------------------------------------------------------------------------
// A product with a small C and a long K (a weight gradient: C [outputs, inputs], K = the batch's
// N*H*W positions, 401,408 for ConvNeXt-T's first stage at batch 128) has too few tiles to occupy
// the GPU: 3 blocks of 128 x 128 for 384 x 96 would each walk all of K on 3 of 132 SMs. Split K
// over the grid's y dimension instead: each split sums its chunk of k into its own slice of a
// workspace (alpha 1, beta 0), and a second kernel adds the slices in split order and blends
// alpha and beta into C. No atomics: the same bits every run.

constexpr int64_t kBusyBlocks = 132;  // about one block per SM counts as busy (tile_cost)
constexpr int64_t kSplitBlocks = 2 * kBusyBlocks;  // what the splits aim for: two blocks per SM
constexpr int64_t kMinSplitK = 256;  // k per split at least: the partial tile's store stays small

// The tile shape of a split product: padding and penalty only, the splits fill the machine.
tile::TileShape split_tile(int64_t M, int64_t N) {
  return tile::choose_tile(M, N, 0, tile::TileShape::small);
}

int64_t tiles_of(tile::TileShape shape, int64_t M, int64_t N) {
  const tile::TileInfo t = tile::tile_info(shape);
  return ceil_div(M, t.bm) * ceil_div(N, t.bn);
}

// C = alpha * sum over splits y, in order, of partial[y] + beta * C; partial[y] is M x N, dense.
__global__ void sum_splits_kernel(int M, int N, int splits, const float* __restrict__ partial,
                                  float alpha, float beta, float* __restrict__ C, int64_t ldc) {
  const int64_t count = int64_t(M) * N;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < count;
       index += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int y = 0; y < splits; ++y) sum += partial[y * count + index];
    float* c = C + index / N * ldc + index % N;
    *c = detail::blend(alpha, sum, beta, c);
  }
}

// s16 for any shape: split K when ffma_split says so and `workspace` is given, else one pass.
void sgemm_ffma_tuned_any_shape(const detail::GemmArgs& args, float* workspace,
                                gpu::Stream stream) {
  const detail::KSplit split = detail::ffma_split(args.M, args.N, args.K);
  if (split.splits == 1 || workspace == nullptr) {
    return sgemm_on_tiles(tile::choose_tile(args.M, args.N, 1, tile::TileShape::tiny), args,
                          stream);
  }
  detail::GemmArgs part = args;
  part.alpha = 1.0f, part.beta = 0.0f, part.C = workspace, part.ldc = args.N;
  sgemm_on_tiles(split_tile(args.M, args.N), part, stream, split);
  sum_splits_kernel<<<blocks_for(int64_t(args.M) * args.N), kThreads, 0, stream>>>(
      args.M, args.N, split.splits, workspace, args.alpha, args.beta, args.C, args.ldc);
  gpu::check_launch("sgemm_ffma_tuned (sum of splits)");
}

}  // namespace

namespace detail {

KSplit ffma_split(int64_t M, int64_t N, int64_t K) {
  // Split when C's tiles, at the shape padding favours, cannot occupy the SMs alone. tile_cost's
  // penalties would keep the unsplit product on s15's 16 x 16 or 32 x 32 tiles, whose many blocks
  // fill the machine but run far below their modelled speed on a long K (the 16 x 16 tile: 4.1
  // TFLOP/s for 384 x 96 x 401,408 on an H200, kernels/gemm/README.md).
  const tile::TileShape shape = split_tile(M, N);
  const int64_t tiles = tiles_of(shape, M, N);
  if (tiles >= kBusyBlocks) return {};
  const int64_t most = std::min(ceil_div(kSplitBlocks, tiles), K / kMinSplitK);
  if (most < 2) return {};
  const int64_t bk = tile::tile_info(shape).bk;
  const int64_t slabs = ceil_div(K, bk), slabs_per_split = ceil_div(slabs, most);
  return KSplit{int(ceil_div(slabs, slabs_per_split)), int(slabs_per_split * bk), M * N};
}

std::optional<GemmArgs> checked_args(const char* who, bool trans_a, bool trans_b, int64_t M,
                                     int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                                     gpu::Stream stream) {
  CREMA_CHECK(M >= 0 && N >= 0 && K >= 0 && M < INT32_MAX && N < INT32_MAX && K < INT32_MAX,
              std::string(who) + ": sizes M=" + std::to_string(M) + " N=" + std::to_string(N) +
                  " K=" + std::to_string(K));
  CREMA_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
              std::string(who) + ": leading dimensions too small");
  if (M == 0 || N == 0) return std::nullopt;
  if (K == 0 || alpha == 0.0f) {
    scale(M, N, beta, C, ldc, stream);
    return std::nullopt;
  }
  return GemmArgs{trans_a, trans_b, int(M), int(N), int(K), alpha, A, lda, B, ldb, beta, C, ldc};
}

int tile_grid(int M, int N, int bm, int bn) {
  const int64_t tiles = ceil_div(M, bm) * ceil_div(N, bn);
  if (tiles > INT32_MAX) {
    throw Error("cuda::sgemm: " + std::to_string(tiles) + " tiles of C exceed a 1-D grid");
  }
  return int(tiles);
}

}  // namespace detail

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, GemmVersion version, GemmMath math, float* workspace) {
  if (!supports(version, math)) {
    throw Error(std::string("cuda::sgemm: version ") + gemm_version_name(version) +
                " does not compute in " + gemm_math_name(math) + " math");
  }
  const std::optional<detail::GemmArgs> args = detail::checked_args(
      "cuda::sgemm", trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  if (!args) return;
  switch (version) {
    case GemmVersion::tf32_mma:
      return detail::gemm_mma(*args, false, stream);
    case GemmVersion::bf16_mma:
      return detail::gemm_mma(*args, true, stream);
    case GemmVersion::wgmma:
      return detail::gemm_wgmma(*args, math == GemmMath::bf16, stream);
    case GemmVersion::wgmma_pipelined:
      return detail::gemm_wgmma_pipelined(*args, stream);
    case GemmVersion::wgmma_repacked:
      return detail::gemm_wgmma_repacked(*args, math == GemmMath::bf16, workspace, stream);
    case GemmVersion::ffma_tuned:
      return sgemm_ffma_tuned_any_shape(*args, workspace, stream);
    case GemmVersion::wgmma_in_place:  // refused above (supports): it reads 16-bit operands only
      break;
  }
  throw Error("cuda::sgemm: unknown version " + std::to_string(int(version)));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc, gpu::Stream stream, float* workspace) {
  if (M < 0 || N < 0 || K < 0 || M >= INT32_MAX || N >= INT32_MAX || K >= INT32_MAX) {
    throw Error("cuda::gemm_bf16: sizes M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " must lie in [0, 2^31)");
  }
  if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N) {
    throw Error("cuda::gemm_bf16: leading dimensions lda=" + std::to_string(lda) +
                " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) +
                " too small for M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + (trans_a ? " (A^T)" : "") + (trans_b ? " (B^T)" : ""));
  }
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) return scale(M, N, beta, C, ldc, stream);
  detail::gemm_bf16_repacked(trans_a, trans_b, int(M), int(N), int(K), alpha, A, lda, B, ldb, beta,
                             C, ldc, workspace, stream);
}

namespace detail {
bool device_is_sm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    throw DeviceError("cuda::sgemm: cannot read the compute capability of the current device");
  }
  return major == 9 && minor == 0;
}
}  // namespace detail

}  // namespace crema::kernels::cuda
