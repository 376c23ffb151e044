// Convolution v8 (a ladder rung), precomputed_gemm: v2 whose loaders read each inner index's
// offsets from a table built once per call in the workspace instead of dividing
// (convolution_implicit_gemm_cuda.cu, PRECOMPUTED = true); the filter gradient is v2's. Every
// math, as v2. Production never picks it (README.md has its measurements).
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_cuda_internal.h"

namespace crema::kernels::records {

extern const ConvAlgorithm precomputed_gemm{
    "precomputed_gemm",
    8,
    DType::f32,
    Layout::nchw,
    supports_every_geometry,
    "any geometry",
    computes_in_every_math,
    [](ConvPass pass, const Conv2dGeometry& g, bool with_bias) -> size_t {
      if (pass == ConvPass::backward_filter) {
        return cuda::implicit_gemm::backward_filter_workspace(g, with_bias);
      }
      return cuda::implicit_gemm::precomputed_workspace(g, pass == ConvPass::backward_data);
    },
    cuda::implicit_gemm::forward_precomputed,
    cuda::implicit_gemm::backward_data_precomputed,
    cuda::implicit_gemm::backward_filter};

}  // namespace crema::kernels::records
