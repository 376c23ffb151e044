// The whole CUDA GEMM ladder in teaching order, one idea per rung, on two paths: the fp32 SIMT
// path (s1-s13, FFMA on the CUDA cores) and the tensor-core path (t1-t5). A rung production runs
// is a cuda::GemmVersion (s13, t1-t5); the others live here to teach and to measure (s1-s10) or
// run production's pieces alone (s11 its 128 x 128 loop, s12 its tile choice without the split
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
  vector_loads,       // s6: float4 global loads and stores, op(A) stored k-major in shared
  register_prefetch,  // s7: the next slab loaded into registers during this slab's FFMAs
  double_buffer,      // s8: two shared slabs, one barrier per slab
  warp_tiles,         // s9: each warp a 32x64 patch of C
  grouped_tiles,      // s10: blocks walk C's tiles in groups of 8 tile rows (L2 reuse)
  fragment_prefetch,  // s11: the next k step's fragments read during the FFMAs, 2 blocks/SM
  adaptive_tiles,     // s12: the tile size chosen per shape
  ffma_tuned,         // s13: K split over the grid for a small C with a long K (production)
  tf32_mma,           // t1: mma.sync m16n8k8 on TF32 operands, a 3-stage cp.async ring
  bf16_mma,           // t2: mma.sync m16n8k16 on bf16 operands
  wgmma,              // t3: Hopper's warpgroup MMA from swizzled shared memory
  wgmma_pipelined,    // t4: wgmma fed by TMA through an mbarrier ring, producer/consumer warps
  wgmma_repacked,     // t5: operands t4 cannot read in place repacked K-major first
};

// Every rung: s1 to s13, then t1 to t5.
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
// The production version a rung is (s13, t1-t5), nullopt for the others.
std::optional<GemmVersion> production_version(Rung rung);
// Whether `rung` computes in `math`: the SIMT path fp32; a production rung as cuda::supports says.
bool supports(Rung rung, GemmMath math);

// cuda::sgemm for any rung: a production rung is forwarded to it (same arguments, same
// guarantees); s1-s12 compute in fp32, accept any shape, leading dimension and alignment, ignore
// `workspace`, and throw crema::Error in another math.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, Rung rung, GemmMath math, float* workspace = nullptr);
// cuda::sgemm_workspace for any rung (0 for s1-s12).
size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Rung rung,
                       GemmMath math);

}  // namespace crema::kernels::cuda::ladder
