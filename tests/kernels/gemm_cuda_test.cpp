// CUDA GEMM: every rung of the ladder (s1-s16, t1-t5) in every math it computes in, against
// ref::gemm<double>, on all four transpose combinations, awkward sizes (mixes of 1, 7, 33, 65, 129,
// 257; K = 1; several tiles of 64 and 128 with edges, a partial slab, several pipeline stages),
// padded leading dimensions, misaligned pointers (the scalar paths beside the 16-byte ones),
// alpha/beta variants with C poisoned by NaN when beta == 0; bit-identical repeats; the
// Tensor-level dispatch in each math.
//
// The TMA-fed tensor-core paths (t4, t5, cuda::gemm_bf16) have their own file,
// gemm_tensor_core_cuda_test.cpp; references and tolerances: gemm_cuda_test_util.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "tests/kernels/gemm_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::gemm_testing {
namespace {

TEST(GemmCuda, AwkwardSizes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t shapes[][3] = {{1, 1, 1},     {1, 257, 33},   {257, 1, 65},    {7, 33, 1},
                               {33, 7, 129},  {65, 129, 7},   {129, 65, 33},   {257, 129, 65},
                               {64, 500, 80}, {65, 257, 257}, {300, 520, 200}, {131, 259, 9},
                               {129, 130, 1}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    check_all_versions(ctx, {false, false, s[0], s[1], s[2], 0, 1.0f, 0.0f}, seed += 8);
  }
}

TEST(GemmCuda, LeadingDimensionsAndAlignment) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // Multiples of 4 everywhere: the float4 paths; then a pad of 3 and a base shifted by one float:
  // the scalar paths, with float4 loads illegal.
  check_all_versions(ctx, {false, false, 64, 128, 32, 0, 1.0f, 0.0f}, 100);
  check_all_versions(ctx, {false, false, 33, 65, 129, 3, 1.0f, 0.0f}, 200);
  check_all_versions(ctx, {false, false, 64, 128, 32, 4, 1.0f, 1.0f}, 300, 1);
}

TEST(GemmCuda, AlphaBeta) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // beta == 0 runs on NaN-poisoned C (make_problem); beta != 0 blends with C.
  const float pairs[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}};
  uint64_t seed = 400;
  for (const auto& ab : pairs) {
    check_all_versions(ctx, {false, false, 33, 67, 13, 1, ab[0], ab[1]}, seed += 8);
  }
}

TEST(GemmCuda, DegenerateAlphaAndK) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // alpha == 0 or K == 0: C = beta * C, A and B unread; beta == 0 then overwrites NaN with 0.
  check_all_versions(ctx, {false, false, 9, 10, 11, 0, 0.0f, 0.0f}, 500);
  check_all_versions(ctx, {false, false, 9, 10, 11, 2, 0.0f, 2.0f}, 510);
  check_all_versions(ctx, {false, false, 17, 5, 0, 0, 1.0f, -3.0f}, 520);
  check_all_versions(ctx, {false, false, 17, 5, 0, 1, 1.0f, 0.0f}, 530);
}

TEST(GemmCuda, LeNetShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // The inner-product layers of LeNet at batch 64: fc1 forward, backward data, backward weights
  // (accumulating), fc2 forward.
  const Case cases[] = {{false, true, 64, 500, 800, 0, 1.0f, 0.0f},
                        {false, false, 64, 800, 500, 0, 1.0f, 0.0f},
                        {true, false, 500, 800, 64, 0, 1.0f, 1.0f},
                        {false, true, 64, 10, 500, 0, 1.0f, 0.0f}};
  uint64_t seed = 600;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    for (const Variant& v : all_variants()) {
      expect_matches(p, run(ctx, p, v), v.math, operand_reference(p, v, 0),
                     describe(c) + " " + name(v));
    }
  }
}

// s16 runs its own loop only where s15's cost model picks the 128 x 128 tile (C of about 2000 x
// 2000 and more), so the awkward shapes above reach s15's loops through cuda::sgemm. Here the loop
// runs directly on them (every layout; a pad of 3 and a base shifted off 16 bytes for the scalar
// paths; alpha/beta with NaN in C when beta == 0; K from 1 to 200 = 25 slabs), then through
// cuda::sgemm on a C that picks it, with edges on both sides and a partial last slab.
TEST(GemmCuda, FfmaTunedLoop) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {
      {false, false, 1, 1, 1, 0, 1.0f, 0.0f},       {false, false, 7, 33, 1, 0, 1.0f, 0.0f},
      {false, false, 129, 65, 33, 0, 1.0f, 0.0f},   {false, false, 257, 129, 65, 3, 1.0f, 0.0f},
      {false, false, 300, 520, 200, 0, 1.0f, 0.0f}, {false, false, 33, 67, 13, 1, -1.5f, 0.25f},
      {false, false, 64, 128, 32, 4, 0.5f, 1.0f}};
  uint64_t seed = 700;
  for (Case c : cases) {
    for (int t = 0; t < 4; ++t) {
      c.trans_a = t & 1, c.trans_b = t & 2;
      const Problem p = make_problem(c, seed += 8);
      for (int64_t offset : {0, 1}) {
        const Tensor a = upload(ctx, p.a, offset), b = upload(ctx, p.b, offset);
        Tensor dev_c = upload(ctx, p.c0, offset);
        cuda::detail::sgemm_ffma_tuned(
            {c.trans_a, c.trans_b, int(c.M), int(c.N), int(c.K), c.alpha, a.data<float>() + offset,
             p.lda, b.data<float>() + offset, p.ldb, c.beta, dev_c.data<float>() + offset, p.ldc},
            ctx.stream());
        ctx.synchronize();
        std::vector<float> out = dev_c.to_vector();
        out.erase(out.begin(), out.begin() + offset);
        expect_matches(p, out, GemmMath::fp32, p.expected,
                       describe(c) + " offset=" + std::to_string(offset));
      }
    }
  }
  for (int t = 0; t < 4; ++t) {
    const Case c{bool(t & 1), bool(t & 2), 1999, 2049, 21, 0, 1.0f, 0.0f};
    const Problem p = make_problem(c, seed += 8);
    expect_matches(p, run(ctx, p, {Rung::ffma_tuned, GemmMath::fp32}), GemmMath::fp32, p.expected,
                   describe(c) + " ffma_tuned");
  }
}

// s16 splits K when C has few tiles and K is long (a weight gradient): the splits' partial
// products go to the (NaN-poisoned) workspace and are added in split order. Every layout, a pad of
// 3 with a base off 16 bytes (the scalar paths), alpha/beta with NaN in C when beta == 0, a K
// that is no multiple of the slab depth; the same bits on a repeat, and within fp32's bound of the
// unsplit product (no workspace).
TEST(GemmCuda, SplitKOnSmallOutputsWithLongK) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {{true, false, 96, 64, 20000, 0, 1.0f, 1.0f},
                        {false, false, 33, 7, 5001, 3, 1.0f, 0.0f},
                        {false, false, 130, 200, 3001, 0, -1.5f, 0.25f},
                        {false, false, 1, 1, 1000, 1, 2.0f, 0.0f}};
  uint64_t seed = 800;
  for (Case c : cases) {
    for (int t = 0; t < 4; ++t) {
      c.trans_a = t & 1, c.trans_b = t & 2;
      const cuda::detail::KSplit split = cuda::detail::ffma_split(c.M, c.N, c.K);
      ASSERT_GT(split.splits, 1) << describe(c);
      EXPECT_EQ(cuda::sgemm_workspace(c.trans_a, c.trans_b, c.M, c.N, c.K,
                                      cuda::GemmVersion::ffma_tuned, GemmMath::fp32),
                size_t(split.splits) * size_t(c.M * c.N));
      Problem p = make_problem(c, seed += 8, false);  // only the fp32 reference is needed
      p.expected = reference(p, GemmMath::fp32);
      for (int64_t offset : {0, 1}) {
        const Variant v{Rung::ffma_tuned, GemmMath::fp32};
        const std::string what = describe(c) + " offset=" + std::to_string(offset);
        const std::vector<float> out = run(ctx, p, v, offset);
        expect_matches(p, out, GemmMath::fp32, p.expected, what + " split");
        const std::vector<float> again = run(ctx, p, v, offset);
        EXPECT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)), 0) << what;
        expect_matches(p, run(ctx, p, v, offset, true), GemmMath::fp32, p.expected,
                       what + " unsplit");
      }
    }
  }
  // The weight gradients of ConvNeXt-T's first stage at batch 128 (384 x 96 and 96 x 384 over
  // 401,408 positions) split, though s15's 16 x 16 tiles would give 144 blocks unsplit.
  EXPECT_GT(cuda::detail::ffma_split(384, 96, 401408).splits, 1);
  EXPECT_GT(cuda::detail::ffma_split(96, 384, 401408).splits, 1);
  // C that fills the GPU with tiles, or a short K: no split.
  EXPECT_EQ(cuda::detail::ffma_split(2048, 2048, 100000).splits, 1);
  EXPECT_EQ(cuda::detail::ffma_split(64, 64, 300).splits, 1);
}

// Each SIMT rung up to s14 changes how the products reach the FFMAs, never their order: every
// element of C is one fmaf chain over k = 0, 1, ..., K - 1 from 0 (the zero-filled tail adds
// exact zeros). So with alpha = 1 and beta = 0, s2-s14 must equal s1 bit for bit, in every
// layout, aligned or not: a rung that drops, repeats or swaps a k step, or reads a fragment of the
// wrong step (s12's and s13's prefetch), fails here even where the tolerance would hide it.
TEST(GemmCuda, SimtRungsUpToS14SumInOneOrder) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {{false, false, 131, 259, 9, 0, 1.0f, 0.0f},
                        {false, false, 300, 520, 200, 0, 1.0f, 0.0f},
                        {false, false, 257, 129, 65, 3, 1.0f, 0.0f},
                        {false, false, 129, 130, 1, 0, 1.0f, 0.0f}};
  uint64_t seed = 900;
  for (Case c : cases) {
    for (int t = 0; t < 4; ++t) {
      c.trans_a = t & 1, c.trans_b = t & 2;
      const Problem p = make_problem(c, seed += 8, false);
      for (int64_t offset : {0, 1}) {
        const std::vector<float> s1 = run(ctx, p, {Rung::uncoalesced, GemmMath::fp32}, offset);
        for (Rung r : cuda::ladder::rungs()) {
          if (cuda::ladder::path(r) != cuda::ladder::Path::simt ||
              cuda::ladder::number(r) > cuda::ladder::number(Rung::edge_free_loads)) {
            continue;
          }
          const std::vector<float> out = run(ctx, p, {r, GemmMath::fp32}, offset);
          ASSERT_EQ(out.size(), s1.size());
          int64_t differ = 0;
          for (size_t i = 0; i < out.size(); ++i) differ += !(out[i] == s1[i]);
          EXPECT_EQ(differ, 0) << describe(c) << " offset=" << offset << " "
                               << cuda::ladder::label(r) << " " << cuda::ladder::name(r);
        }
      }
    }
  }
}

TEST(GemmCuda, RepeatsAreBitIdentical) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {{false, true, 64, 500, 800, 0, 1.0f, 0.0f},
                        {true, false, 500, 800, 64, 0, 1.0f, 1.0f},
                        {false, false, 300, 300, 300, 0, 1.0f, 0.0f}};
  uint64_t seed = 700;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    for (const Variant& v : all_variants()) {
      const std::vector<float> first = run(ctx, p, v);
      const std::vector<float> second = run(ctx, p, v);
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
          << describe(c) << " " << name(v);
    }
  }
}

TEST(GemmCuda, TensorLevelDispatchInEachMath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case c{false, true, 33, 129, 65, 0, 1.0f, 0.0f};  // c = a * b^T
  const Problem p = make_problem(c, 800);
  const Tensor a_host = Tensor::from_vector({33, 65}, p.a);
  const Tensor b_host = Tensor::from_vector({129, 65}, p.b);
  Tensor a = ctx.empty({33, 65}), b = ctx.empty({129, 65}), out = ctx.empty({33, 129});
  a.copy_from(a_host);
  b.copy_from(b_host);
  for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    ctx.fill(out, kNaN);
    gemm(ctx, false, true, 1.0f, a, b, 0.0f, out, math);
    ctx.synchronize();
    const std::vector<double>& operands = math == GemmMath::tf32   ? p.expected_tf32
                                          : math == GemmMath::bf16 ? p.expected_bf16
                                                                   : p.expected;
    expect_matches(p, out.to_vector(), math, operands,
                   std::string("gemm ") + cuda::gemm_math_name(math));
  }
  // A host tensor on a GPU context is the user's mistake, named in the message.
  try {
    gemm(ctx, false, true, 1.0f, a_host, b, 0.0f, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm: a is "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected f32[33, 65] on cuda:0"), std::string::npos)
        << e.what();
  }
}

TEST(GemmCuda, VersionOutsideItsMathThrows) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor a = ctx.empty({8, 8}), b = ctx.empty({8, 8}), c = ctx.empty({8, 8});
  const Variant wrong[] = {{Rung::tf32_mma, GemmMath::fp32},
                           {Rung::adaptive_tiles, GemmMath::bf16},
                           {Rung::wgmma, GemmMath::fp32}};
  for (const Variant& v : wrong) {
    try {
      cuda::ladder::sgemm(false, false, 8, 8, 8, 1.0f, a.data<float>(), 8, b.data<float>(), 8, 0.0f,
                          c.data<float>(), 8, ctx.stream(), v.rung, v.math);
      FAIL() << name(v) << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not compute in"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crema::kernels::gemm_testing
