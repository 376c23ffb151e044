// Convolution v2: implicit GEMM, forward and backward data, and v2's record. The three GEMMs, their
// index maps and the kernels are in convolution_implicit_gemm_kernels.cuh; this file instantiates
// them as v2 (PRECOMPUTED = false: the loaders divide), the only version production links. The
// filter gradient is in convolution_implicit_gemm_filter_cuda.cu.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_implicit_gemm_kernels.cuh"

namespace crema::kernels::cuda::implicit_gemm {

void check_sizes(const Conv2dGeometry& g) {
  const int64_t largest = std::max(
      {g.N * g.C * g.H * g.W, g.N * g.K * g.P() * g.Q(), g.K * (g.C / g.groups) * g.R * g.S});
  if (largest >= INT32_MAX) {
    throw Error(
        "conv2d on CUDA: tensors of 2^31 elements or more are not supported (the largest "
        "here has " +
        std::to_string(largest) + "); use a smaller batch");
  }
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream, GemmMath math) {
  run_forward<false>(g, params_of(g), nullptr, x, w, bias, y, stream, math);
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream, GemmMath math) {
  run_backward_data<false>(g, params_of(g), nullptr, dy, w, dx, stream, math);
}

}  // namespace crema::kernels::cuda::implicit_gemm

// v2's record: forward and backward data above, the filter gradient in
// convolution_implicit_gemm_filter_cuda.cu (its split partial sums are the only workspace).
namespace crema::kernels::records {

extern const ConvAlgorithm implicit_gemm{
    "implicit_gemm",
    2,
    DType::f32,
    Layout::nchw,
    supports_every_geometry,
    "any geometry",
    computes_in_every_math,
    cuda::implicit_gemm::filter_workspace_only,
    [](const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y, float*,
       gpu::Stream stream,
       cuda::GemmMath math) { cuda::implicit_gemm::forward(g, x, w, bias, y, stream, math); },
    [](const Conv2dGeometry& g, const float* dy, const float* w, float* dx, float*,
       gpu::Stream stream,
       cuda::GemmMath math) { cuda::implicit_gemm::backward_data(g, dy, w, dx, stream, math); },
    cuda::implicit_gemm::backward_filter};

}  // namespace crema::kernels::records
