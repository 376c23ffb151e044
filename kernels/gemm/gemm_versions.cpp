// The CUDA GEMM versions' names, their list, and which math each computes in: plain host code,
// compiled in every build (a CPU-only build still parses `--version` and `--math`).
#include <array>

#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda {

namespace {
struct VersionName {
  GemmVersion version;
  const char* name;
};
constexpr std::array<VersionName, 11> kVersionNames{{
    {GemmVersion::naive, "naive"},
    {GemmVersion::shared_tiles, "shared_tiles"},
    {GemmVersion::register_tiles, "register_tiles"},
    {GemmVersion::adaptive_tiles, "adaptive_tiles"},
    {GemmVersion::warp_tiles, "warp_tiles"},
    {GemmVersion::tf32_mma, "tf32_mma"},
    {GemmVersion::bf16_mma, "bf16_mma"},
    {GemmVersion::wgmma, "wgmma"},
    {GemmVersion::wgmma_pipelined, "wgmma_pipelined"},
    {GemmVersion::wgmma_repacked, "wgmma_repacked"},
    {GemmVersion::ffma_tuned, "ffma_tuned"},
}};

struct MathName {
  GemmMath math;
  const char* name;
};
constexpr std::array<MathName, 3> kMathNames{{
    {GemmMath::fp32, "fp32"},
    {GemmMath::tf32, "tf32"},
    {GemmMath::bf16, "bf16"},
}};
}  // namespace

const char* gemm_math_name(GemmMath math) {
  for (const MathName& m : kMathNames) {
    if (m.math == math) return m.name;
  }
  return "unknown";
}

std::optional<GemmMath> gemm_math_from_name(const std::string& name) {
  for (const MathName& m : kMathNames) {
    if (name == m.name) return m.math;
  }
  return std::nullopt;
}

const std::vector<GemmVersion>& gemm_versions() {
  static const std::vector<GemmVersion> versions = [] {
    std::vector<GemmVersion> all;
    for (const VersionName& v : kVersionNames) all.push_back(v.version);
    return all;
  }();
  return versions;
}

const char* gemm_version_name(GemmVersion version) {
  for (const VersionName& v : kVersionNames) {
    if (v.version == version) return v.name;
  }
  return "unknown";
}

std::optional<GemmVersion> gemm_version_from_name(const std::string& name) {
  for (const VersionName& v : kVersionNames) {
    if (name == v.name) return v.version;
  }
  return std::nullopt;
}

bool supports(GemmVersion version, GemmMath math) {
  switch (version) {
    case GemmVersion::tf32_mma:
    case GemmVersion::wgmma_pipelined:
      return math == GemmMath::tf32;
    case GemmVersion::bf16_mma:
      return math == GemmMath::bf16;
    case GemmVersion::wgmma:
    case GemmVersion::wgmma_repacked:
      return math == GemmMath::tf32 || math == GemmMath::bf16;
    default:
      return math == GemmMath::fp32;
  }
}

// Measured on an H200 (README.md): the mma.sync versions beat v8 on most shapes, because v8's
// register-staged operand loads, not its tensor cores, bound it.
GemmVersion best_version(GemmMath math) {
  switch (math) {
    case GemmMath::tf32:
      return GemmVersion::tf32_mma;
    case GemmMath::bf16:
      return GemmVersion::bf16_mma;
    case GemmMath::fp32:
      break;
  }
  return GemmVersion::best;
}

}  // namespace crema::kernels::cuda
