// The CUDA versions' names, their list and what each supports: plain host code, compiled in
// every build (a CPU-only build still validates an `algorithm:` pinned in YAML).
#include <array>

#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_cuda_internal.h"

namespace crema::kernels::cuda {

namespace {
struct VersionName {
  ConvVersion version;
  const char* name;
};
constexpr std::array<VersionName, 10> kNames{{
    {ConvVersion::im2col_gemm, "im2col_gemm"},
    {ConvVersion::implicit_gemm, "implicit_gemm"},
    {ConvVersion::pointwise_gemm, "pointwise_gemm"},
    {ConvVersion::depthwise_direct, "depthwise_direct"},
    {ConvVersion::winograd_2x2, "winograd_2x2"},
    {ConvVersion::winograd_4x4, "winograd_4x4"},
    {ConvVersion::direct, "direct"},
    {ConvVersion::precomputed_gemm, "precomputed_gemm"},
    {ConvVersion::nhwc_implicit_gemm, "nhwc_implicit_gemm"},
    {ConvVersion::fft, "fft"},
}};
}  // namespace

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

const std::vector<ConvVersion>& conv_versions() {
  static const std::vector<ConvVersion> versions = [] {
    std::vector<ConvVersion> all;
    for (const VersionName& v : kNames) all.push_back(v.version);
    return all;
  }();
  return versions;
}

const char* conv_version_name(ConvVersion version) {
  for (const VersionName& v : kNames) {
    if (v.version == version) return v.name;
  }
  return "unknown";
}

std::optional<ConvVersion> conv_version_from_name(const std::string& name) {
  for (const VersionName& v : kNames) {
    if (name == v.name) return v.version;
  }
  return std::nullopt;
}

bool supports(ConvVersion version, const Conv2dGeometry& g) {
  switch (version) {
    case ConvVersion::pointwise_gemm:
      return g.pointwise();
    case ConvVersion::depthwise_direct:
      return g.depthwise();
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return g.R == 3 && g.S == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
             g.dilation_w == 1;
    case ConvVersion::direct:
      return g.R <= direct::kMaxTaps && g.S <= direct::kMaxTaps &&
             g.stride_h <= direct::kMaxStride && g.stride_w <= direct::kMaxStride;
    case ConvVersion::fft:
      return fft::fits(g);
    default:
      return true;
  }
}

// Every version implements the three passes (v3's, v7's and v8's filter gradient is v2's).
// Winograd's backward data is a forward convolution of dy padded by 2 - pad on each side, so pad
// may not exceed 2.
bool supports(ConvVersion version, ConvPass pass, const Conv2dGeometry& g) {
  if (!supports(version, g)) return false;
  const bool winograd =
      version == ConvVersion::winograd_2x2 || version == ConvVersion::winograd_4x4;
  if (winograd && pass == ConvPass::backward_data) return g.pad_h <= 2 && g.pad_w <= 2;
  return true;
}

bool computes_in(ConvVersion version, ConvPass pass, GemmMath math) {
  switch (version) {
    case ConvVersion::im2col_gemm:
    case ConvVersion::implicit_gemm:
    case ConvVersion::pointwise_gemm:
    case ConvVersion::winograd_2x2:
    case ConvVersion::precomputed_gemm:
    case ConvVersion::nhwc_implicit_gemm:
      return true;
    case ConvVersion::direct:  // its filter gradient is v2's
      return math == GemmMath::fp32 || pass == ConvPass::backward_filter;
    case ConvVersion::depthwise_direct:
    case ConvVersion::winograd_4x4:
    case ConvVersion::fft:
      break;
  }
  return math == GemmMath::fp32;
}

}  // namespace crema::kernels::cuda
