// CUDA GEMM, the TMA-fed tensor-core paths: t4 (wgmma_pipelined, NT, operands truncated to TF32),
// t5 (wgmma_repacked: every layout, MN-major operands repacked into a NaN-poisoned workspace),
// cuda::gemm_bf16 (bf16 operands in memory, every layout) and the Tensor-level gemm picking t5
// for large shapes. References and tolerances: gemm_cuda_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/gemm_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::gemm_testing {
namespace {

using cuda::GemmVersion;

TEST(GemmCuda, PipelinedTmaPath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // NT shapes t4's TMA path takes: M, N not dividing its 128 x 256 tile, K from one partial slab
  // (4) to 32 slabs (8 laps of the 4-stage ring), padded rows (NaN past K), alpha/beta blends.
  const Case cases[] = {
      {false, true, 1, 1, 4, 0, 1.0f, 0.0f},         {false, true, 7, 257, 36, 0, 1.0f, 0.0f},
      {false, true, 129, 300, 260, 4, 0.5f, 1.0f},   {false, true, 257, 520, 1000, 0, 1.0f, 0.0f},
      {false, true, 300, 129, 516, 8, -1.5f, 0.25f}, {false, true, 64, 500, 800, 0, 1.0f, 0.0f}};
  const Variant t4{Rung::wgmma_pipelined, GemmMath::tf32};
  uint64_t seed = 650;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    ASSERT_TRUE(truncates(p, t4, 0)) << describe(c);
    const std::vector<float> out = run(ctx, p, t4);
    expect_matches(p, out, t4.math, p.expected_tf32_truncated, describe(c));
    // Truncated, not rounded: a t3 fallback (which rounds) would be within 1e-5 of this one.
    if (c.K >= 256) {
      EXPECT_GT(relative_error(p, out, p.expected_tf32), 2e-5) << describe(c);
    }
  }
}

TEST(GemmCuda, RepackedEveryLayout) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // t5 in both maths, every layout: shapes not dividing the 128 x 256 tile, K not a multiple of 4
  // (both operands copied, zero-padded), 1000 (8 laps of the ring), padded leading dimensions (an
  // operand read in place with ld % 4 != 0: t4 then t3 take the call), a misaligned base,
  // alpha/beta blends on NaN-poisoned C; then without a workspace (t4 or t3 take the call). A
  // skinny C with a long K (one 128 x 256 tile, K = 6000) splits K over the grid into parts in
  // the workspace (gemm_16bit_cuda.cu: wgmma_split).
  struct Run {
    Case c;
    int64_t offset;
    bool no_workspace;
  };
  const Run runs[] = {{{false, false, 129, 257, 71, 0, 1.0f, 0.0f}, 0, false},
                      {{false, false, 129, 257, 72, 0, 0.5f, 1.0f}, 0, false},
                      {{false, false, 257, 300, 1000, 0, 1.0f, 0.0f}, 0, false},
                      {{false, false, 300, 129, 516, 4, -1.5f, 0.25f}, 0, false},
                      {{false, false, 65, 33, 36, 3, 1.0f, 0.0f}, 0, false},
                      {{false, false, 64, 128, 32, 4, 2.0f, -1.0f}, 1, false},
                      {{false, false, 129, 257, 300, 0, 1.0f, 0.0f}, 0, true},
                      {{false, false, 96, 200, 6000, 0, 1.0f, 1.0f}, 0, false}};
  uint64_t seed = 900;
  for (const Run& r : runs) {
    for (int t = 0; t < 4; ++t) {
      Case c = r.c;
      c.trans_a = t & 1, c.trans_b = t & 2;
      const Problem p = make_problem(c, seed += 8);
      for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
        const Variant v{Rung::wgmma_repacked, math};
        const std::string what = describe(c) + " " + name(v) +
                                 " offset=" + std::to_string(r.offset) +
                                 (r.no_workspace ? " no workspace" : "");
        if (c.K >= 4096) {  // the split's parts: at least two M x N slices of the workspace
          EXPECT_GE(cuda::sgemm_workspace(c.trans_a, c.trans_b, c.M, c.N, c.K,
                                          cuda::GemmVersion::wgmma_repacked, math),
                    size_t(2 * c.M * c.N))
              << what;
        }
        const std::vector<float> out = run(ctx, p, v, r.offset, r.no_workspace);
        expect_matches(p, out, math, operand_reference(p, v, r.offset, r.no_workspace), what);
        // Truncated where gemm.h says t4's kernel runs: a silent fallback (rounding) fails here.
        if (truncates(p, v, r.offset, r.no_workspace) && c.K >= 256) {
          EXPECT_GT(relative_error(p, out, p.expected_tf32), 2e-5) << what;
        }
      }
    }
  }
}

TEST(GemmCuda, Bf16OperandsInMemory) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // Every layout on shapes not dividing t4's 128 x 256 tile, K from one partial slab (8) to 16
  // slabs (4 laps of the ring) and K = 71 (both operands transposed or copied into the workspace,
  // zero-padded to 72), padded rows (NaN past K), alpha/beta blends.
  const Case cases[] = {
      {false, true, 1, 1, 8, 0, 1.0f, 0.0f},       {false, true, 7, 257, 72, 0, 1.0f, 0.0f},
      {false, true, 129, 300, 264, 8, 0.5f, 1.0f}, {false, true, 257, 520, 1000, 0, 1.0f, 0.0f},
      {false, true, 129, 257, 71, 0, 1.0f, 0.0f},  {false, true, 300, 129, 520, 8, -1.5f, 0.25f}};
  uint64_t seed = 680;
  for (Case c : cases) {
    for (int t = 0; t < 4; ++t) {
      c.trans_a = t & 1, c.trans_b = t & 2;
      const Problem p = make_problem(c, seed += 8);
      const Tensor a = upload_bf16(ctx, p.a), b = upload_bf16(ctx, p.b);
      Tensor out = upload(ctx, p.c0);
      const size_t floats = cuda::gemm_bf16_workspace(c.trans_a, c.trans_b, c.M, c.N, c.K);
      EXPECT_EQ(floats == 0, !c.trans_a && c.trans_b && c.K % 8 == 0) << describe(c);
      Tensor workspace = ctx.empty({int64_t(std::max<size_t>(floats, 1))});
      ctx.fill(workspace, kNaN);
      cuda::gemm_bf16(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, bf16_data(a), p.lda,
                      bf16_data(b), p.ldb, c.beta, out.data<float>(), p.ldc, ctx.stream(),
                      floats > 0 ? workspace.data<float>() : nullptr);
      ctx.synchronize();
      expect_matches(p, out.to_vector(), GemmMath::bf16, p.expected_bf16, describe(c));
    }
  }
  // What it does not take is refused with the reason: a layout that needs a workspace without
  // one, an operand read in place with a row of 12 bf16 (24 bytes) or a base off 16-byte
  // alignment.
  Tensor a = ctx.empty({256}), b = ctx.empty({256}), c = ctx.empty({256});
  const auto expect_refused = [&](bool trans_b, int64_t lda, int64_t offset, const char* why) {
    try {
      cuda::gemm_bf16(false, trans_b, 8, 8, 8, 1.0f, bf16_data(a) + offset, lda, bf16_data(b), 8,
                      0.0f, c.data<float>(), 8, ctx.stream());
      FAIL() << why << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  expect_refused(false, 8, 0, "needs a 16-byte aligned workspace");
  expect_refused(true, 12, 0, "a multiple of 8");
  expect_refused(true, 8, 1, "16-byte aligned");
}

TEST(GemmCuda, TensorLevelPicksRepackedForLargeShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  EXPECT_EQ(cuda::best_version(GemmMath::tf32, 1023, 4096, 4096), GemmVersion::tf32_mma);
  EXPECT_EQ(cuda::best_version(GemmMath::bf16, 4096, 4096, 255), GemmVersion::bf16_mma);
  EXPECT_EQ(cuda::best_version(GemmMath::tf32, 1024, 1024, 512), GemmVersion::tf32_mma);
  EXPECT_EQ(cuda::best_version(GemmMath::fp32, 4096, 4096, 4096), GemmVersion::best);
  EXPECT_EQ(cuda::best_version(GemmMath::fp32, 384, 96, 200704), GemmVersion::best);
  if (cuda::best_version(GemmMath::tf32, 1024, 1024, 1024) != GemmVersion::wgmma_repacked) {
    GTEST_SKIP() << "t5 is picked on compute capability 9.0 only";
  }
  // A weight gradient's skinny C and long K takes t5 (its split of K), in both maths.
  for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
    EXPECT_EQ(cuda::best_version(math, 384, 96, 200704), GemmVersion::wgmma_repacked);
    EXPECT_EQ(cuda::best_version(math, 384, 96, 4095), cuda::best_version(math));
  }
  // c = a b (NN, B repacked from ctx.workspace()): truncated TF32 in tf32, bf16 in bf16. The
  // references cover every 32nd row of C (32 rows of the 1024: the four double-precision products
  // of the whole C took ~20 s of the device's host time).
  const Case c{false, false, 1024, 1024, 1024, 0, 1.0f, 0.0f};
  const Problem p = make_problem(c, 1000, /*with_references=*/false);
  constexpr int64_t kStride = 32;
  Problem rows = p;
  rows.c.M = c.M / kStride;
  rows.a.clear();
  rows.c0.clear();
  for (int64_t i = 0; i < c.M; i += kStride) {
    rows.a.insert(rows.a.end(), p.a.begin() + i * p.lda, p.a.begin() + (i + 1) * p.lda);
    rows.c0.insert(rows.c0.end(), p.c0.begin() + i * p.ldc, p.c0.begin() + (i + 1) * p.ldc);
  }
  add_references(rows);
  Tensor a = ctx.empty({1024, 1024}), b = ctx.empty({1024, 1024}), out = ctx.empty({1024, 1024});
  a.copy_from(Tensor::from_vector({1024, 1024}, p.a));
  b.copy_from(Tensor::from_vector({1024, 1024}, p.b));
  for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
    ctx.fill(out, kNaN);
    gemm(ctx, false, false, 1.0f, a, b, 0.0f, out, math);
    ctx.synchronize();
    const std::vector<float> all = out.to_vector();
    std::vector<float> got;
    for (int64_t i = 0; i < c.M; i += kStride) {
      got.insert(got.end(), all.begin() + i * p.ldc, all.begin() + (i + 1) * p.ldc);
    }
    const bool tf32 = math == GemmMath::tf32;
    expect_matches(rows, got, math, tf32 ? rows.expected_tf32_truncated : rows.expected_bf16,
                   std::string("gemm ") + cuda::gemm_math_name(math));
    if (tf32) {
      EXPECT_GT(relative_error(rows, got, rows.expected_tf32), 2e-5);
    }
    EXPECT_EQ(std::count_if(all.begin(), all.end(), [](float v) { return !std::isfinite(v); }), 0)
        << "elements of C not written";
  }
}

}  // namespace
}  // namespace crema::kernels::gemm_testing
