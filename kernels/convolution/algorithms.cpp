// THE table of production convolution algorithms: the records `auto` and `find` choose among,
// in ladder order. Each record is defined next to its kernels, at the end of its _cuda.cu file;
// adding an algorithm is its own files plus one declaration and one row here (README.md).
#include <cstring>

#include "kernels/convolution/algorithm.h"

namespace crema::kernels {
namespace records {
extern const ConvAlgorithm im2col_gemm, implicit_gemm, pointwise_gemm, depthwise_direct,
    winograd_2x2, winograd_4x4, direct, nhwc_implicit_gemm, fft;
}  // namespace records

namespace {

// A template, so that a build without CUDA -- where no record exists -- never instantiates the
// branch that names them (as dispatch.h's generic CUDA lambdas; core/build_config.h).
template <bool with_cuda>
std::vector<const ConvAlgorithm*> production_table() {
  if constexpr (with_cuda) {
    using namespace records;
    return {
        &im2col_gemm,         // v1
        &implicit_gemm,       // v2
        &pointwise_gemm,      // v3
        &depthwise_direct,    // v4
        &winograd_2x2,        // v5
        &winograd_4x4,        // v6
        &direct,              // v7
        &nhwc_implicit_gemm,  // v9
        &fft,                 // v10
    };
  } else {
    return {};
  }
}

}  // namespace

const std::vector<const ConvAlgorithm*>& conv_algorithms() {
  static const std::vector<const ConvAlgorithm*> table = production_table<kBuiltWithCuda>();
  return table;
}

const ConvAlgorithm* conv_algorithm_named(const std::string& name) {
  for (const ConvAlgorithm* algorithm : conv_algorithms()) {
    if (name == algorithm->name) return algorithm;
  }
  return nullptr;
}

const char* conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return "forward";
    case ConvPass::backward_data:
      return "backward_data";
    case ConvPass::backward_filter:
      return "backward_filter";
  }
  return "?";
}

bool supports_every_geometry(ConvPass, const Conv2dGeometry&) {
  return true;
}

bool computes_in_every_math(ConvPass, cuda::GemmMath) {
  return true;
}

bool computes_in_fp32_only(ConvPass, cuda::GemmMath math) {
  return math == cuda::GemmMath::fp32;
}

}  // namespace crema::kernels
