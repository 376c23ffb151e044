// Internals of cpu::sgemm that tests reach into: the microkernel contract, the per-ISA kernel
// sets, and an entry point that forces one ISA so every microkernel the machine can run is tested.
// Layers and apps use kernels/gemm/gemm.h, not this header.
#pragma once

#include <cstdint>

namespace crema::kernels::cpu::gemm_internal {

// The largest register-tile height of any kernel set (the size of KernelSet::by_rows).
constexpr int kMaxMR = 16;

// A microkernel computes one register tile of C:
//
//   C[rows, cols] = alpha * Ap[rows, kc] * Bp[kc, cols] + beta * C[rows, cols]
//
// from packed micro-panels: Ap[p * MR + i] = op(A)[i, p] (MR values per step p, i < rows are
// read) and Bp[p * NR + j] = op(B)[p, j] (NR values per step p, 64-byte aligned, zero-padded past
// cols). `rows` <= MR is fixed by the function (KernelSet::by_rows[rows - 1]); 1 <= cols <= NR.
// C has row stride ldc. beta == 0 stores without reading C.
using Microkernel = void (*)(int64_t kc, float alpha, const float* a, const float* b, float beta,
                             float* c, int64_t ldc, int64_t cols);

// Packing copies a block of op(A) or op(B) into the micro-panel layout above. `a` (`b`) points
// at the block's first element as stored: op(A)[i0, p0] is a[0] in both cases, and element
// op(A)[i0 + i, p0 + p] is a[i * lda + p], or a[p * lda + i] when trans_a.
//   PackA: op(A)[mc, kc] -> ceil(mc / MR) micro-panels of kc x MR floats, out[r*MR*kc + p*MR + i]
//   PackB: op(B)[kc, nc] -> ceil(nc / NR) micro-panels of kc x NR floats, out[s*NR*kc + p*NR + j],
//          zero past column nc so the microkernel may compute on the padding.
// The transposing cases are real transposes (rows of the stored matrix become columns of the
// panel); each ISA does them in registers, 16 x 16 or 8 x 8 at a time.
using PackA = void (*)(bool trans_a, const float* a, int64_t lda, int64_t mc, int64_t kc,
                       float* out);
using PackB = void (*)(bool trans_b, const float* b, int64_t ldb, int64_t kc, int64_t nc,
                       float* out);

// One instruction set's microkernels, packing routines and the cache blocking tuned for them.
struct KernelSet {
  const char* name;  // what cpu::sgemm_isa() reports
  int mr;            // register tile height (rows of C)
  int nr;            // register tile width (columns of C), a multiple of the vector width
  int64_t kc;        // depth of the packed panels (KC x NR and MR x KC micro-panels in L1/L2)
  int64_t mc;        // rows of the packed A block (MC x KC stays in L2)
  int64_t nc;        // columns of the packed B panel (KC x NC stays in L3)
  PackA pack_a;
  PackB pack_b;
  Microkernel by_rows[kMaxMR];  // by_rows[r - 1] computes r rows; entries past mr are null
};

enum class Isa { generic, avx2_fma, avx512 };

// Kernel sets, defined in gemm_cpu_<isa>.cpp. Calling a set's kernels on a CPU without
// its instructions is undefined; check isa_supported first.
const KernelSet& generic_kernels();
const KernelSet& avx2_fma_kernels();
const KernelSet& avx512_kernels();

bool isa_supported(Isa isa);
const KernelSet& kernel_set(Isa isa);
// The fastest ISA this CPU supports: what cpu::sgemm uses.
Isa best_isa();

// cpu::sgemm with the microkernels of `isa` (which must be supported).
void sgemm_with_isa(Isa isa, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc, int num_threads);

}  // namespace crema::kernels::cpu::gemm_internal
