// Between convolution_cuda.cu (the NCHW entry points and their version switch) and v9,
// nhwc_implicit_gemm (convolution_nhwc_version_cuda.cu): the NCHW convolution through the NHWC
// kernels, with the layout transforms of kernels/layout around them. Device pointers, queued on
// `stream`; `workspace` holds the *_workspace floats: the transposed operands and results, then
// the NHWC pass's own workspace.
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda::nhwc_version {

size_t forward_workspace(const Conv2dGeometry& g);
size_t backward_data_workspace(const Conv2dGeometry& g);
size_t backward_filter_workspace(const Conv2dGeometry& g);

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             float* workspace, gpu::Stream stream, GemmMath math);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream, GemmMath math);
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream, GemmMath math);

}  // namespace crema::kernels::cuda::nhwc_version
