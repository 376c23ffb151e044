// Algorithm selection in a build without CUDA: there are no CUDA versions to choose among, so the
// heuristic and the measurement say so (a layer on the CPU never asks; pinned names are still
// validated, by convolution_select.cpp).
#include "core/error.h"
#include "kernels/convolution/convolution_select.h"

namespace crema::kernels {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": this build has no CUDA backend");
}

}  // namespace

cuda::ConvVersion get_conv_algorithm(cuda::ConvPass, const Conv2dGeometry&, cuda::GemmMath) {
  no_cuda("get_conv_algorithm");
}

size_t conv_algorithm_workspace_bytes(cuda::ConvVersion, cuda::ConvPass, const Conv2dGeometry&) {
  no_cuda("conv_algorithm_workspace_bytes");
}

std::vector<ConvAlgorithmPerf> find_conv_algorithms(Context&, cuda::ConvPass, const Conv2dGeometry&,
                                                    size_t, cuda::GemmMath) {
  no_cuda("find_conv_algorithms");
}

}  // namespace crema::kernels
