// im2col / col2im on the GPU, batched over images (the layout and formulas are in im2col.h).
//
// Both are memory-bound index shuffles: im2col reads each pixel up to R*S times (from L1/L2) and
// writes C*R*S*P*Q floats once; col2im is written as a gather (each pixel sums the col entries
// that read it) rather than im2col's adjoint scatter, so it needs no atomics and its sums have a
// fixed order. They serve convolution's im2col + GEMM version; the implicit-GEMM version never
// materializes col.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/im2col/im2col.h"

namespace crema::kernels::cuda {
namespace {

// Im2colGeometry in the 32-bit ints the kernels index with (sizes are checked below 2^31).
struct Patches {
  int C, H, W, R, S;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int P, Q;
};

Patches patches_of(const Im2colGeometry& g, int64_t images, int64_t ldcol) {
  const int64_t cols = images * g.P() * g.Q();
  CREMA_CHECK(ldcol >= cols,
              "im2col: ldcol " + std::to_string(ldcol) + " < " + std::to_string(cols) + " columns");
  if (g.C * g.H * g.W >= INT32_MAX || g.C * g.R * g.S >= INT32_MAX || cols >= INT32_MAX) {
    throw Error("im2col on CUDA: sizes of 2^31 elements or more are not supported (C=" +
                std::to_string(g.C) + ", " + std::to_string(g.H) + "x" + std::to_string(g.W) +
                ", " + std::to_string(images) + " images)");
  }
  return {int(g.C),          int(g.H),     int(g.W),        int(g.R),        int(g.S),
          int(g.pad_h),      int(g.pad_w), int(g.stride_h), int(g.stride_w), int(g.dilation_h),
          int(g.dilation_w), int(g.P()),   int(g.Q())};
}

// col[(c*R + r)*S + s, n*PQ + p*Q + q] = im_n[c, p*stride_h - pad_h + r*dilation_h,
//                                             q*stride_w - pad_w + s*dilation_w]   (0 outside)
__global__ void im2col_kernel(Patches g, int images, const float* __restrict__ im,
                              int64_t im_stride, float* __restrict__ col, int64_t ldcol) {
  const int PQ = g.P * g.Q;
  const int64_t cols = int64_t(images) * PQ;
  const int64_t total = int64_t(g.C) * g.R * g.S * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(i / cols), column = int(i % cols);
    const int n = column / PQ, pq = column % PQ, p = pq / g.Q, q = pq % g.Q;
    const int c = row / (g.R * g.S), r = row / g.S % g.R, s = row % g.S;
    const int h = p * g.stride_h - g.pad_h + r * g.dilation_h;
    const int w = q * g.stride_w - g.pad_w + s * g.dilation_w;
    const bool inside = h >= 0 && h < g.H && w >= 0 && w < g.W;
    col[row * ldcol + column] = inside ? im[n * im_stride + (c * g.H + h) * g.W + w] : 0.0f;
  }
}

// v2 (row_vectors): block (x, y) fills columns [8 (x 256 + t), + 8) of col row y (then every
// gridDim.y-th row); the same entries as im2col_kernel.
constexpr int kColumnsPerThread = 8;

__global__ void im2col_rows(Patches g, int images, const float* __restrict__ im, int64_t im_stride,
                            float* __restrict__ col, int64_t ldcol, bool vectors) {
  const int PQ = g.P * g.Q, RS = g.R * g.S, rows = g.C * RS;
  const int cols = images * PQ;
  const int64_t first = kColumnsPerThread * (int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  if (first >= cols) return;
  const int j0 = int(first);
  const int n0 = j0 / PQ, p0 = (j0 - n0 * PQ) / g.Q, q0 = j0 - n0 * PQ - p0 * g.Q;
  for (int row = int(blockIdx.y); row < rows; row += int(gridDim.y)) {
    const int c = row / RS, r = (row - c * RS) / g.S, s = row - c * RS - r * g.S;
    const int dh = r * g.dilation_h - g.pad_h, dw = s * g.dilation_w - g.pad_w;
    float v[kColumnsPerThread];
    int n = n0, p = p0, q = q0;
#pragma unroll
    for (int e = 0; e < kColumnsPerThread; ++e) {
      const int h = p * g.stride_h + dh, w = q * g.stride_w + dw;
      const bool inside = j0 + e < cols && h >= 0 && h < g.H && w >= 0 && w < g.W;
      v[e] = inside ? im[n * im_stride + (int64_t(c) * g.H + h) * g.W + w] : 0.0f;
      if (++q == g.Q) {  // the next column: q, then p, then the image
        q = 0;
        if (++p == g.P) p = 0, ++n;
      }
    }
    float* out = col + row * ldcol + j0;
    if (vectors && j0 + kColumnsPerThread <= cols) {
      reinterpret_cast<float4*>(out)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(out)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int e = 0; e < kColumnsPerThread; ++e) {
        if (j0 + e < cols) out[e] = v[e];
      }
    }
  }
}

// im_n[c, h, w] += sum over (r, s) with p = (h + pad_h - r*dilation_h) / stride_h and
// q = (w + pad_w - s*dilation_w) / stride_w exact and inside [0,P) x [0,Q) of
// col[(c*R + r)*S + s, n*PQ + p*Q + q].
__global__ void col2im_kernel(Patches g, int images, const float* __restrict__ col, int64_t ldcol,
                              float* __restrict__ im, int64_t im_stride) {
  const int HW = g.H * g.W, PQ = g.P * g.Q;
  const int64_t total = int64_t(images) * g.C * HW;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int n = int(i / (int64_t(g.C) * HW)), chw = int(i % (int64_t(g.C) * HW));
    const int c = chw / HW, h = chw % HW / g.W, w = chw % g.W;
    float sum = 0.0f;
    for (int r = 0; r < g.R; ++r) {
      const int hp = h + g.pad_h - r * g.dilation_h;
      if (hp < 0 || hp % g.stride_h != 0 || hp / g.stride_h >= g.P) continue;
      for (int s = 0; s < g.S; ++s) {
        const int wq = w + g.pad_w - s * g.dilation_w;
        if (wq < 0 || wq % g.stride_w != 0 || wq / g.stride_w >= g.Q) continue;
        const int row = (c * g.R + r) * g.S + s;
        sum += col[row * ldcol + int64_t(n) * PQ + hp / g.stride_h * g.Q + wq / g.stride_w];
      }
    }
    im[n * im_stride + chw] += sum;
  }
}

}  // namespace

void im2col(const Im2colGeometry& g, int64_t images, const float* im, int64_t im_stride, float* col,
            int64_t ldcol, Im2colVersion version, gpu::Stream stream) {
  const Patches p = patches_of(g, images, ldcol);
  const int64_t cols = images * g.col_cols(), total = g.col_rows() * cols;
  if (total == 0) return;
  if (version == Im2colVersion::thread_per_entry) {
    im2col_kernel<<<blocks_for(total), kThreads, 0, stream>>>(p, int(images), im, im_stride, col,
                                                              ldcol);
  } else {
    const bool vectors = ldcol % 4 == 0 && (reinterpret_cast<uintptr_t>(col) & 15u) == 0;
    const int64_t rows = g.col_rows();
    const dim3 grid{unsigned(ceil_div(cols, int64_t(kThreads) * kColumnsPerThread)),
                    unsigned(rows < 65535 ? rows : 65535)};
    im2col_rows<<<grid, kThreads, 0, stream>>>(p, int(images), im, im_stride, col, ldcol, vectors);
  }
  gpu::check_launch("im2col");
}

void col2im(const Im2colGeometry& g, int64_t images, const float* col, int64_t ldcol, float* im,
            int64_t im_stride, gpu::Stream stream) {
  const Patches p = patches_of(g, images, ldcol);
  const int64_t total = images * g.C * g.H * g.W;
  if (total == 0) return;
  col2im_kernel<<<blocks_for(total), kThreads, 0, stream>>>(p, int(images), col, ldcol, im,
                                                            im_stride);
  gpu::check_launch("col2im");
}

}  // namespace crema::kernels::cuda
