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

// dx[n,h,w,c] for the chunk's images from cols^T [R*S*C, rows] (rows = the chunk's N*P*Q): a
// thread per pixel (n, h, w), w fastest, every channel of it. For one tap (r, s, c) the threads of
// a warp whose w has the tap's parity read consecutive q of one cols^T row: whole sectors.
template <typename Out>
__global__ void gather_kernel(Gather a, const float* __restrict__ cols, int64_t rows,
                              int64_t pixels, Out* __restrict__ dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pixels;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int w = int(i % a.W), h = int(i / a.W % a.H);
    const int64_t n = i / (int64_t(a.W) * a.H);
    for (int c = 0; c < a.C; ++c) {
      float acc = 0.0f;
      for (int r = 0; r < a.R; ++r) {
        const int ph = h + a.pad_h - r * a.dilation_h;
        if (ph < 0 || ph % a.stride_h != 0 || ph / a.stride_h >= a.P) continue;
        const int64_t row = (n * a.P + ph / a.stride_h) * a.Q;
        for (int s = 0; s < a.S; ++s) {
          const int qw = w + a.pad_w - s * a.dilation_w;
          if (qw < 0 || qw % a.stride_w != 0 || qw / a.stride_w >= a.Q) continue;
          acc += cols[int64_t((r * a.S + s) * a.C + c) * rows + row + qw / a.stride_w];
        }
      }
      store(dx + i * a.C + c, acc);
    }
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
    const int64_t count = std::min(images, g.N - n0), rows = count * g.P() * g.Q();
    product(n0, rows);  // cols^T = w^T x dy[n0 .. n0 + count)^T, [R*S*C, rows]
    const int64_t pixels = count * g.H * g.W;
    gather_kernel<<<blocks_for(pixels), kThreads, 0, stream>>>(gather_of(g), cols, rows, pixels,
                                                               dx + n0 * dx_image);
    gpu::check_launch(what);
  }
}

// The product's version: production's for `math` whatever the shape (t1 in tf32: no workspace of
// its own; the shape-dependent pick would ask the device, and the plan may be for another one).
GemmVersion f32_version(GemmMath math) { return best_version(math); }

}  // namespace

bool few_channels(const Conv2dGeometry& g) { return g.groups == 1 && g.C > 1 && g.C < 32; }

size_t workspace_bf16(const Conv2dGeometry& g) {
  return cols_bytes(g) + round16(gemm_bf16_workspace(true, true, rsc(g), chunk_rows(g), g.K) *
                                 sizeof(float));
}

size_t workspace_f32(const Conv2dGeometry& g, GemmMath math) {
  const GemmVersion version = f32_version(math);
  return cols_bytes(g) + round16(sgemm_workspace(true, true, rsc(g), chunk_rows(g), g.K, version,
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
        gemm_bf16(true, true, rsc(g), rows, g.K, 1.0f, ws, rsc(g), dys + n0 * g.P() * g.Q() * g.K,
                  g.K, 0.0f, cols, rows, stream, gemm_workspace);
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
        sgemm(true, true, rsc(g), rows, g.K, 1.0f, w, rsc(g), dy + n0 * g.P() * g.Q() * g.K, g.K,
              0.0f, cols, rows, stream, f32_version(math), math, gemm_workspace);
      },
      "conv2d_backward_data_nhwc (col2im gather)");
}

}  // namespace crema::kernels::cuda::col2im_nhwc
