// conv2d_workspace_bytes (convolution.h): the shared workspace each pass takes, as the Tensor-level
// calls of convolution.cpp take it, for the memory plan (Layer::workspace_bytes, core/net.h).
#include <algorithm>
#include <cstddef>

#include "core/build_config.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/select.h"

namespace crema::kernels {

namespace {

// conv2d_workspace_bytes on CUDA: a template, so that a build without CUDA -- where the cuda::
// queries do not exist -- never instantiates the branch that calls them (as convolution.cpp's
// nhwc_kernel).
template <bool with_cuda>
size_t cuda_workspace_bytes(ConvPass pass, const Conv2dGeometry& g, DType dtype, Layout layout,
                            const ConvRequest& request, bool with_bias) {
  if constexpr (with_cuda) {
    const size_t bias_bytes =
        with_bias ? cuda::conv2d_backward_bias_nhwc_workspace(g) * sizeof(float) : 0;
    if (dtype == DType::bf16 || dtype == DType::f16) {
      const cuda::TcType type = dtype == DType::bf16 ? cuda::TcType::bf16 : cuda::TcType::f16;
      switch (pass) {
        case ConvPass::forward:
          return 0;  // conv2d_forward fuses no statistics: no workspace
        case ConvPass::backward_data:
          return cuda::conv2d_tc_backward_data_workspace(g, type);
        case ConvPass::backward_filter:
          return std::max(cuda::conv2d_tc_backward_filter_workspace(g), bias_bytes);
      }
    }
    if (dtype != DType::f32) return 0;
    if (layout == Layout::nhwc) {
      switch (pass) {
        case ConvPass::forward:
          return cuda::conv2d_forward_nhwc_workspace(g) * sizeof(float);
        case ConvPass::backward_data:
          return cuda::conv2d_backward_data_nhwc_workspace(g) * sizeof(float);
        case ConvPass::backward_filter:
          return std::max(cuda::conv2d_backward_filter_nhwc_workspace(g) * sizeof(float),
                          bias_bytes);
      }
    }
    const ConvMemo* memo = request.memo;
    const ConvAlgorithm& algorithm =
        memo != nullptr && memo->geometry == g ? *memo->algorithm
        : request.mode == ConvRequest::Mode::pinned
            ? *request.pinned
            : get_conv_algorithm(pass, g, request.math, request.workspace_limit);
    return algorithm.workspace(pass, g, with_bias) * sizeof(float);
  } else {
    return 0;
  }
}

}  // namespace

size_t conv2d_workspace_bytes(const Device& device, ConvPass pass, const Conv2dGeometry& g,
                              DType dtype, Layout layout, const ConvRequest& request,
                              bool with_bias, int num_threads) {
  if (device.is_cuda()) {
    return cuda_workspace_bytes<kBuiltWithCuda>(pass, g, dtype, layout, request, with_bias);
  }
  if (dtype != DType::f32) return 0;  // f64 runs the reference, which takes none
  const bool nhwc = layout == Layout::nhwc;
  switch (pass) {
    case ConvPass::forward:
      return sizeof(float) * (nhwc ? cpu::conv2d_forward_nhwc_workspace(g, num_threads)
                                   : cpu::conv2d_forward_workspace(g, num_threads));
    case ConvPass::backward_data:
      return sizeof(float) * (nhwc ? cpu::conv2d_backward_data_nhwc_workspace(g, num_threads)
                                   : cpu::conv2d_backward_data_workspace(g, num_threads));
    case ConvPass::backward_filter:
      return sizeof(float) * (nhwc ? cpu::conv2d_backward_filter_nhwc_workspace(g, num_threads)
                                   : cpu::conv2d_backward_filter_workspace(g, num_threads));
  }
  return 0;
}

}  // namespace crema::kernels
