// depth_col: a 3-D convolution as ONE 2-D convolution per chunk of images (convolution_nd.h has
// the formulas). The 2-D pass is a record of algorithm.h (implicit GEMM, Winograd, ...), so the
// 3-D path gets the tuned 2-D kernels; what this file adds is three row copies around it, each
// a pass over memory:
//
//   depth_gather       x [m, C, D, HW] -> col [m, O, C, T, HW]    (a row per (n, o, c, t))
//   swap_middle        [m, A, B, HW] -> [m, B, A, HW]              (y' -> y, dy -> dy')
//   depth_scatter_sum  dcol [m, O, C, T, HW] -> dx [m, C, D, HW]   (a row per (n, c, d); the
//                      taps that read depth d summed in tap order: no atomics, deterministic)
//
// with HW = H*W the in-plane extent of the tensor at hand. One block row of the grid per row
// (grid.x), the block's threads over the row's HW floats (grid.y when a row is longer than a
// block), in float4 where HW is a multiple of 4 and both pointers are 16-byte aligned: the row
// decode (divisions) runs once per block, not per element.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_nd.h"

namespace crema::kernels::cuda {
namespace {

// The depth axis as the kernels read it: input and output extents, taps, padding, stride,
// dilation; HW the in-plane input extent.
struct Depth {
  int D, O, T, pad, stride, dilation;
  int64_t HW;
};

Depth depth_of(const ConvNdGeometry& g) {
  return {int(g.in[0]),     int(g.out(0)),      int(g.kernel[0]), int(g.pad[0]),
          int(g.stride[0]), int(g.dilation[0]), g.in[1] * g.in[2]};
}

__device__ inline float4 operator+(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
template <class V>
__device__ inline V zero();
template <>
__device__ inline float zero<float>() {
  return 0.0f;
}
template <>
__device__ inline float4 zero<float4>() {
  return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// f(i) for this thread's share of a row of `length` elements: the block's threads side by side,
// the blocks along grid.y after each other.
template <class F>
__device__ inline void for_row(int64_t length, F f) {
  for (int64_t i = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; i < length;
       i += int64_t(gridDim.y) * blockDim.x) {
    f(i);
  }
}

// col[n, o, c, t, :] = x[n, c, o*stride - pad + t*dilation, :], zeros where that depth is
// outside [0, D). Rows: m*O*C*T; V is float or float4 (HW/4 of them a row).
template <class V>
__global__ void depth_gather(Depth d, int C, const V* __restrict__ x, V* __restrict__ col) {
  const int64_t length = d.HW / (sizeof(V) / sizeof(float));
  const int row = blockIdx.x;
  const int t = row % d.T, c = row / d.T % C, o = row / (d.T * C) % d.O;
  const int64_t n = row / (int64_t(d.T) * C * d.O);
  const int depth = o * d.stride - d.pad + t * d.dilation;
  V* dst = col + row * length;
  if (depth < 0 || depth >= d.D) {
    for_row(length, [&](int64_t i) { dst[i] = zero<V>(); });
    return;
  }
  const V* src = x + ((n * C + c) * d.D + depth) * length;
  for_row(length, [&](int64_t i) { dst[i] = src[i]; });
}

// dst[n, b, a, :] = src[n, a, b, :]: rows of src [m, A, B, length] in order, each written where
// the swapped index puts it. Rows: m*A*B.
template <class V>
__global__ void swap_middle(const V* __restrict__ src, int A, int B, int64_t length,
                            V* __restrict__ dst) {
  const int row = blockIdx.x;
  const int b = row % B, a = row / B % A, n = row / (A * B);
  const V* from = src + row * length;
  V* to = dst + ((int64_t(n) * B + b) * A + a) * length;
  for_row(length, [&](int64_t i) { to[i] = from[i]; });
}

// dx[n, c, depth, :] = sum over the taps t, in order, whose output depth o (o*stride - pad +
// t*dilation = depth, 0 <= o < O) exists of dcol[n, o, c, t, :]; 0 when none does. Rows: m*C*D.
// The block first finds its row's taps (one thread per tap) and keeps their rows' offsets.
template <class V>
__global__ void depth_scatter_sum(Depth d, int C, const V* __restrict__ dcol, V* __restrict__ dx) {
  __shared__ int64_t source[kConvNdDepthMaxTaps];  // offset of tap t's row in dcol, or -1
  const int64_t length = d.HW / (sizeof(V) / sizeof(float));
  const int row = blockIdx.x;
  const int depth = row % d.D, c = row / d.D % C;
  const int64_t n = row / (int64_t(d.D) * C);
  for (int t = threadIdx.x; t < d.T; t += blockDim.x) {
    const int offset = depth + d.pad - t * d.dilation, o = offset / d.stride;
    const bool reads = offset >= 0 && offset % d.stride == 0 && o < d.O;
    source[t] = reads ? (((n * d.O + o) * C + c) * d.T + t) * length : -1;
  }
  __syncthreads();
  V* dst = dx + row * length;
  for_row(length, [&](int64_t i) {
    V sum = zero<V>();
    for (int t = 0; t < d.T; ++t) {
      if (source[t] >= 0) sum = sum + dcol[source[t] + i];
    }
    dst[i] = sum;
  });
}

// The launch of a row kernel: a block row per row, as many blocks along y as a row of `floats`
// (float4 when `vectors`) needs at kThreads a block, and blocks of whole warps sharing the row
// evenly (a 56x56 plane is 784 float4: 4 blocks of 7 warps, not 3 full ones and one of 16
// threads; a 28x28 plane 196: one of 7 warps).
struct RowLaunch {
  dim3 grid;
  int threads;
};
RowLaunch row_launch(int64_t rows, int64_t floats, bool vectors) {
  const int64_t length = vectors ? floats / 4 : floats;
  const int64_t blocks = std::min<int64_t>(ceil_div(length, kThreads), 65535);
  const int threads = int(std::min<int64_t>(kThreads, ceil_div(ceil_div(length, blocks), 32) * 32));
  return {dim3(unsigned(rows), unsigned(blocks)), threads};
}
bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
// Rows of `floats` floats may move as float4: a multiple of 4, both pointers 16-byte aligned.
bool as_vectors(int64_t floats, const void* a, const void* b) {
  return floats % 4 == 0 && aligned16(a) && aligned16(b);
}
// With one output depth y' [m, 1, K, P, Q] is y [m, K, 1, P, Q]: the 2-D pass reads and writes
// the chunk in place, if it starts 16-byte aligned as a tensor of its own would.
bool in_place(const Depth& d, const float* chunk) {
  return d.O == 1 && aligned16(chunk);
}

void gather(const Depth& d, int64_t images, int C, const float* x, float* col, gpu::Stream stream,
            const char* op) {
  const int64_t rows = images * d.O * C * d.T;
  const bool vectors = as_vectors(d.HW, x, col);
  const RowLaunch l = row_launch(rows, d.HW, vectors);
  if (vectors) {
    depth_gather<<<l.grid, l.threads, 0, stream>>>(d, C, reinterpret_cast<const float4*>(x),
                                                   reinterpret_cast<float4*>(col));
  } else {
    depth_gather<<<l.grid, l.threads, 0, stream>>>(d, C, x, col);
  }
  gpu::check_launch(op);
}

void swap(const float* src, int64_t images, int A, int B, int64_t floats, float* dst,
          gpu::Stream stream, const char* op) {
  const int64_t rows = images * A * B;
  const bool vectors = as_vectors(floats, src, dst);
  const RowLaunch l = row_launch(rows, floats, vectors);
  if (vectors) {
    swap_middle<<<l.grid, l.threads, 0, stream>>>(reinterpret_cast<const float4*>(src), A, B,
                                                  floats / 4, reinterpret_cast<float4*>(dst));
  } else {
    swap_middle<<<l.grid, l.threads, 0, stream>>>(src, A, B, floats, dst);
  }
  gpu::check_launch(op);
}

void scatter_sum(const Depth& d, int64_t images, int C, const float* dcol, float* dx,
                 gpu::Stream stream, const char* op) {
  const int64_t rows = images * C * d.D;
  const bool vectors = as_vectors(d.HW, dcol, dx);
  const RowLaunch l = row_launch(rows, d.HW, vectors);
  if (vectors) {
    depth_scatter_sum<<<l.grid, l.threads, 0, stream>>>(d, C, reinterpret_cast<const float4*>(dcol),
                                                        reinterpret_cast<float4*>(dx));
  } else {
    depth_scatter_sum<<<l.grid, l.threads, 0, stream>>>(d, C, dcol, dx);
  }
  gpu::check_launch(op);
}

// One chunk's tensors in floats: col (or dcol) [m, O, C*T, H, W] and y' (or dy') [m, O, K, P, Q],
// each rounded up to 64 floats so that what follows stays 256-byte aligned.
struct Sizes {
  int64_t col, out;
  Sizes(const ConvNdGeometry& g, int64_t images) {
    const auto round = [](int64_t floats) { return ceil_div(floats, 64) * 64; };
    col = round(images * g.out(0) * g.C * g.kernel[0] * g.in[1] * g.in[2]);
    out = round(images * g.out(0) * g.K * g.out(1) * g.out(2));
  }
};

}  // namespace

// The pointer-level calls take any rank; the kernels read its padded form (ConvNdGeometry::padded).
bool conv_nd_depth_supports(const ConvNdGeometry& nd) {
  const ConvNdGeometry g = nd.padded();
  const Sizes one(g, 1);
  return g.kernel[0] <= kConvNdDepthMaxTaps && one.col < INT32_MAX && one.out < INT32_MAX &&
         g.C * g.in[0] < INT32_MAX;
}

ConvNdDepthPlan conv_nd_depth_plan(const ConvNdGeometry& nd, int64_t scratch_floats) {
  const ConvNdGeometry g = nd.padded();
  // The largest divisor of N whose chunk fits, whose 2-D tensors stay under 2^31 elements and
  // whose dx rows (m*C*D, a grid's x) too.
  const Sizes one(g, 1);
  int64_t chunk = 1;
  for (int64_t m = g.N; m > 1; --m) {
    const int64_t col = m * one.col, out = m * one.out;
    if (g.N % m == 0 && col + out <= scratch_floats && col < INT32_MAX && out < INT32_MAX &&
        m * g.C * g.in[0] < INT32_MAX) {
      chunk = m;
      break;
    }
  }
  // The in-plane convolution, over chunk * O "images" of C * T channels.
  Conv2dGeometry g2 = g.as_2d();
  g2.N = chunk * g.out(0);
  g2.C = g.C * g.kernel[0];
  return {chunk, g2};
}

size_t conv_nd_depth_workspace(ConvPass pass, const ConvNdGeometry& g, const ConvNdDepthPlan& plan,
                               const ConvAlgorithm& inner, bool with_bias) {
  const Sizes s(g.padded(), plan.chunk);
  return size_t(s.col + s.out) + inner.workspace(pass, plan.g2, with_bias);
}

// Per chunk: col <- x; y' = conv2d(col, w) + bias; y <- y' (in place when O = 1).
void conv_nd_depth_forward(const ConvNdGeometry& nd, const ConvNdDepthPlan& plan,
                           const ConvAlgorithm& inner, GemmMath math, const float* x,
                           const float* w, const float* bias, float* y, float* workspace,
                           gpu::Stream stream) {
  const char* op = "conv_nd_forward (depth_col)";
  const ConvNdGeometry g = nd.padded();
  const Depth d = depth_of(g);
  const Sizes s(g, plan.chunk);
  const int64_t PQ = g.out(1) * g.out(2);
  float* col = workspace;
  float* out = workspace + s.col;
  float* inner_workspace = out + s.out;
  for (int64_t n0 = 0; n0 < g.N; n0 += plan.chunk) {
    float* y_chunk = y + n0 * g.K * d.O * PQ;
    gather(d, plan.chunk, int(g.C), x + n0 * g.C * d.D * d.HW, col, stream, op);
    const bool direct = in_place(d, y_chunk);
    inner.forward(plan.g2, col, w, bias, direct ? y_chunk : out, inner_workspace, stream, math);
    if (!direct) swap(out, plan.chunk, d.O, int(g.K), PQ, y_chunk, stream, op);
  }
}

// Per chunk: dy' <- dy; dcol = conv2d_backward_data(dy', w); dx <- the taps of dcol summed.
void conv_nd_depth_backward_data(const ConvNdGeometry& nd, const ConvNdDepthPlan& plan,
                                 const ConvAlgorithm& inner, GemmMath math, const float* dy,
                                 const float* w, float* dx, float* workspace, gpu::Stream stream) {
  const char* op = "conv_nd_backward_data (depth_col)";
  const ConvNdGeometry g = nd.padded();
  const Depth d = depth_of(g);
  const Sizes s(g, plan.chunk);
  const int64_t PQ = g.out(1) * g.out(2);
  float* dcol = workspace;
  float* dy_rows = workspace + s.col;
  float* inner_workspace = dy_rows + s.out;
  for (int64_t n0 = 0; n0 < g.N; n0 += plan.chunk) {
    const float* dy_chunk = dy + n0 * g.K * d.O * PQ;
    const bool direct = in_place(d, dy_chunk);
    if (!direct) swap(dy_chunk, plan.chunk, int(g.K), d.O, PQ, dy_rows, stream, op);
    inner.backward_data(plan.g2, direct ? dy_chunk : dy_rows, w, dcol, inner_workspace, stream,
                        math);
    scatter_sum(d, plan.chunk, int(g.C), dcol, dx + n0 * g.C * d.D * d.HW, stream, op);
  }
}

// Per chunk: col <- x; dy' <- dy; dw (+ db) += conv2d_backward_filter(col, dy').
void conv_nd_depth_backward_filter(const ConvNdGeometry& nd, const ConvNdDepthPlan& plan,
                                   const ConvAlgorithm& inner, GemmMath math, const float* x,
                                   const float* dy, float* dw, float* db, float* workspace,
                                   gpu::Stream stream) {
  const char* op = "conv_nd_backward_filter (depth_col)";
  const ConvNdGeometry g = nd.padded();
  const Depth d = depth_of(g);
  const Sizes s(g, plan.chunk);
  const int64_t PQ = g.out(1) * g.out(2);
  float* col = workspace;
  float* dy_rows = workspace + s.col;
  float* inner_workspace = dy_rows + s.out;
  for (int64_t n0 = 0; n0 < g.N; n0 += plan.chunk) {
    const float* dy_chunk = dy + n0 * g.K * d.O * PQ;
    gather(d, plan.chunk, int(g.C), x + n0 * g.C * d.D * d.HW, col, stream, op);
    const bool direct = in_place(d, dy_chunk);
    if (!direct) swap(dy_chunk, plan.chunk, int(g.K), d.O, PQ, dy_rows, stream, op);
    inner.backward_filter(plan.g2, col, direct ? dy_chunk : dy_rows, dw, db, inner_workspace,
                          stream, math);
  }
}

}  // namespace crema::kernels::cuda
