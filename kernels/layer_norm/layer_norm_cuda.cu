// Layer normalization, CUDA. Two layouts, one kernel pair each (layer_norm.h):
//
// Rows (inner = 1, the last axis): a warp per row of C, 8 rows per block, grid-stride over the
// rows. Lane l takes c = l, l + 32, ...; the row's sums are warp butterflies (__shfl_xor_sync:
// every lane ends with the same bits). Each pass reads the row again; after the first it comes
// from L1/L2 (a ConvNeXt row is 768 floats, 3 KB).
//
// Columns (inner > 1, the channels of NCHW): a thread per position (o, i), grid-stride over
// positions, consecutive threads on consecutive i, so every load and store of a warp is one
// coalesced 128-byte line per c; each thread loops over c for its own sums. No shared memory, no
// atomics: deterministic.
//
// Sums in float32, two passes (mean, then the squared deviations), as the CPU path; the results
// agree with the CPU's to float32 rounding, not bit for bit (different summation orders).
#include <algorithm>

#include "kernels/common/launch.h"
#include "kernels/layer_norm/layer_norm.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int64_t kMaxBlocks = 65536;

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float weight_of(const float* weight, int64_t c) {
  return weight != nullptr ? weight[c] : 1.0f;
}
__device__ inline float bias_of(const float* bias, int64_t c) {
  return bias != nullptr ? bias[c] : 0.0f;
}

__global__ void forward_rows(int64_t rows, int64_t C, const float* x, const float* weight,
                             const float* bias, float eps, float* y, float* mean, float* rstd) {
  const int lane = int(threadIdx.x) % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const float* xr = x + row * C;
    float sum = 0.0f;
    for (int64_t c = lane; c < C; c += 32) sum += xr[c];
    const float m = warp_sum(sum) / float(C);
    float squares = 0.0f;
    for (int64_t c = lane; c < C; c += 32) squares += (xr[c] - m) * (xr[c] - m);
    const float r = rsqrtf(warp_sum(squares) / float(C) + eps);
    float* yr = y + row * C;
    for (int64_t c = lane; c < C; c += 32) {
      yr[c] = (xr[c] - m) * r * weight_of(weight, c) + bias_of(bias, c);
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
  }
}

__global__ void backward_rows(int64_t rows, int64_t C, const float* x, const float* dy,
                              const float* weight, const float* mean, const float* rstd, float* dx,
                              float* xhat) {
  const int lane = int(threadIdx.x) % 32;
  for (int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kWarpsPerBlock) {
    const float* xr = x + row * C;
    const float* dyr = dy + row * C;
    const float m = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {  // g rounded alone, as in backward_columns
      const float g = __fmul_rn(dyr[c], weight_of(weight, c));
      sum_g += g;
      sum_gx += g * (xr[c] - m) * r;
    }
    const float mean_g = warp_sum(sum_g) / float(C), mean_gx = warp_sum(sum_gx) / float(C);
    float* dxr = dx + row * C;
    for (int64_t c = lane; c < C; c += 32) {
      const float h = (xr[c] - m) * r;
      if (xhat != nullptr) xhat[row * C + c] = h;
      dxr[c] = r * (__fmul_rn(dyr[c], weight_of(weight, c)) - mean_g - h * mean_gx);
    }
  }
}

__global__ void forward_columns(int64_t outer, int64_t C, int64_t inner, const float* x,
                                const float* weight, const float* bias, float eps, float* y,
                                float* mean, float* rstd) {
  for (int64_t pos = int64_t(blockIdx.x) * kThreads + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * kThreads) {
    const int64_t o = pos / inner, i = pos % inner;
    const float* xp = x + o * C * inner + i;  // x[o, c, i] = xp[c * inner]
    float sum = 0.0f;
    for (int64_t c = 0; c < C; ++c) sum += xp[c * inner];
    const float m = sum / float(C);
    float squares = 0.0f;
    for (int64_t c = 0; c < C; ++c) squares += (xp[c * inner] - m) * (xp[c * inner] - m);
    const float r = rsqrtf(squares / float(C) + eps);
    float* yp = y + o * C * inner + i;
    for (int64_t c = 0; c < C; ++c) {
      yp[c * inner] = (xp[c * inner] - m) * r * weight_of(weight, c) + bias_of(bias, c);
    }
    mean[pos] = m;
    rstd[pos] = r;
  }
}

__global__ void backward_columns(int64_t outer, int64_t C, int64_t inner, const float* x,
                                 const float* dy, const float* weight, const float* mean,
                                 const float* rstd, float* dx, float* xhat) {
  for (int64_t pos = int64_t(blockIdx.x) * kThreads + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * kThreads) {
    const int64_t o = pos / inner, i = pos % inner, base = o * C * inner + i;
    const float m = mean[pos], r = rstd[pos];
    float sum_g = 0.0f, sum_gx = 0.0f;
    // g = dy * w rounded on its own (__fmul_rn: never fused into the subtraction below), so that
    // dx is exactly 0 where C = 1, as it is mathematically (g - mean_g = 0).
    for (int64_t c = 0; c < C; ++c) {
      const float g = __fmul_rn(dy[base + c * inner], weight_of(weight, c));
      sum_g += g;
      sum_gx += g * (x[base + c * inner] - m) * r;
    }
    const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t e = base + c * inner;
      const float h = (x[e] - m) * r;
      if (xhat != nullptr) xhat[e] = h;
      dx[e] = r * (__fmul_rn(dy[e], weight_of(weight, c)) - mean_g - h * mean_gx);
    }
  }
}

}  // namespace

void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const float* x,
                        const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, gpu::Stream stream) {
  if (outer * inner == 0 || C == 0) return;
  if (inner == 1) {
    const int blocks = blocks_for(outer, kWarpsPerBlock, kMaxBlocks);
    forward_rows<<<blocks, kThreads, 0, stream>>>(outer, C, x, weight, bias, eps, y, mean, rstd);
  } else {
    const int blocks = blocks_for(outer * inner, kThreads, kMaxBlocks);
    forward_columns<<<blocks, kThreads, 0, stream>>>(outer, C, inner, x, weight, bias, eps, y, mean,
                                                     rstd);
  }
  gpu::check_launch("layer_norm_forward");
}

void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* dy,
                         const float* weight, const float* mean, const float* rstd, float* dx,
                         float* xhat, gpu::Stream stream) {
  if (outer * inner == 0 || C == 0) return;
  if (inner == 1) {
    const int blocks = blocks_for(outer, kWarpsPerBlock, kMaxBlocks);
    backward_rows<<<blocks, kThreads, 0, stream>>>(outer, C, x, dy, weight, mean, rstd, dx, xhat);
  } else {
    const int blocks = blocks_for(outer * inner, kThreads, kMaxBlocks);
    backward_columns<<<blocks, kThreads, 0, stream>>>(outer, C, inner, x, dy, weight, mean, rstd,
                                                      dx, xhat);
  }
  gpu::check_launch("layer_norm_backward");
}

}  // namespace crema::kernels::cuda
