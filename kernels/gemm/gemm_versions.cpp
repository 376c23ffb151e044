// The production CUDA GEMM versions' names and the math each computes in, and the maths' names:
// plain host code, compiled in every build (a CPU-only build still parses `--math`).
#include <array>

#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda {

namespace {
struct VersionName {
  GemmVersion version;
  const char* name;
};
constexpr std::array<VersionName, 7> kVersionNames{{
    {GemmVersion::tf32_mma, "tf32_mma"},
    {GemmVersion::bf16_mma, "bf16_mma"},
    {GemmVersion::wgmma, "wgmma"},
    {GemmVersion::wgmma_pipelined, "wgmma_pipelined"},
    {GemmVersion::wgmma_repacked, "wgmma_repacked"},
    {GemmVersion::ffma_tuned, "ffma_tuned"},
    {GemmVersion::wgmma_in_place, "wgmma_in_place"},
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

const char* gemm_version_name(GemmVersion version) {
  for (const VersionName& v : kVersionNames) {
    if (v.version == version) return v.name;
  }
  return "unknown";
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
    case GemmVersion::ffma_tuned:
      return math == GemmMath::fp32;
    case GemmVersion::wgmma_in_place:  // 16-bit operands in memory (cuda::gemm_16bit) only
      return false;
  }
  return false;
}

// Measured on an H200 (README.md): the mma.sync versions beat t3 on most shapes, because t3's
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
