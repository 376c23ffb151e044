// Between the algorithms' files (each defines its record, algorithm.h): v2, the implicit GEMM
// (convolution_implicit_gemm_cuda.cu, convolution_implicit_gemm_filter_cuda.cu), v3, pointwise
// batched GEMMs (convolution_pointwise_cuda.cu), v4, direct depthwise loops
// (convolution_depthwise_cuda.cu), v5 and v6, Winograd (convolution_winograd_cuda.cu,
// convolution_winograd_filter_cuda.cu), v10, FFT (convolution_fft_cuda.cu); and the ladder's v7 and
// v8 (ladder/). Device pointers, queued on `stream`; the selection (select.h) has checked the sizes
// and that the record supports the geometry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda::implicit_gemm {

// Throws crema::Error when a tensor of the geometry has 2^31 elements or more (32-bit indexing).
void check_sizes(const Conv2dGeometry& g);

// y and dx are written, in `math` (tf32, bf16: tensor cores, convolution_mma.cuh's tile).
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream, GemmMath math);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream, GemmMath math);
// Floats of partial sums backward_filter needs (0 when the N*P*Q range is not split).
size_t backward_filter_workspace(const Conv2dGeometry& g, bool with_bias);
// The workspace of a record whose filter pass is backward_filter above and whose forward and
// data passes need none (v2, v3).
size_t filter_workspace_only(ConvPass pass, const Conv2dGeometry& g, bool with_bias);
// dw += ..., db += ... when db is not null, in `math` (tf32, bf16: tensor cores, the same
// workspace).
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream, GemmMath math);

}  // namespace crema::kernels::cuda::implicit_gemm

// v3: g.pointwise() only. y and dx are written, in `math` (tf32, bf16: tensor cores).
namespace crema::kernels::cuda::pointwise {

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream, GemmMath math);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream, GemmMath math);

}  // namespace crema::kernels::cuda::pointwise

// v4: g.depthwise() only. y and dx are written; dw += ..., db += ... when db is not null.
namespace crema::kernels::cuda::depthwise {

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream);
size_t backward_filter_workspace(const Conv2dGeometry& g, bool with_bias);
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::depthwise

// v5 (m = 2) and v6 (m = 4): Winograd F(m x m, 3x3) for 3x3 filters with stride 1 and no
// dilation (backward data: pad <= 2). y and dx are written; dw += ..., db += ... when db is not
// null. `workspace` holds the *_workspace floats (transformed filters and tiles, GEMM results).
namespace crema::kernels::cuda::winograd {

size_t forward_workspace(const Conv2dGeometry& g, int m);
size_t backward_data_workspace(const Conv2dGeometry& g, int m);
size_t backward_filter_workspace(const Conv2dGeometry& g, int m);
// `math` is the batched GEMMs' (tf32, bf16: tensor cores); the transforms stay fp32.
void forward(const Conv2dGeometry& g, int m, const float* x, const float* w, const float* bias,
             float* y, float* workspace, gpu::Stream stream, GemmMath math);
void backward_data(const Conv2dGeometry& g, int m, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream, GemmMath math);
void backward_filter(const Conv2dGeometry& g, int m, const float* x, const float* dy, float* dw,
                     float* db, float* workspace, gpu::Stream stream, GemmMath math);

}  // namespace crema::kernels::cuda::winograd

// v10: FFT convolution (convolution_fft_cuda.cu) for geometries that fit(): stride 1, dilation
// 1, groups 1, padded maps of at most 64 x 64. y and dx are written; dw += ..., db += ... when db
// is not null. `workspace` holds workspace(g, pass) floats (0 when g does not fit).
namespace crema::kernels::cuda::fft {

constexpr int kMinLogF = 3, kMaxLogF = 6;  // 8 <= F <= 64

// log2 of the smallest transform size F that holds g's padded maps (0 when F would pass 64).
inline int log_size(const Conv2dGeometry& g) {
  const int64_t need = std::max(g.H + 2 * g.pad_h, g.W + 2 * g.pad_w);
  for (int log_f = kMinLogF; log_f <= kMaxLogF; ++log_f) {
    if ((int64_t(1) << log_f) >= need) return log_f;
  }
  return 0;
}
inline bool fits(const Conv2dGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 &&
         g.groups == 1 && log_size(g) > 0;
}
size_t workspace(const Conv2dGeometry& g, ConvPass pass);
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             float* workspace, gpu::Stream stream);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream);
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::fft
