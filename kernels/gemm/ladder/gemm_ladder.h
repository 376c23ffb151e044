// The whole CUDA GEMM ladder, v1 to v11: the production versions (cuda::GemmVersion, v6-v11) and
// the steps that led to them and that production never runs (v1-v5, kept here to teach and to
// measure). Tests and `crema bench gemm` walk it; README.md tells what each rung changes and
// what it measured. Built into crema_kernel_ladders, not crema_kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda::ladder {

// Every rung, numbered as README.md's ladder; a rung production runs is the cuda::GemmVersion of
// the same number and name.
enum class Rung {
  naive = 1,        // v1: one thread per element of C, operands read straight from global memory
  shared_tiles,     // v2: 16x16 tiles of op(A) and op(B) staged in shared memory
  register_tiles,   // v3: 128x128 block tiles, an 8x8 micro-tile per thread, float4 loads
  adaptive_tiles,   // v4: v3 with the tile size chosen per shape; small tiles split k in the block
  warp_tiles,       // v5: v3 with warp-shaped thread groups, 16-deep slabs, two shared buffers
  tf32_mma,         // v6 and up: the production versions (gemm.h)
  bf16_mma,         // v7
  wgmma,            // v8
  wgmma_pipelined,  // v9
  wgmma_repacked,   // v10
  ffma_tuned,       // v11
};

// Every rung, v1 to v11.
const std::vector<Rung>& rungs();
// Its number on the ladder (v1 is 1).
constexpr int number(Rung rung) {
  return int(rung);
}
// Its name as `crema bench gemm --version` spells it ("adaptive_tiles"), and back (nullopt:
// unknown).
const char* name(Rung rung);
std::optional<Rung> from_name(const std::string& name);
// The production version a rung is (v6-v11), nullopt for the rungs that live only here (v1-v5).
std::optional<GemmVersion> production_version(Rung rung);
// Whether `rung` computes in `math`: v1-v5 fp32; a production rung as cuda::supports says.
bool supports(Rung rung, GemmMath math);

// cuda::sgemm for any rung: a production rung is forwarded to it (same arguments, same
// guarantees); v1-v5 compute in fp32, accept any shape, leading dimension and alignment, ignore
// `workspace`, and throw crema::Error in another math.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, Rung rung, GemmMath math, float* workspace = nullptr);
// cuda::sgemm_workspace for any rung (0 for v1-v5).
size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Rung rung,
                       GemmMath math);

}  // namespace crema::kernels::cuda::ladder
