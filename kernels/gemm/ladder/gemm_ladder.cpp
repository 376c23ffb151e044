// The ladder's list, names, ideas and maths: plain host code, compiled in every build (a CPU-only
// build still parses `crema bench gemm --version`). The production rungs' names and maths are
// production's own (gemm_versions.cpp).
#include "kernels/gemm/ladder/gemm_ladder.h"

#include <array>

namespace crema::kernels::cuda::ladder {

namespace {

// One row per rung, in ladder order; `version` set for the rungs production runs, whose name is
// production's (name == nullptr here).
struct Entry {
  Rung rung;
  Path path;
  const char* name;
  std::optional<GemmVersion> version;
  const char* idea;
};
constexpr std::array<Entry, 21> kLadder{{
    {Rung::uncoalesced, Path::simt, "uncoalesced", std::nullopt,
     "one thread per element of C; consecutive threads walk down a column (32 rows of A a warp)"},
    {Rung::coalesced, Path::simt, "coalesced", std::nullopt,
     "consecutive threads along a row of C: B and C coalesced, A broadcast"},
    {Rung::shared_tiles, Path::simt, "shared_tiles", std::nullopt,
     "16x16 tiles of op(A) and op(B) staged in shared memory: a global load feeds 16 FMAs"},
    {Rung::column_tiles, Path::simt, "column_tiles", std::nullopt,
     "1-D register tile: 8 results of a column per thread, one shared B value feeds 8 FMAs"},
    {Rung::micro_tiles, Path::simt, "micro_tiles", std::nullopt,
     "2-D register tile: 8x8 results per thread of a 128x128 tile, 16 shared loads feed 64 FMAs"},
    {Rung::vector_fragments, Path::simt, "vector_fragments", std::nullopt,
     "op(A) stored k-major in shared memory, as op(B): a k step's fragments are 4 float4 loads"},
    {Rung::vector_loads, Path::simt, "vector_loads", std::nullopt,
     "float4 global loads and stores: a thread moves 4 consecutive floats in one instruction"},
    {Rung::register_prefetch, Path::simt, "register_prefetch", std::nullopt,
     "the next slab travels into registers while this slab's FFMAs run"},
    {Rung::double_buffer, Path::simt, "double_buffer", std::nullopt,
     "two shared slabs: the next one is stored beside the one being read, one barrier per slab"},
    {Rung::warp_tiles, Path::simt, "warp_tiles", std::nullopt,
     "threads grouped by warp: each warp a 32x64 patch of C, a lane 4x4 groups 16/32 apart"},
    {Rung::grouped_tiles, Path::simt, "grouped_tiles", std::nullopt,
     "blocks walk the tiles of C in groups of 8 tile rows: operand panels reused from L2"},
    {Rung::fragment_prefetch, Path::simt, "fragment_prefetch", std::nullopt,
     "the next k step's fragments read from shared memory while this step's FFMAs run"},
    {Rung::two_blocks_per_sm, Path::simt, "two_blocks_per_sm", std::nullopt,
     "at most 128 registers a thread: two blocks of 256 threads share an SM"},
    {Rung::edge_free_loads, Path::simt, "edge_free_loads", std::nullopt,
     "slabs inside C skip the loaders' edge tests: plain float4 loads (production's loop)"},
    {Rung::adaptive_tiles, Path::simt, "adaptive_tiles", std::nullopt,
     "the tile chosen per shape: 64x64, 32x32 or 16x16 tiles (k split in the block) for small C"},
    {Rung::ffma_tuned, Path::simt, nullptr, GemmVersion::ffma_tuned,
     "a small C with a long K splits K over the grid, the parts summed in order (production)"},
    {Rung::tf32_mma, Path::tensor_core, nullptr, GemmVersion::tf32_mma,
     "tensor cores: mma.sync m16n8k8 on TF32-rounded operands, a 3-stage cp.async ring"},
    {Rung::bf16_mma, Path::tensor_core, nullptr, GemmVersion::bf16_mma,
     "bf16 operands: mma.sync m16n8k16, twice the k per instruction"},
    {Rung::wgmma, Path::tensor_core, nullptr, GemmVersion::wgmma,
     "Hopper's wgmma: a warpgroup multiplies 64xN tiles read from swizzled shared memory"},
    {Rung::wgmma_pipelined, Path::tensor_core, nullptr, GemmVersion::wgmma_pipelined,
     "TMA copies the slabs through a 4-stage mbarrier ring: a producer warpgroup, two consumers"},
    {Rung::wgmma_repacked, Path::tensor_core, nullptr, GemmVersion::wgmma_repacked,
     "operands t4 cannot read in place (MN-major, bf16 math) repacked K-major first"},
}};

// Names the rungs had before the ladder was put in teaching order. (When s6 and s11 of 2026-11-26
// were split into one idea per rung, every name was kept; `fragment_prefetch`, then production's
// loop, now names that idea alone, s12, and production's loop is s14 `edge_free_loads`.)
struct Alias {
  const char* name;
  Rung rung;
};
constexpr std::array<Alias, 2> kAliases{{
    {"naive", Rung::coalesced},
    {"register_tiles", Rung::register_prefetch},
}};

const Entry& entry(Rung rung) {
  return kLadder[size_t(rung)];
}

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kLadder.size(); ++i) {
    if (size_t(kLadder[i].rung) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kLadder lists the rungs in the order of enum class Rung");

}  // namespace

const std::vector<Rung>& rungs() {
  static const std::vector<Rung> all = [] {
    std::vector<Rung> out;
    for (const Entry& e : kLadder) out.push_back(e.rung);
    return out;
  }();
  return all;
}

Path path(Rung rung) {
  return entry(rung).path;
}

int number(Rung rung) {
  int n = 0;
  for (const Entry& e : kLadder) {
    n += e.path == path(rung);
    if (e.rung == rung) break;
  }
  return n;
}

std::string label(Rung rung) {
  return (path(rung) == Path::simt ? "s" : "t") + std::to_string(number(rung));
}

const char* name(Rung rung) {
  const Entry& e = entry(rung);
  return e.version ? gemm_version_name(*e.version) : e.name;
}

const char* idea(Rung rung) {
  return entry(rung).idea;
}

std::optional<Rung> from_name(const std::string& text) {
  for (Rung rung : rungs()) {
    if (text == name(rung) || text == label(rung)) return rung;
  }
  for (const Alias& alias : kAliases) {
    if (text == alias.name) return alias.rung;
  }
  return std::nullopt;
}

std::optional<GemmVersion> production_version(Rung rung) {
  return entry(rung).version;
}

bool supports(Rung rung, GemmMath math) {
  if (const std::optional<GemmVersion> version = production_version(rung)) {
    return cuda::supports(*version, math);
  }
  return math == GemmMath::fp32;  // s1-s15 are fp32 SIMT
}

}  // namespace crema::kernels::cuda::ladder
