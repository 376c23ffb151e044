// Convolution v5 / v6: Winograd F(2x2,3x3) and F(4x4,3x3), forward and backward data
// (convolution_winograd.cuh has the algorithm). Non-fused: four launches, each with a plain
// job -- filter transform U, input transform V, alpha^2 batched GEMMs M = U V, output transform
// -- through the workspace (U + V + M). A fused kernel (transforms in the GEMM's loaders and
// epilogue) saves V's and M's round trips through memory, but its GEMM works on one tile
// position's slab at a time with the transform's index arithmetic in every load; the non-fused
// form keeps the GEMM the plain, tuned block-tiled one (README.md has the measurements).
//
// Backward data is the same algorithm: dx = conv(dy padded by 2 - pad, w rotated by 180 degrees
// with its K and C swapped), stride 1, so it runs the forward path on dy with the rotation done
// by the filter transform (needs pad <= 2).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_winograd.cuh"

namespace crema::kernels::cuda::winograd {
namespace {

// A stride-1 3x3 convolution src [N, Cin, H, W] -> dst [N, Cout, P, Q] in `groups` groups.
struct Problem {
  int N, Cin, H, W, Cout, P, Q, pad_h, pad_w, groups;
  int cin_g() const { return Cin / groups; }
  int cout_g() const { return Cout / groups; }
};

Problem forward_problem(const Conv2dGeometry& g) {
  return {int(g.N),   int(g.C),   int(g.H),     int(g.W),     int(g.K),
          int(g.P()), int(g.Q()), int(g.pad_h), int(g.pad_w), int(g.groups)};
}

// dx = conv(dy, rot180(w)^T) with padding 2 - pad: outputs H x W.
Problem backward_data_problem(const Conv2dGeometry& g) {
  return {int(g.N), int(g.K), int(g.P()),       int(g.Q()),       int(g.C),
          int(g.H), int(g.W), int(2 - g.pad_h), int(2 - g.pad_w), int(g.groups)};
}

// Workspace: U [alpha^2][Cout][Cin/G], V [alpha^2][Cin][ld], M [alpha^2][Cout][ld].
struct Layout {
  TileGrid grid;
  int64_t u, v, m;  // floats of each
};

Layout layout_of(const Problem& p, int m) {
  const int64_t a2 = int64_t(m + 2) * (m + 2);
  Layout l;
  l.grid = tile_grid(p.N, p.P, p.Q, m);
  l.u = round_up4(a2 * p.Cout * p.cin_g());
  l.v = a2 * p.Cin * l.grid.ld;
  l.m = a2 * p.Cout * l.grid.ld;
  if (std::max(l.v, l.m) >= INT32_MAX) {
    throw Error("conv2d on CUDA (Winograd): the transformed tiles would have " +
                std::to_string(std::max(l.v, l.m)) +
                " elements, 2^31 or more are not supported; use a smaller batch");
  }
  return l;
}

// U[xi][row][col] = (G f G^T)[xi] for U's rows x cols filters. Forward: row k, column c,
// f = w[k, c]. Backward data (flip): row c (of C, in groups of rows_g), column k (of K/G),
// f = w[group*cols + k, c % rows_g] rotated by 180 degrees.
template <int M>
__global__ void filter_transform_kernel(const float* __restrict__ w, int rows, int rows_g, int cols,
                                        bool flip, float* __restrict__ U) {
  constexpr int A = Transform<M>::kAlpha;
  const int64_t total = int64_t(rows) * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(i / cols), col = int(i % cols);
    const int64_t filter = flip ? (int64_t(row / rows_g) * cols + col) * rows_g + row % rows_g : i;
    const float* f = w + filter * 9;
    float g[3][3], u[A][A];
#pragma unroll
    for (int r = 0; r < 3; ++r) {
#pragma unroll
      for (int s = 0; s < 3; ++s) g[r][s] = flip ? f[(2 - r) * 3 + 2 - s] : f[r * 3 + s];
    }
    transform_2d(g, u, [](const float(&in)[3], float(&out)[A]) { Transform<M>::filter(in, out); });
#pragma unroll
    for (int xi = 0; xi < A * A; ++xi) U[xi * total + i] = u[xi / A][xi % A];
  }
}

// dst[n, k, tile t] = (A^T M[.][k][t] A) + bias[k], the outputs inside P x Q. One thread per
// (k, t).
template <int M>
__global__ void output_transform_kernel(const float* __restrict__ Mt, int K, int P, int Q,
                                        TileGrid grid, const float* __restrict__ bias,
                                        float* __restrict__ dst) {
  constexpr int A = Transform<M>::kAlpha;
  const int64_t total = int64_t(K) * grid.T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int k = int(i / grid.T), t = int(i % grid.T);
    float v[A][A], y[M][M];
#pragma unroll
    for (int xi = 0; xi < A * A; ++xi) v[xi / A][xi % A] = Mt[(int64_t(xi) * K + k) * grid.ld + t];
    transform_2d(v, y, [](const float(&in)[A], float(&out)[M]) { Transform<M>::output(in, out); });
    const int per_image = grid.tiles_h * grid.tiles_w;
    const int n = t / per_image, tile = t % per_image;
    const int p0 = tile / grid.tiles_w * M, q0 = tile % grid.tiles_w * M;
    const float b = bias != nullptr ? bias[k] : 0.0f;
    float* out = dst + (int64_t(n) * K + k) * P * Q;
#pragma unroll
    for (int r = 0; r < M; ++r) {
#pragma unroll
      for (int s = 0; s < M; ++s) {
        if (p0 + r < P && q0 + s < Q) out[(p0 + r) * Q + q0 + s] = y[r][s] + b;
      }
    }
  }
}

template <int M>
void run(const Problem& p, const float* src, const float* w, bool flip, const float* bias,
         float* dst, float* workspace, gpu::Stream stream, GemmMath math) {
  constexpr int A = Transform<M>::kAlpha;
  const Layout l = layout_of(p, M);
  float* U = workspace;  // [alpha^2][Cout][Cin/G]
  float* V = U + l.u;    // [alpha^2][Cin][ld]
  float* Mt = V + l.v;   // [alpha^2][Cout][ld]
  const int64_t filters = int64_t(p.Cout) * p.cin_g();
  filter_transform_kernel<M>
      <<<blocks_for(filters), kThreads, 0, stream>>>(w, p.Cout, p.cout_g(), p.cin_g(), flip, U);
  gpu::check_launch("conv2d (Winograd: filter transform)");
  input_transform_kernel<M><<<blocks_for(int64_t(p.Cin) * l.grid.T), kThreads, 0, stream>>>(
      src, p.Cin, p.H, p.W, p.pad_h, p.pad_w, l.grid, V);
  gpu::check_launch("conv2d (Winograd: input transform)");
  BatchedGemm gemm;
  gemm.rows = p.cout_g(), gemm.cols = l.grid.T, gemm.inner = p.cin_g(), gemm.batches = A * A;
  gemm.chunk = gemm.inner;
  gemm.a = {U, p.cin_g(), filters, int64_t(p.cout_g()) * p.cin_g()};
  gemm.b = {V, l.grid.ld, int64_t(p.Cin) * l.grid.ld, int64_t(p.cin_g()) * l.grid.ld};
  gemm.c = Mt, gemm.ldc = l.grid.ld, gemm.c_batch = int64_t(p.Cout) * l.grid.ld;
  gemm.c_group = int64_t(p.cout_g()) * l.grid.ld, gemm.c_split = 0;
  gemm.vec_a = vec_ok(U, {gemm.a.ld, gemm.a.batch_stride, gemm.a.group_stride});
  gemm.vec_b = vec_ok(V, {gemm.b.ld, gemm.b.batch_stride, gemm.b.group_stride});
  gemm.vec_c = vec_ok(Mt, {gemm.ldc, gemm.c_batch, gemm.c_group});
  run_gemm<false>(gemm_tile(gemm.rows, gemm.cols), gemm, p.groups, 1, stream, math);
  output_transform_kernel<M><<<blocks_for(int64_t(p.Cout) * l.grid.T), kThreads, 0, stream>>>(
      Mt, p.Cout, p.P, p.Q, l.grid, bias, dst);
  gpu::check_launch("conv2d (Winograd: output transform)");
}

size_t workspace_of(const Problem& p, int m) {
  const Layout l = layout_of(p, m);
  return size_t(l.u + l.v + l.m);
}

}  // namespace

size_t forward_workspace(const Conv2dGeometry& g, int m) {
  return workspace_of(forward_problem(g), m);
}

size_t backward_data_workspace(const Conv2dGeometry& g, int m) {
  return workspace_of(backward_data_problem(g), m);
}

void forward(const Conv2dGeometry& g, int m, const float* x, const float* w, const float* bias,
             float* y, float* workspace, gpu::Stream stream, GemmMath math) {
  if (m == 2) return run<2>(forward_problem(g), x, w, false, bias, y, workspace, stream, math);
  run<4>(forward_problem(g), x, w, false, bias, y, workspace, stream, math);
}

void backward_data(const Conv2dGeometry& g, int m, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream, GemmMath math) {
  const Problem p = backward_data_problem(g);
  if (m == 2) return run<2>(p, dy, w, true, nullptr, dx, workspace, stream, math);
  run<4>(p, dy, w, true, nullptr, dx, workspace, stream, math);
}

}  // namespace crema::kernels::cuda::winograd

// v5's and v6's records: one algorithm at two tile sizes M. v5's batched GEMMs run in the asked
// math; v6 computes in fp32 whatever the math, because F(4x4,3x3)'s output transform amplifies
// operand rounding about 12x (tf32 operands give ~3e-3 relative error, over tf32's 2e-3; bf16
// ~2.5e-2).
namespace crema::kernels::records {
namespace {

// 3x3 filters, stride 1, no dilation; backward data is a forward convolution of dy padded by
// 2 - pad on each side, so pad may not exceed 2.
bool winograd_supports(ConvPass pass, const Conv2dGeometry& g) {
  const bool shape = g.R == 3 && g.S == 3 && g.stride_h == 1 && g.stride_w == 1 &&
                     g.dilation_h == 1 && g.dilation_w == 1;
  if (shape && pass == ConvPass::backward_data) return g.pad_h <= 2 && g.pad_w <= 2;
  return shape;
}

template <int M>
size_t winograd_workspace(ConvPass pass, const Conv2dGeometry& g, bool) {
  if (!winograd_supports(pass, g)) return 0;
  switch (pass) {
    case ConvPass::forward:
      return cuda::winograd::forward_workspace(g, M);
    case ConvPass::backward_data:
      return cuda::winograd::backward_data_workspace(g, M);
    case ConvPass::backward_filter:
      break;
  }
  return cuda::winograd::backward_filter_workspace(g, M);
}

// The math each pass runs in: the asked one for v5, fp32 for v6.
template <int M>
cuda::GemmMath own_math(cuda::GemmMath math) {
  return M == 2 ? math : cuda::GemmMath::fp32;
}

template <int M>
void winograd_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                      float* y, float* workspace, gpu::Stream stream, cuda::GemmMath math) {
  cuda::winograd::forward(g, M, x, w, bias, y, workspace, stream, own_math<M>(math));
}

template <int M>
void winograd_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                            float* workspace, gpu::Stream stream, cuda::GemmMath math) {
  cuda::winograd::backward_data(g, M, dy, w, dx, workspace, stream, own_math<M>(math));
}

template <int M>
void winograd_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                              float* db, float* workspace, gpu::Stream stream,
                              cuda::GemmMath math) {
  cuda::winograd::backward_filter(g, M, x, dy, dw, db, workspace, stream, own_math<M>(math));
}

constexpr const char* kRequirement =
    "a 3x3 filter with stride 1 and dilation 1 (backward data: padding at most 2)";

}  // namespace

extern const ConvAlgorithm winograd_2x2{"winograd_2x2",
                                        5,
                                        DType::f32,
                                        Layout::nchw,
                                        winograd_supports,
                                        kRequirement,
                                        computes_in_every_math,
                                        winograd_workspace<2>,
                                        winograd_forward<2>,
                                        winograd_backward_data<2>,
                                        winograd_backward_filter<2>};

extern const ConvAlgorithm winograd_4x4{"winograd_4x4",
                                        6,
                                        DType::f32,
                                        Layout::nchw,
                                        winograd_supports,
                                        kRequirement,
                                        computes_in_fp32_only,
                                        winograd_workspace<4>,
                                        winograd_forward<4>,
                                        winograd_backward_data<4>,
                                        winograd_backward_filter<4>};

}  // namespace crema::kernels::records
