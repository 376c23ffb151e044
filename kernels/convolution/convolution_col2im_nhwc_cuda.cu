// The few-channel channels-last backward data as GEMM + gather (convolution_col2im_nhwc.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_col2im_nhwc.h"

namespace crema::kernels::cuda::col2im_nhwc {
namespace {

struct Gather {
  int H, W, C, P, Q, R, S;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
};

__device__ inline void store(float* dst, float v) { *dst = v; }
__device__ inline void store(uint16_t* dst, float v) {
  *dst = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// dx[n,h,w,c] for the `images` images of the chunk: a thread per element, c fastest (coalesced
// stores; the cols reads of neighbouring threads are neighbouring columns of one row).
template <typename Out>
__global__ void gather_kernel(Gather a, const float* __restrict__ cols, int64_t total,
                              Out* __restrict__ dx) {
  const int RSC = a.R * a.S * a.C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(i % a.C);
    const int64_t pixel = i / a.C;
    const int w = int(pixel % a.W), h = int(pixel / a.W % a.H);
    const int64_t n = pixel / (int64_t(a.W) * a.H);
    float acc = 0.0f;
    for (int r = 0; r < a.R; ++r) {
      const int ph = h + a.pad_h - r * a.dilation_h;
      if (ph < 0 || ph % a.stride_h != 0 || ph / a.stride_h >= a.P) continue;
      const float* row = cols + (n * a.P + ph / a.stride_h) * a.Q * RSC;
      for (int s = 0; s < a.S; ++s) {
        const int qw = w + a.pad_w - s * a.dilation_w;
        if (qw < 0 || qw % a.stride_w != 0 || qw / a.stride_w >= a.Q) continue;
        acc += row[int64_t(qw / a.stride_w) * RSC + (r * a.S + s) * a.C + c];
      }
    }
    store(dx + i, acc);
  }
}

Gather gather_of(const Conv2dGeometry& g) {
  return {int(g.H),        int(g.W),        int(g.C),        int(g.P()),       int(g.Q()),
          int(g.R),        int(g.S),        int(g.pad_h),    int(g.pad_w),     int(g.stride_h),
          int(g.stride_w), int(g.dilation_h), int(g.dilation_w)};
}

int64_t rsc(const Conv2dGeometry& g) { return g.R * g.S * g.C; }

// Whole images a cols chunk holds: as many as kColsBudget allows, at least one.
int64_t chunk_images(const Conv2dGeometry& g) {
  const int64_t per_image = g.P() * g.Q() * rsc(g) * int64_t(sizeof(float));
  return std::clamp<int64_t>(int64_t(kColsBudget) / per_image, 1, g.N);
}

size_t round16(size_t bytes) { return (bytes + 15) / 16 * 16; }

size_t cols_bytes(const Conv2dGeometry& g) {
  return round16(size_t(chunk_images(g) * g.P() * g.Q() * rsc(g)) * sizeof(float));
}

// The GEMM's rows (output pixels) in the largest chunk.
int64_t chunk_rows(const Conv2dGeometry& g) { return chunk_images(g) * g.P() * g.Q(); }

template <typename Out, typename Product>
void run(const Conv2dGeometry& g, Out* dx, float* cols, gpu::Stream stream, Product product,
         const char* what) {
  const int64_t images = chunk_images(g);
  const int64_t dx_image = g.H * g.W * g.C;
  for (int64_t n0 = 0; n0 < g.N; n0 += images) {
    const int64_t count = std::min(images, g.N - n0);
    product(n0, count * g.P() * g.Q());  // cols = dy[n0 .. n0 + count) as [rows, K] x w
    const int64_t total = count * dx_image;
    gather_kernel<<<blocks_for(total), kThreads, 0, stream>>>(gather_of(g), cols, total,
                                                       dx + n0 * dx_image);
    gpu::check_launch(what);
  }
}

// The product's version: production's for `math` whatever the shape (t1 in tf32: no workspace of
// its own; the shape-dependent pick would ask the device, and the plan may be for another one).
GemmVersion f32_version(GemmMath math) { return best_version(math); }

}  // namespace

bool fits(const Conv2dGeometry& g, int vector) {
  return g.groups == 1 && g.C > 1 && g.C < 32 && g.C % vector != 0;
}

size_t workspace_bf16(const Conv2dGeometry& g) {
  return cols_bytes(g) + round16(gemm_bf16_workspace(false, false, chunk_rows(g), rsc(g), g.K) *
                                 sizeof(float));
}

size_t workspace_f32(const Conv2dGeometry& g, GemmMath math) {
  const GemmVersion version = f32_version(math);
  return cols_bytes(g) + round16(sgemm_workspace(false, false, chunk_rows(g), rsc(g), g.K, version,
                                                 math) *
                                 sizeof(float));
}

void backward_data_bf16(const Conv2dGeometry& g, const void* dy, const void* w, void* dx,
                        void* workspace, gpu::Stream stream) {
  auto* cols = static_cast<float*>(workspace);
  auto* gemm_workspace = reinterpret_cast<float*>(static_cast<char*>(workspace) + cols_bytes(g));
  const auto* dys = static_cast<const uint16_t*>(dy);
  const auto* ws = static_cast<const uint16_t*>(w);
  run(
      g, static_cast<uint16_t*>(dx), cols, stream,
      [&](int64_t n0, int64_t rows) {
        gemm_bf16(false, false, rows, rsc(g), g.K, 1.0f, dys + n0 * g.P() * g.Q() * g.K, g.K, ws,
                  rsc(g), 0.0f, cols, rsc(g), stream, gemm_workspace);
      },
      "conv2d_tc_backward_data (col2im gather)");
}

void backward_data_f32(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                       void* workspace, gpu::Stream stream, GemmMath math) {
  auto* cols = static_cast<float*>(workspace);
  auto* gemm_workspace = reinterpret_cast<float*>(static_cast<char*>(workspace) + cols_bytes(g));
  run(
      g, dx, cols, stream,
      [&](int64_t n0, int64_t rows) {
        sgemm(false, false, rows, rsc(g), g.K, 1.0f, dy + n0 * g.P() * g.Q() * g.K, g.K, w, rsc(g),
              0.0f, cols, rsc(g), stream, f32_version(math), math,
              gemm_workspace);
      },
      "conv2d_backward_data_nhwc (col2im gather)");
}

}  // namespace crema::kernels::cuda::col2im_nhwc
