// cuda::gemm_16bit's wgmma_in_place (compute capability 9.0), which reads MN-major operands in
// place on a persistent grid: shapes whose MN-major operands it reads so (M, N multiples of 8,
// any K, tiles past the edges), more tiles than SMs (blocks walking several), padded rows (read
// in place, or copied: the fallback), its workspace (the fallback's copies and the split's
// parts, nothing else). Against the double product with the bounds of
// gemm_16bit_cuda_test_util.h, beside the widened tf32_mma / bf16_mma (any GPU) and, on sm_90,
// wgmma_repacked. (Its every-layout, split, repeat and refusal cases run in
// gemm_16bit_cuda_test.cpp with the other versions.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/gemm_16bit_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using namespace gemm16;

TEST(Gemm16bitInPlaceCuda, MnMajorOperands) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // wgmma_in_place reads A [K,M] in place when M is a multiple of 8 and B [K,N] when N is (their
  // rows are then 16-byte multiples), whatever K; the others are copied (M = 1 TN, N = 1 NN). K =
  // 8 and 24 (less than one 64-deep slab), K = 13 (the copy engine's zeros past K, MN-major),
  // tiles past the edges (200 = 128 + 72, 136 = 128 + 8: the second tile's upper box of A lies
  // past M and is not loaded; 320 = 256 + 64: three of B's four boxes are not), a K of several
  // laps of the ring. Every layout, both types, C f32 and 16-bit, with and without a bias.
  const Dims shapes[] = {{8, 8, 8},   {136, 264, 8}, {72, 200, 24},   {72, 136, 13},
                         {1, 64, 40}, {64, 1, 24},   {200, 320, 1000}};
  uint64_t seed = 2100;
  for (const Dims& d : shapes) check_shape(ctx, d, seed += 16);
}

TEST(Gemm16bitInPlaceCuda, PersistentGridWalksSeveralTiles) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // 12 x 13 = 156 tiles of 128 x 256, more than an H100's or H200's 132 SMs: wgmma_in_place's
  // persistent blocks walk up to two tiles each, the ring running on from one tile to the next
  // (2 slabs a tile; 6, not a multiple of the 4 stages, in one layout), edges in both directions
  // (the last tile row 8 rows: A's second box not loaded), every operand read in place.
  const Dims d{1416, 3080, 72};
  ASSERT_GT((d.M + 127) / 128 * ((d.N + 255) / 256), 132);
  check_shape(ctx, d, 2300);
  const Operands o = make_operands({1416, 3080, 330}, true, false, DType::bf16, 2310);
  for (GemmVersion v : versions(DType::bf16)) check_operands(ctx, o, v, 2310);
}

TEST(Gemm16bitInPlaceCuda, PaddedLeadingDimensions) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // Rows longer than the matrix (a sub-matrix), the pad NaN: 8 more keeps them 16-byte multiples
  // where they were (read in place: the tensor maps end at M, N or K, so the pad is never read),
  // 3 more moves them off (the fallback copies that operand; K = 13 + 3: a K-major operand read
  // in place with rows of 16 whose last 3 elements lie past K). Every layout, both types, beside
  // tf32_mma (which widens any layout).
  const Dims shapes[] = {{72, 136, 40}, {136, 264, 13}};
  uint64_t seed = 2200;
  for (const Dims& d : shapes) {
    for (int64_t pad : {8, 3}) {
      for (DType type : {DType::bf16, DType::f16}) {
        for (int t = 0; t < 4; ++t) {
          const Operands o = make_operands(d, t & 1, t & 2, type, seed += 4);
          check_operands(ctx, o, GemmVersion::tf32_mma, seed, pad);
          if (on_sm90()) check_operands(ctx, o, GemmVersion::wgmma_in_place, seed, pad);
        }
      }
    }
  }
}

TEST(Gemm16bitInPlaceCuda, WorkspaceIsTheFallbackAndTheSplitOnly) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  if (!on_sm90()) GTEST_SKIP() << "wgmma_in_place runs on sm_90 only";
  const GemmVersion in_place = GemmVersion::wgmma_in_place;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    // Rows of 16-byte multiples, no split: nothing to copy, no workspace (t5 copies MN-major ones).
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 8192, 8192, 8192, in_place), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 200704, 384, 96, in_place), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 200704, 384, 96, GemmVersion::wgmma_repacked) > 0,
              ta || !tb)
        << t;
    // A padded leading dimension that is not a multiple of 8: that operand's K-major copy, rows
    // of K rounded up to 8 (2 bf16 to a float).
    const int64_t lda_ok = ta ? 64 : 24, ldb_ok = tb ? 24 : 128;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, lda_ok, ldb_ok), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, ta ? 66 : 21, ldb_ok),
              size_t(64 * 24 / 2))
        << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, lda_ok, tb ? 22 : 130),
              size_t(128 * 24 / 2))
        << t;
  }
  // ConvNeXt-T's first weight gradient (dW = dy^T x over 200,704 positions): the split's parts
  // alone, where t5 also copied both operands (~190 MB).
  const int splits = cuda::gemm_16bit_splits(true, false, 384, 96, 200704, in_place);
  EXPECT_GT(splits, 1);
  EXPECT_EQ(cuda::gemm_16bit_workspace(true, false, 384, 96, 200704, in_place),
            size_t(splits) * 384 * 96);
}

}  // namespace
}  // namespace crema::kernels
