// The whole CUDA GEMM ladder in teaching order, one idea per rung, on two paths: the fp32 SIMT
// path (s1-s16, FFMA on the CUDA cores) and the tensor-core path (t1-t5). A rung production runs
// is a cuda::GemmVersion (s16, t1-t5); the others live here to teach and to measure (s1-s13) or
// run production's pieces alone (s14 its 128 x 128 loop, s15 its tile choice without the split
// of K). Tests, `crema bench gemm` and crema_gemm_ladder walk it; README.md tells what each rung
// changes and what it measured. Built into crema_kernel_ladders, not crema_kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda::ladder {

enum class Path {
  simt,         // fp32 FFMA on the CUDA cores: s1, s2, ...
  tensor_core,  // mma.sync and wgmma on TF32 or bf16 operands: t1, t2, ...
};

// Every rung, path by path, in teaching order; each differs from the one before by `idea`.
enum class Rung {
  uncoalesced,        // s1: one thread per element of C, consecutive threads down a column
  coalesced,          // s2: consecutive threads along a row of C
  shared_tiles,       // s3: 16x16 tiles of op(A) and op(B) staged in shared memory
  column_tiles,       // s4: 1-D register tile, 8 results of a column per thread
  micro_tiles,        // s5: 2-D register tile, 8x8 results per thread, 128x128 block tiles
  vector_fragments,   // s6: op(A) stored k-major in shared: fragments read as float4s
  vector_loads,       // s7: float4 global loads and stores
  register_prefetch,  // s8: the next slab loaded into registers during this slab's FFMAs
  double_buffer,      // s9: two shared slabs, one barrier per slab
  warp_tiles,         // s10: each warp a 32x64 patch of C
  grouped_tiles,      // s11: blocks walk C's tiles in groups of 8 tile rows (L2 reuse)
  fragment_prefetch,  // s12: the next k step's fragments read during this step's FFMAs
  two_blocks_per_sm,  // s13: at most 128 registers a thread, two blocks per SM
  edge_free_loads,    // s14: slabs inside C skip the edge tests (production's 128x128 loop)
  adaptive_tiles,     // s15: the tile size chosen per shape
  ffma_tuned,         // s16: K split over the grid for a small C with a long K (production)
  tf32_mma,           // t1: mma.sync m16n8k8 on TF32 operands, a 3-stage cp.async ring
  bf16_mma,           // t2: mma.sync m16n8k16 on bf16 operands
  wgmma,              // t3: Hopper's warpgroup MMA from swizzled shared memory
  wgmma_pipelined,    // t4: wgmma fed by TMA through an mbarrier ring, producer/consumer warps
  wgmma_repacked,     // t5: operands t4 cannot read in place repacked K-major first
};

// Every rung: s1 to s16, then t1 to t5.
const std::vector<Rung>& rungs();
Path path(Rung rung);
// Its number on its path (s1 and t1 are 1), and its label ("s3", "t2").
int number(Rung rung);
std::string label(Rung rung);
// Its name as `crema bench gemm --version` spells it ("shared_tiles").
const char* name(Rung rung);
// The one idea it adds to the rung before it, in a line.
const char* idea(Rung rung);
// The rung a name, a label or an older name ("naive", "register_tiles") stands for (nullopt:
// unknown).
std::optional<Rung> from_name(const std::string& text);
// The production version a rung is (s16, t1-t5), nullopt for the others.
std::optional<GemmVersion> production_version(Rung rung);
// Whether `rung` computes in `math`: the SIMT path fp32; a production rung as cuda::supports says.
bool supports(Rung rung, GemmMath math);

// cuda::sgemm for any rung: a production rung is forwarded to it (same arguments, same
// guarantees); s1-s15 compute in fp32, accept any shape, leading dimension and alignment, ignore
// `workspace`, and throw crema::Error in another math.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, Rung rung, GemmMath math, float* workspace = nullptr);
// cuda::sgemm_workspace for any rung (0 for s1-s15).
size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Rung rung,
                       GemmMath math);

}  // namespace crema::kernels::cuda::ladder
