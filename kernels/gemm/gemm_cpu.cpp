// The packed CPU GEMM (BLIS / GotoBLAS structure). For one thread's share of C the loops are
//
//   for jc in N step NC:                 B panel op(B)[pc:pc+KC, jc:jc+NC] packed -> Bp (L3)
//     for pc in K step KC:
//       pack Bp                          KC x NC, as NC/NR micro-panels of KC x NR
//       for ic in M step MC:             A block op(A)[ic:ic+MC, pc:pc+KC] packed -> Ap (L2)
//         pack Ap                        MC x KC, as MC/MR micro-panels of KC x MR
//         for jr in NC step NR:          one KC x NR micro-panel of Bp is reused ...
//           for ir in MC step MR:        ... by every A micro-panel of the block
//             microkernel: C[ir:ir+MR, jr:jr+NR] = alpha * Ap_ir * Bp_jr + beta' * C
//
// with beta' = beta for the first KC slice and 1 after it. When M fits one A block (the skinny
// GEMMs of convolution and inner-product layers) the pc loop goes outside instead, A is packed
// once per slice and B goes through narrow L2-sized panels (gemm_part). Packing absorbs the
// transposes, so the microkernels only ever see unit-stride, aligned panels. Threads split C
// (and, for a long K with a small C, K) into disjoint parts chosen by a cost model (plan_threads).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_cpu_internal.h"

namespace crema::kernels::cpu {
namespace gemm_internal {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// Splits `extent` into blocks of at most about `block`, all of one size (a multiple of
// `granule`), so that no block is a sliver: K = 500 with KC = 256 gives 2 x 250, not 256 + 244.
int64_t balanced_block(int64_t extent, int64_t block, int64_t granule) {
  const int64_t blocks = ceil_div(extent, block);
  return round_up(ceil_div(extent, blocks), granule);
}

// Scratch memory for the packed panels and partial products, kept by each calling thread from
// one call to the next and grown when a call needs more. Allocating it per call cost page faults
// on every call (glibc gives blocks of this size back to the kernel on free), and the Context's
// workspace cannot be used: callers such as convolution hold it (their im2col columns) while
// they call GEMM. It carries no values between calls.
float* thread_scratch(int64_t floats) {
  thread_local std::vector<float> buffer;
  const size_t wanted = size_t(floats) + 16;  // room to start on a 64-byte boundary
  if (buffer.size() < wanted) buffer.resize(wanted);
  const size_t misalignment = reinterpret_cast<uintptr_t>(buffer.data()) % 64;
  return buffer.data() + (64 - misalignment) % 64 / sizeof(float);
}

struct Operands {
  bool trans_a, trans_b;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float alpha;
  // Where op(A)[i, p] and op(B)[p, j] are stored.
  const float* a_at(int64_t i, int64_t p) const {
    return trans_a ? A + p * lda + i : A + i * lda + p;
  }
  const float* b_at(int64_t p, int64_t j) const {
    return trans_b ? B + j * ldb + p : B + p * ldb + j;
  }
};

// Floats of a packed B panel when it is used by a single A block: 256 KiB, a quarter of L2.
constexpr int64_t kNarrowPanelFloats = 64 * 1024;

// Cache blocks for one thread's part of the problem (all parts use the same sizes).
struct Blocking {
  int64_t kc, mc, nc;
};

// The macro-kernel: C[0:mc, 0:nc] = alpha * Ap * Bp + beta * C over one KC slice, one column of
// register tiles at a time, so each B micro-panel is reused by all the A micro-panels.
void macro_kernel(const KernelSet& ks, int64_t kc, int64_t mc, int64_t nc, float alpha,
                  const float* ap, const float* bp, float beta, float* c, int64_t ldc) {
  for (int64_t jr = 0; jr < nc; jr += ks.nr) {
    const int64_t cols = std::min<int64_t>(ks.nr, nc - jr);
    for (int64_t ir = 0; ir < mc; ir += ks.mr) {
      const int64_t rows = std::min<int64_t>(ks.mr, mc - ir);
      ks.by_rows[rows - 1](kc, alpha, ap + ir * kc, bp + jr * kc, beta, c + ir * ldc + jr, ldc,
                           cols);
    }
  }
}

// C[0:m, 0:n] = alpha * op(A)[i0:i0+m, p0:p0+k] * op(B)[p0:p0+k, j0:j0+n] + beta * C on one
// thread; `c` points at the part's first element. Ap holds mc*kc floats, Bp kc*nc. The first KC
// slice applies beta; later slices accumulate onto it.
void gemm_part(const KernelSet& ks, const Operands& op, const Blocking& blk, int64_t i0, int64_t j0,
               int64_t p0, int64_t m, int64_t n, int64_t k, float beta, float* c, int64_t ldc,
               float* ap, float* bp) {
  if (m <= blk.mc) {
    // One A block (the skinny M of convolution and inner-product layers): pack it once per KC
    // slice and stream B through in narrow panels that stay in L2 from packing to use.
    for (int64_t pc = 0; pc < k; pc += blk.kc) {
      const int64_t kc = std::min(blk.kc, k - pc);
      ks.pack_a(op.trans_a, op.a_at(i0, p0 + pc), op.lda, m, kc, ap);
      for (int64_t jc = 0; jc < n; jc += blk.nc) {
        const int64_t nc = std::min(blk.nc, n - jc);
        ks.pack_b(op.trans_b, op.b_at(p0 + pc, j0 + jc), op.ldb, kc, nc, bp);
        macro_kernel(ks, kc, m, nc, op.alpha, ap, bp, pc == 0 ? beta : 1.0f, c + jc, ldc);
      }
    }
    return;
  }
  // Several A blocks: the packed B panel is reused by each of them (GotoBLAS order).
  for (int64_t jc = 0; jc < n; jc += blk.nc) {
    const int64_t nc = std::min(blk.nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += blk.kc) {
      const int64_t kc = std::min(blk.kc, k - pc);
      ks.pack_b(op.trans_b, op.b_at(p0 + pc, j0 + jc), op.ldb, kc, nc, bp);
      for (int64_t ic = 0; ic < m; ic += blk.mc) {
        const int64_t mc = std::min(blk.mc, m - ic);
        ks.pack_a(op.trans_a, op.a_at(i0 + ic, p0 + pc), op.lda, mc, kc, ap);
        macro_kernel(ks, kc, mc, nc, op.alpha, ap, bp, pc == 0 ? beta : 1.0f, c + ic * ldc + jc,
                     ldc);
      }
    }
  }
}

// How the work is divided into parts: a tm x tn grid of C blocks, each of whose K ranges is cut
// into tk slices. Slices past the first accumulate into private copies of C that are summed at
// the end, which is what keeps both cores busy on a long K with a small C, e.g. the filter
// gradient (M, N, K) = (20, 25, 36864).
struct ThreadPlan {
  int tm = 1, tn = 1, tk = 1;
  int64_t chunk_m, chunk_n, chunk_k;  // extent of each part (the last one may be smaller)
  int parts() const { return tm * tn * tk; }
};

// Part extents: N is cut on multiples of NR so no thread packs a ragged panel in the middle.
ThreadPlan make_plan(const KernelSet& ks, int64_t M, int64_t N, int64_t K, int tm, int tn, int tk) {
  ThreadPlan plan;
  plan.tm = tm, plan.tn = tn, plan.tk = tk;
  plan.chunk_m = ceil_div(M, tm);
  plan.chunk_n = round_up(ceil_div(N, tn), ks.nr);
  plan.chunk_k = ceil_div(K, tk);
  return plan;
}

// The number of K slices depends on the shape only, never on the thread count, so that results
// are bitwise the same on any number of threads: splitting M or N does not change the order in
// which any element of C is summed, splitting K does. Only a small C with a long K is sliced
// (into a power of two of slices, which divides evenly among 1, 2, 4 ... threads).
constexpr int64_t kSlicedMaxC = 16 * 1024;  // elements of C
constexpr int64_t kMinSliceK = 1024;
constexpr int kMaxSlices = 16;

int k_slices(int64_t M, int64_t N, int64_t K) {
  if (M * N > kSlicedMaxC) return 1;
  int slices = 1;
  while (slices < kMaxSlices && K / (2 * slices) >= kMinSliceK) slices *= 2;
  return slices;
}

// Estimated cycles of the slowest thread: FMAs (at two NR-wide rows per cycle, including the
// padding of ragged tiles), plus about a cycle per float packed, plus a fixed cost for waking a
// thread team. Only the ranking of the candidates matters.
double plan_cost(const KernelSet& ks, const ThreadPlan& plan) {
  const double m = double(plan.chunk_m), n = double(plan.chunk_n), k = double(plan.chunk_k);
  const double compute = m * n * k / ks.nr;
  const double pack = m * k * double(ceil_div(plan.chunk_n, ks.nc)) + k * n;
  const double team = plan.tm * plan.tn > 1 ? 5000.0 : 0.0;
  return compute + pack + team;
}

// The grid of C blocks for `threads` threads (some may stay idle when C is small).
ThreadPlan plan_threads(const KernelSet& ks, int64_t M, int64_t N, int64_t K, int threads) {
  const int tk = k_slices(M, N, K);
  const int grid = std::max(1, threads / tk);
  ThreadPlan best = make_plan(ks, M, N, K, 1, 1, tk);
  double best_cost = plan_cost(ks, best);
  for (int tm = 1; tm <= grid && tm <= M; ++tm) {
    for (int tn = 1; tm * tn <= grid && tn <= ceil_div(N, ks.nr); ++tn) {
      const ThreadPlan plan = make_plan(ks, M, N, K, tm, tn, tk);
      const double cost = plan_cost(ks, plan);
      if (cost < best_cost) best = plan, best_cost = cost;
    }
  }
  return best;
}

Blocking make_blocking(const KernelSet& ks, const ThreadPlan& plan) {
  Blocking blk;
  blk.kc = balanced_block(plan.chunk_k, ks.kc, 1);
  blk.mc = balanced_block(plan.chunk_m, ks.mc, ks.mr);
  // With a single A block no B panel is reused, so it only has to survive from packing to use:
  // a narrow one that stays in L2 beats a wide one that goes out to L3 and comes back.
  const int64_t nc =
      plan.chunk_m <= ks.mc ? std::max<int64_t>(ks.nr, kNarrowPanelFloats / blk.kc) : ks.nc;
  blk.nc = balanced_block(plan.chunk_n, nc, ks.nr);
  return blk;
}

// C = beta * C, the whole result when alpha == 0 or K == 0 (A and B are then not read).
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return true;
    case Isa::avx2_fma:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2_fma)) return Isa::avx2_fma;
  return Isa::generic;
}

const KernelSet& kernel_set(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return avx512_kernels();
    case Isa::avx2_fma:
      return avx2_fma_kernels();
    case Isa::generic:
      break;
  }
  return generic_kernels();
}

void sgemm_with_isa(Isa isa, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc, int num_threads) {
  CREMA_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm: negative extent");
  CREMA_CHECK(lda >= std::max<int64_t>(1, trans_a ? M : K), "sgemm: lda smaller than a row of A");
  CREMA_CHECK(ldb >= std::max<int64_t>(1, trans_b ? K : N), "sgemm: ldb smaller than a row of B");
  CREMA_CHECK(ldc >= std::max<int64_t>(1, N), "sgemm: ldc smaller than a row of C");
  CREMA_CHECK(isa_supported(isa), "sgemm: this CPU lacks the requested instruction set");
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  const KernelSet& ks = kernel_set(isa);
  const ThreadPlan plan = plan_threads(ks, M, N, K, std::max(1, num_threads));
  const Blocking blk = make_blocking(ks, plan);
  const Operands op{trans_a, trans_b, A, lda, B, ldb, alpha};
  const int parts = plan.parts();
  const int team = std::min(parts, std::max(1, num_threads));

  // Per thread an A block and a B panel, then the tk - 1 private copies of C [M, N] for the K
  // slices past the first.
  const int64_t a_floats = round_up(blk.mc * blk.kc, 16);
  const int64_t b_floats = round_up(blk.kc * blk.nc, 16);
  const int64_t partial_floats = M * N;
  float* scratch = thread_scratch(team * (a_floats + b_floats) + (plan.tk - 1) * partial_floats);
  float* partials = scratch + team * (a_floats + b_floats);

  auto run_part = [&](int part, float* ap, float* bp) {
    const int im = part % plan.tm, in = part / plan.tm % plan.tn, ik = part / (plan.tm * plan.tn);
    const int64_t i0 = im * plan.chunk_m, j0 = in * plan.chunk_n, p0 = ik * plan.chunk_k;
    const int64_t m = std::min(plan.chunk_m, M - i0), n = std::min(plan.chunk_n, N - j0);
    const int64_t k = std::min(plan.chunk_k, K - p0);
    if (m <= 0 || n <= 0 || k <= 0) return;
    if (ik == 0) {
      gemm_part(ks, op, blk, i0, j0, p0, m, n, k, beta, C + i0 * ldc + j0, ldc, ap, bp);
    } else {
      float* partial = partials + (ik - 1) * partial_floats;
      gemm_part(ks, op, blk, i0, j0, p0, m, n, k, 0.0f, partial + i0 * N + j0, N, ap, bp);
    }
  };
  // C[r0:r1, :] += the partial products of the K slices, always in slice order.
  auto add_partials = [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* row = C + i * ldc;
      for (int q = 0; q < plan.tk - 1; ++q) {
        const float* src = partials + q * partial_floats + i * N;
        for (int64_t j = 0; j < N; ++j) row[j] += src[j];
      }
    }
  };
  if (team == 1) {
    for (int part = 0; part < parts; ++part) run_part(part, scratch, scratch + a_floats);
    add_partials(0, M);
    return;
  }
#pragma omp parallel num_threads(team)
  {
    // The team may be smaller than asked (nested parallelism): threads then take more parts.
    const int got = omp_get_num_threads(), tid = omp_get_thread_num();
    float* ap = scratch + tid * (a_floats + b_floats);
    for (int part = tid; part < parts; part += got) run_part(part, ap, ap + a_floats);
    if (plan.tk > 1) {
#pragma omp barrier
      add_partials(M * tid / got, M * (tid + 1) / got);
    }
  }
}

}  // namespace gemm_internal

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           int num_threads) {
  gemm_internal::sgemm_with_isa(gemm_internal::best_isa(), trans_a, trans_b, M, N, K, alpha, A, lda,
                                B, ldb, beta, C, ldc, num_threads);
}

const char* sgemm_isa() {
  return gemm_internal::kernel_set(gemm_internal::best_isa()).name;
}

}  // namespace crema::kernels::cpu
