// The ladder's list, names and maths: plain host code, compiled in every build (a CPU-only build
// still parses `crema bench gemm --version`). The production rungs' names and maths are
// production's own (gemm_versions.cpp); only v1-v5 are named here.
#include "kernels/gemm/ladder/gemm_ladder.h"

#include <array>

namespace crema::kernels::cuda::ladder {

namespace {
// The rungs that live only here, with their names; every other rung is production's version of
// the same number (its name and maths are production's).
struct LadderOnly {
  Rung rung;
  const char* name;
};
constexpr std::array<LadderOnly, 5> kLadderOnly{{
    {Rung::naive, "naive"},
    {Rung::shared_tiles, "shared_tiles"},
    {Rung::register_tiles, "register_tiles"},
    {Rung::adaptive_tiles, "adaptive_tiles"},
    {Rung::warp_tiles, "warp_tiles"},
}};
constexpr Rung kLastRung = Rung::ffma_tuned;
static_assert(number(Rung::tf32_mma) == int(GemmVersion::tf32_mma) &&
                  number(kLastRung) == int(GemmVersion::ffma_tuned),
              "a production rung is the GemmVersion of the same number");

const LadderOnly* ladder_only(Rung rung) {
  for (const LadderOnly& entry : kLadderOnly) {
    if (entry.rung == rung) return &entry;
  }
  return nullptr;
}
}  // namespace

const std::vector<Rung>& rungs() {
  static const std::vector<Rung> all = [] {
    std::vector<Rung> out;
    for (int n = number(Rung::naive); n <= number(kLastRung); ++n) out.push_back(Rung(n));
    return out;
  }();
  return all;
}

std::optional<GemmVersion> production_version(Rung rung) {
  if (ladder_only(rung) != nullptr) return std::nullopt;
  return GemmVersion(number(rung));
}

const char* name(Rung rung) {
  if (const LadderOnly* entry = ladder_only(rung)) return entry->name;
  return gemm_version_name(GemmVersion(number(rung)));
}

std::optional<Rung> from_name(const std::string& text) {
  for (Rung rung : rungs()) {
    if (text == name(rung)) return rung;
  }
  return std::nullopt;
}

bool supports(Rung rung, GemmMath math) {
  if (ladder_only(rung) != nullptr) return math == GemmMath::fp32;  // v1-v5 are fp32 SIMT
  return cuda::supports(GemmVersion(number(rung)), math);
}

}  // namespace crema::kernels::cuda::ladder
