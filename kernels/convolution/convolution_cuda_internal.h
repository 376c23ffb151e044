// Between convolution_cuda.cu (the cuda:: entry points, v1 im2col + GEMM) and the other versions:
// v2, the implicit GEMM (convolution_implicit_gemm_cuda.cu,
// convolution_implicit_gemm_filter_cuda.cu), v3, pointwise batched GEMMs
// (convolution_pointwise_cuda.cu), v4, direct depthwise loops (convolution_depthwise_cuda.cu).
// Device pointers, queued on `stream`; the entry points have checked the sizes (and, for v3 and v4,
// that the version supports the geometry).
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda::implicit_gemm {

// Throws crema::Error when a tensor of the geometry has 2^31 elements or more (32-bit indexing).
void check_sizes(const Conv2dGeometry& g);

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream);
// Floats of partial sums backward_filter needs (0 when the N*P*Q range is not split).
size_t backward_filter_workspace(const Conv2dGeometry& g, bool with_bias);
// dw += ..., db += ... when db is not null.
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::implicit_gemm

// v3: g.pointwise() only. y and dx are written.
namespace crema::kernels::cuda::pointwise {

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream);

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
