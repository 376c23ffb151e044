// Convolution v5 / v6, backward filter: Winograd F(3x3, 2x2) / F(3x3, 4x4), the forward
// algorithm differentiated in its filter (convolution_winograd.cuh has the notation). Per
// output tile the forward computes Y = A^T [ (G g G^T) .* (B^T d B) ] A, a form linear in each of
// Y, g and d; so <dY, Y> = sum over xi of (A dY A^T) .* (G g G^T) .* (B^T d B), and
//
//   dw[k, c] = sum over tiles G^T [ (A dY A^T) .* (B^T d B) ] G
//            = G^T [ sum over tiles (A dY A^T) .* (B^T d B) ] G
//
// The inner sum is, per tile position xi, a GEMM with the tiles as its inner dimension:
//
//   V[xi][c][t]  = (B^T d B)[xi]        the forward's input transform of x
//   D[xi][k][t]  = (A dY A^T)[xi]       dy's tiles (zero past P x Q)
//   Mw[xi][k][c] = sum_t D[xi][k][t] V[xi][c][t]
//   dw[k, c]    += G^T Mw[.][k][c] G
//
// The result is small (alpha^2 K C/G) and the tile count long, so the tiles are split over
// blocks (grid z) into partial sums in the workspace; one kernel adds the splits in split order,
// another applies G^T . G. Deterministic; the bias gradient is the plain channel sum.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution_winograd.cuh"

namespace crema::kernels::cuda::winograd {
namespace {

// Workspace: V [alpha^2][C][ld], D [alpha^2][K][ld], partial [splits][alpha^2][K][C/G].
struct FilterPlan {
  TileGrid grid;
  GemmTile shape;
  int splits, chunk;
  int64_t v, d, partial;  // floats of each
};

FilterPlan filter_plan(const Conv2dGeometry& g, int m) {
  constexpr int64_t kTargetBlocks = 4 * 132, kMinSlabs = 4;
  const int64_t a2 = int64_t(m + 2) * (m + 2), Cg = g.C / g.groups, Kg = g.K / g.groups;
  FilterPlan plan;
  plan.grid = tile_grid(g.N, g.P(), g.Q(), m);
  plan.shape = gemm_tile(int(Kg), int(Cg));
  const tile::TileInfo info = gemm_tile_info(plan.shape);
  const int64_t tiles =
      a2 * g.groups * ((Kg + info.bm - 1) / info.bm) * ((Cg + info.bn - 1) / info.bn);
  const int64_t slabs = (plan.grid.T + info.bk - 1) / info.bk;
  const int64_t wanted = (kTargetBlocks + tiles - 1) / tiles;
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, slabs / kMinSlabs));
  const int64_t slabs_per_split = (slabs + splits - 1) / splits;
  plan.chunk = int(slabs_per_split * info.bk);
  plan.splits = int((slabs + slabs_per_split - 1) / slabs_per_split);
  plan.v = a2 * g.C * plan.grid.ld;
  plan.d = a2 * g.K * plan.grid.ld;
  plan.partial = plan.splits * a2 * g.K * Cg;
  if (std::max(plan.v, plan.d) >= INT32_MAX) {
    throw Error("conv2d_backward_filter on CUDA (Winograd): the transformed tiles would have " +
                std::to_string(std::max(plan.v, plan.d)) +
                " elements, 2^31 or more are not supported; use a smaller batch");
  }
  return plan;
}

// D[xi][k][t] = (A dY A^T)[xi] for the m x m block of dy [N, K, P, Q] of tile t (zero past the
// edges). One thread per (k, t).
template <int M>
__global__ void output_gradient_transform_kernel(const float* __restrict__ dy, int K, int P, int Q,
                                                 TileGrid grid, float* __restrict__ D) {
  constexpr int A = Transform<M>::kAlpha;
  const int64_t total = int64_t(K) * grid.T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int k = int(i / grid.T), t = int(i % grid.T);
    const int per_image = grid.tiles_h * grid.tiles_w;
    const int n = t / per_image, tile = t % per_image;
    const int p0 = tile / grid.tiles_w * M, q0 = tile % grid.tiles_w * M;
    const float* image = dy + (int64_t(n) * K + k) * P * Q;
    float y[M][M], v[A][A];
#pragma unroll
    for (int r = 0; r < M; ++r) {
#pragma unroll
      for (int s = 0; s < M; ++s) {
        y[r][s] = p0 + r < P && q0 + s < Q ? image[(p0 + r) * Q + q0 + s] : 0.0f;
      }
    }
    transform_2d(
        y, v, [](const float(&in)[M], float(&out)[A]) { Transform<M>::output_adjoint(in, out); });
#pragma unroll
    for (int xi = 0; xi < A * A; ++xi) D[(int64_t(xi) * K + k) * grid.ld + t] = v[xi / A][xi % A];
  }
}

// partial[0][i] = sum over splits z, in order, of partial[z][i] for the count = alpha^2*K*C/G
// elements of a split. One thread per element: alpha^2 times the threads of the inverse transform
// below (when one kernel did both, its K*C/G threads took 82 of the 313 us of the 64-channel
// ResNet filter gradient; ncu, H200).
__global__ void sum_splits_kernel(float* __restrict__ partial, int splits, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = partial[i];
    for (int z = 1; z < splits; ++z) sum += partial[z * count + i];
    partial[i] = sum;
  }
}

// dw[k, c] += G^T Mw[.][k][c] G. One thread per (k, c); consecutive threads read consecutive c.
template <int M>
__global__ void filter_gradient_kernel(const float* __restrict__ Mw, int K, int Cg,
                                       float* __restrict__ dw) {
  constexpr int A = Transform<M>::kAlpha;
  const int64_t total = int64_t(K) * Cg;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v[A][A], g[3][3];
#pragma unroll
    for (int xi = 0; xi < A * A; ++xi) v[xi / A][xi % A] = Mw[xi * total + i];
    transform_2d(
        v, g, [](const float(&in)[A], float(&out)[3]) { Transform<M>::filter_adjoint(in, out); });
    float* out = dw + i * 9;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
#pragma unroll
      for (int s = 0; s < 3; ++s) out[r * 3 + s] += g[r][s];
    }
  }
}

template <int M>
void run_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                float* workspace, gpu::Stream stream, GemmMath math) {
  constexpr int A = Transform<M>::kAlpha;
  const FilterPlan plan = filter_plan(g, M);
  const int C = int(g.C), K = int(g.K), Cg = C / int(g.groups), Kg = K / int(g.groups);
  float* V = workspace;         // [alpha^2][C][ld]
  float* D = V + plan.v;        // [alpha^2][K][ld]
  float* partial = D + plan.d;  // [splits][alpha^2][K][Cg]
  input_transform_kernel<M><<<blocks_for(int64_t(C) * plan.grid.T), kThreads, 0, stream>>>(
      x, C, int(g.H), int(g.W), int(g.pad_h), int(g.pad_w), plan.grid, V);
  gpu::check_launch("conv2d_backward_filter (Winograd: input transform)");
  output_gradient_transform_kernel<M>
      <<<blocks_for(int64_t(K) * plan.grid.T), kThreads, 0, stream>>>(dy, K, int(g.P()), int(g.Q()),
                                                                      plan.grid, D);
  gpu::check_launch("conv2d_backward_filter (Winograd: output gradient transform)");
  BatchedGemm gemm;
  gemm.rows = Kg, gemm.cols = Cg, gemm.inner = plan.grid.T, gemm.batches = A * A;
  gemm.chunk = plan.chunk;
  gemm.a = {D, plan.grid.ld, int64_t(K) * plan.grid.ld, int64_t(Kg) * plan.grid.ld};
  gemm.b = {V, plan.grid.ld, int64_t(C) * plan.grid.ld, int64_t(Cg) * plan.grid.ld};
  gemm.c = partial, gemm.ldc = Cg, gemm.c_batch = int64_t(K) * Cg;
  gemm.c_group = int64_t(Kg) * Cg, gemm.c_split = int64_t(A) * A * K * Cg;
  gemm.vec_a = vec_ok(D, {gemm.a.ld, gemm.a.batch_stride, gemm.a.group_stride});
  gemm.vec_b = vec_ok(V, {gemm.b.ld, gemm.b.batch_stride, gemm.b.group_stride});
  gemm.vec_c = vec_ok(partial, {gemm.ldc, gemm.c_batch, gemm.c_group, gemm.c_split});
  run_gemm<true>(plan.shape, gemm, int(g.groups), plan.splits, stream, math);
  if (plan.splits > 1) {
    const int64_t count = int64_t(A) * A * K * Cg;
    sum_splits_kernel<<<blocks_for(count), kThreads, 0, stream>>>(partial, plan.splits, count);
    gpu::check_launch("conv2d_backward_filter (Winograd: sum of splits)");
  }
  filter_gradient_kernel<M>
      <<<blocks_for(int64_t(K) * Cg), kThreads, 0, stream>>>(partial, K, Cg, dw);
  gpu::check_launch("conv2d_backward_filter (Winograd: inverse filter transform)");
}

}  // namespace

size_t backward_filter_workspace(const Conv2dGeometry& g, int m) {
  const FilterPlan plan = filter_plan(g, m);
  return size_t(plan.v + plan.d + plan.partial);
}

void backward_filter(const Conv2dGeometry& g, int m, const float* x, const float* dy, float* dw,
                     float* db, float* workspace, gpu::Stream stream, GemmMath math) {
  if (m == 2) {
    run_filter<2>(g, x, dy, dw, workspace, stream, math);
  } else {
    run_filter<4>(g, x, dy, dw, workspace, stream, math);
  }
  if (db != nullptr) conv2d_backward_bias(g, dy, db, stream);
}

}  // namespace crema::kernels::cuda::winograd
