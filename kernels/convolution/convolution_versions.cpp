// The CUDA versions' names, their list and what each supports: plain host code, compiled in
// every build (a CPU-only build still validates an `algorithm:` pinned in YAML).
#include <array>

#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda {

namespace {
struct VersionName {
  ConvVersion version;
  const char* name;
};
constexpr std::array<VersionName, 4> kNames{{
    {ConvVersion::im2col_gemm, "im2col_gemm"},
    {ConvVersion::implicit_gemm, "implicit_gemm"},
    {ConvVersion::pointwise_gemm, "pointwise_gemm"},
    {ConvVersion::depthwise_direct, "depthwise_direct"},
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
    default:
      return true;
  }
}

// Every version implements the three passes (v3's filter gradient is v2's).
bool supports(ConvVersion version, ConvPass, const Conv2dGeometry& g) {
  return supports(version, g);
}

}  // namespace crema::kernels::cuda
