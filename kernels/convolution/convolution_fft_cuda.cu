// v10 fft: convolution by the 2-D FFT, for stride-1, dilation-1, ungrouped geometries whose padded
// maps fit one F x F transform (F a power of two, 8 <= F <= 64, F >= H + 2*pad_h, W + 2*pad_w).
//
// With x's maps placed at offset (pad_h, pad_w) of the F x F buffer (the padding is the buffer's
// zeros), w's and dy's at (0, 0), and hats for the half spectra (convolution_fft.cuh), each pass
// is a per-bin complex matrix product followed by one inverse transform per output map:
//   forward  Y[bin][n][k]  = sum_c X[bin][n][c] * conj(W[bin][k][c])
//            y[n,k,p,q]    = IFFT(Y)[p][q] + bias[k]                  (correlation: conj(W))
//   data     DX[bin][n][c] = sum_k DY[bin][n][k] * W[bin][k][c]
//            dx[n,c,i,j]   = IFFT(DX)[i + pad_h][j + pad_w]           (full convolution: no conj)
//   filter   DW[bin][k][c] = sum_n conj(DY[bin][n][k]) * X[bin][n][c]
//            dw[k,c,r,s]  += IFFT(DW)[r][s]                           (correlation of x with dy)
// The DFT makes the products circular; no term wraps because every index they reach,
// p + r, i + pad_h, r + p, stays below H + 2*pad_h <= F (and likewise for columns).
//
// Workspace (complex = 2 floats), the three spectra of the pass side by side: forward X [F*B, N*C],
// W [F*B, K*C], Y [F*B, N*K]; data DY, W, DX; filter X, DY, DW (B = F/2 + 1).
//
// The complex GEMM: one block per 64 x 64 tile of a bin's product, 16 x 16 threads with a 4 x 4
// tile each, the inner dimension in slabs of 16 staged through two shared buffers and summed in
// order (deterministic, no atomics; every sum's order is fixed by the geometry).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_cuda_internal.h"
#include "kernels/convolution/convolution_fft.cuh"

namespace crema::kernels::cuda::fft {
namespace {

constexpr int kTile = 64, kSlab = 16, kPerThread = 4;

// A complex matrix operand of the batched product: element (b, row, col) at
// data[b * batch + row * row_stride + col * col_stride], conjugated when conj.
struct Operand {
  const float2* data;
  int64_t batch;
  int row_stride, col_stride;
  bool conj;
};

// Element (row, col) of operand o in one bin's matrix p, conjugated as o asks; 0 outside
// rows x cols.
__device__ inline float2 load(const Operand& o, const float2* p, int row, int col, int rows,
                              int cols) {
  float2 v = make_float2(0.0f, 0.0f);
  if (row < rows && col < cols) {
    v = p[int64_t(row) * o.row_stride + int64_t(col) * o.col_stride];
    if (o.conj) v.y = -v.y;
  }
  return v;
}

// Where element e (< kSlab * kTile) of a slab goes: its depth (inner index) and its place along
// the tile. Consecutive threads walk the operand's contiguous index (the depth when
// depth_contiguous), so a warp's loads are coalesced.
__device__ inline int2 slab_place(int e, bool depth_contiguous) {
  return depth_contiguous ? make_int2(e % kSlab, e / kSlab) : make_int2(e / kTile, e % kTile);
}

// c[b][m][n] = sum_{k < inner} a(b, m, k) * b(b, k, n) for m < M, n < Nc, b < gridDim.z, into
// c + b * c_batch + m * Nc + n. Grid (ceil(Nc / 64), ceil(M / 64), bins), 256 threads. The next
// slab is read into registers while the current one is multiplied out of shared memory, and
// stored into the other of two shared buffers: one barrier a slab. The sum runs k = 0, 1, ... in
// order for every output.
__global__ void __launch_bounds__(kThreads)
    complex_gemm(int M, int Nc, int inner, Operand a, Operand b, float2* __restrict__ c,
                 int64_t c_batch) {
  constexpr int kLoads = kSlab * kTile / kThreads;
  __shared__ float2 as[2][kSlab][kTile];
  __shared__ float2 bs[2][kSlab][kTile];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const float2* pa = a.data + blockIdx.z * a.batch;
  const float2* pb = b.data + blockIdx.z * b.batch;
  const bool a_depth = a.col_stride == 1, b_depth = b.row_stride == 1;
  float2 next_a[kLoads], next_b[kLoads];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int2 where_a = slab_place(int(threadIdx.x) + l * kThreads, a_depth);
      next_a[l] = load(a, pa, m0 + where_a.y, k0 + where_a.x, M, inner);
      const int2 where_b = slab_place(int(threadIdx.x) + l * kThreads, b_depth);
      next_b[l] = load(b, pb, k0 + where_b.x, n0 + where_b.y, inner, Nc);
    }
  };
  auto stash = [&](int buffer) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int2 where_a = slab_place(int(threadIdx.x) + l * kThreads, a_depth);
      as[buffer][where_a.x][where_a.y] = next_a[l];
      const int2 where_b = slab_place(int(threadIdx.x) + l * kThreads, b_depth);
      bs[buffer][where_b.x][where_b.y] = next_b[l];
    }
  };
  float2 acc[kPerThread][kPerThread] = {};
  fetch(0);
  stash(0);
  __syncthreads();
  for (int k0 = 0, buffer = 0; k0 < inner; k0 += kSlab, buffer ^= 1) {
    const bool more = k0 + kSlab < inner;
    if (more) fetch(k0 + kSlab);
#pragma unroll
    for (int k = 0; k < kSlab; ++k) {
      float2 ra[kPerThread], rb[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        ra[i] = as[buffer][k][ty + 16 * i];
        rb[i] = bs[buffer][k][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          acc[i][j].x = fmaf(ra[i].x, rb[j].x, fmaf(-ra[i].y, rb[j].y, acc[i][j].x));
          acc[i][j].y = fmaf(ra[i].x, rb[j].y, fmaf(ra[i].y, rb[j].x, acc[i][j].y));
        }
      }
    }
    if (more) stash(buffer ^ 1);
    __syncthreads();
  }
  float2* pc = c + blockIdx.z * c_batch;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < Nc) pc[int64_t(m) * Nc + n] = acc[i][j];
    }
  }
}

// The half spectrum's bins, F * (F/2 + 1).
int64_t bins(int log_f) {
  const int64_t F = int64_t(1) << log_f;
  return F * (F / 2 + 1);
}

// Transforms `maps` maps of src (rows x cols each, placed at (top, left)) into out [bins, maps].
void transform(const float* src, int64_t maps, int64_t rows, int64_t cols, int64_t top,
               int64_t left, int log_f, float2* out, gpu::Stream stream) {
  const int64_t per_block = int64_t(1) << (kLogBufferElems - 2 * log_f);
  forward_maps<<<unsigned((maps + per_block - 1) / per_block), kThreads, 0, stream>>>(
      src, int(maps), int(rows), int(cols), int(top), int(left), log_f, out);
  gpu::check_launch("conv2d fft: forward transform");
}

// dst (maps x rows x cols) = or += the real maps of in [bins, maps], read at (top, left).
void inverse(const float2* in, int64_t maps, int64_t rows, int64_t cols, int64_t top, int64_t left,
             int log_f, const float* bias, int64_t channels, bool accumulate, float* dst,
             gpu::Stream stream) {
  const int64_t per_block = int64_t(1) << (kLogBufferElems - 2 * log_f);
  inverse_maps<<<unsigned((maps + per_block - 1) / per_block), kThreads, 0, stream>>>(
      in, int(maps), int(rows), int(cols), int(top), int(left), log_f, bias, int(channels),
      accumulate, dst);
  gpu::check_launch("conv2d fft: inverse transform");
}

// out[bin] (M x Nc, row-major) = a(bin) (M x inner) * b(bin) (inner x Nc), for every bin.
void products(int log_f, int64_t M, int64_t Nc, int64_t inner, Operand a, Operand b, float2* out,
              gpu::Stream stream) {
  const dim3 grid(unsigned((Nc + kTile - 1) / kTile), unsigned((M + kTile - 1) / kTile),
                  unsigned(bins(log_f)));
  complex_gemm<<<grid, kThreads, 0, stream>>>(int(M), int(Nc), int(inner), a, b, out, M * Nc);
  gpu::check_launch("conv2d fft: complex products");
}

}  // namespace

// Three spectra, each [bins, maps] complex.
size_t workspace(const Conv2dGeometry& g, ConvPass pass) {
  if (!fits(g)) return 0;
  const int64_t x = g.N * g.C, w = g.K * g.C, y = g.N * g.K;
  const int64_t maps = pass == ConvPass::forward         ? x + w + y
                       : pass == ConvPass::backward_data ? y + w + x
                                                         : x + y + w;
  return size_t(2 * bins(log_size(g)) * maps);
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             float* workspace, gpu::Stream stream) {
  const int log_f = log_size(g);
  const int64_t nb = bins(log_f), P = g.P(), Q = g.Q();
  float2* xf = reinterpret_cast<float2*>(workspace);  // [bins, N, C]
  float2* wf = xf + nb * g.N * g.C;                   // [bins, K, C]
  float2* yf = wf + nb * g.K * g.C;                   // [bins, N, K]
  transform(x, g.N * g.C, g.H, g.W, g.pad_h, g.pad_w, log_f, xf, stream);
  transform(w, g.K * g.C, g.R, g.S, 0, 0, log_f, wf, stream);
  // Y(n, k) = sum_c X(n, c) * conj(W)(c, k), W(c, k) at wf[k*C + c].
  products(log_f, g.N, g.K, g.C, {xf, g.N * g.C, int(g.C), 1, false},
           {wf, g.K * g.C, 1, int(g.C), true}, yf, stream);
  inverse(yf, g.N * g.K, P, Q, 0, 0, log_f, bias, g.K, false, y, stream);
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream) {
  const int log_f = log_size(g);
  const int64_t nb = bins(log_f);
  float2* dyf = reinterpret_cast<float2*>(workspace);  // [bins, N, K]
  float2* wf = dyf + nb * g.N * g.K;                   // [bins, K, C]
  float2* dxf = wf + nb * g.K * g.C;                   // [bins, N, C]
  transform(dy, g.N * g.K, g.P(), g.Q(), 0, 0, log_f, dyf, stream);
  transform(w, g.K * g.C, g.R, g.S, 0, 0, log_f, wf, stream);
  // DX(n, c) = sum_k DY(n, k) * W(k, c).
  products(log_f, g.N, g.C, g.K, {dyf, g.N * g.K, int(g.K), 1, false},
           {wf, g.K * g.C, int(g.C), 1, false}, dxf, stream);
  inverse(dxf, g.N * g.C, g.H, g.W, g.pad_h, g.pad_w, log_f, nullptr, 1, false, dx, stream);
}

void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream) {
  const int log_f = log_size(g);
  const int64_t nb = bins(log_f);
  float2* xf = reinterpret_cast<float2*>(workspace);  // [bins, N, C]
  float2* dyf = xf + nb * g.N * g.C;                  // [bins, N, K]
  float2* dwf = dyf + nb * g.N * g.K;                 // [bins, K, C]
  transform(x, g.N * g.C, g.H, g.W, g.pad_h, g.pad_w, log_f, xf, stream);
  transform(dy, g.N * g.K, g.P(), g.Q(), 0, 0, log_f, dyf, stream);
  // DW(k, c) = sum_n conj(DY)(k, n) * X(n, c), DY(k, n) at dyf[n*K + k].
  products(log_f, g.K, g.C, g.N, {dyf, g.N * g.K, 1, int(g.K), true},
           {xf, g.N * g.C, int(g.C), 1, false}, dwf, stream);
  inverse(dwf, g.K * g.C, g.R, g.S, 0, 0, log_f, nullptr, 1, true, dw, stream);
  if (db != nullptr) conv2d_backward_bias(g, dy, db, stream);
}

}  // namespace crema::kernels::cuda::fft

// v10's record: geometries that fit(), fp32 in every math (its complex products are FFMA code of
// its own).
namespace crema::kernels::records {

extern const ConvAlgorithm fft{
    "fft",
    10,
    DType::f32,
    Layout::nchw,
    [](ConvPass, const Conv2dGeometry& g) { return cuda::fft::fits(g); },
    "stride 1, dilation 1, groups 1 and padded maps of at most 64x64",
    computes_in_fp32_only,
    [](ConvPass pass, const Conv2dGeometry& g, bool) { return cuda::fft::workspace(g, pass); },
    [](const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
       float* workspace, gpu::Stream stream,
       cuda::GemmMath) { cuda::fft::forward(g, x, w, bias, y, workspace, stream); },
    [](const Conv2dGeometry& g, const float* dy, const float* w, float* dx, float* workspace,
       gpu::Stream stream,
       cuda::GemmMath) { cuda::fft::backward_data(g, dy, w, dx, workspace, stream); },
    [](const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
       float* workspace, gpu::Stream stream,
       cuda::GemmMath) { cuda::fft::backward_filter(g, x, dy, dw, db, workspace, stream); }};

}  // namespace crema::kernels::records
