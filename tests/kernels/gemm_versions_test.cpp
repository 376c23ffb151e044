// The CUDA GEMM ladder's rungs (names, labels, paths, order, math, which are production's) and
// production's versions (plain host code, so tested on the CPU too), and the Tensor-level gemm's
// math argument on the CPU (which always computes in fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ladder/gemm_ladder.h"

namespace crema::kernels {
namespace {

using cuda::GemmMath;
using cuda::GemmVersion;
using cuda::ladder::Path;
using cuda::ladder::Rung;

TEST(GemmVersions, LadderOrderAndNamesRoundTrip) {
  const std::vector<Rung>& rungs = cuda::ladder::rungs();
  ASSERT_EQ(rungs.size(), 21u);
  // The SIMT path first, s1..s16, then the tensor-core path, t1..t5, each numbered from 1.
  int simt = 0, tensor_core = 0;
  for (Rung r : rungs) {
    const bool on_simt = cuda::ladder::path(r) == Path::simt;
    EXPECT_TRUE(on_simt || simt == 16) << cuda::ladder::name(r) << ": a SIMT rung after t1";
    const int expected = on_simt ? ++simt : ++tensor_core;
    EXPECT_EQ(cuda::ladder::number(r), expected) << cuda::ladder::name(r);
    EXPECT_EQ(cuda::ladder::label(r), (on_simt ? "s" : "t") + std::to_string(expected));
    const char* name = cuda::ladder::name(r);
    ASSERT_TRUE(cuda::ladder::from_name(name).has_value()) << name;
    EXPECT_EQ(*cuda::ladder::from_name(name), r);
    EXPECT_EQ(*cuda::ladder::from_name(cuda::ladder::label(r)), r);
    EXPECT_GT(std::string(cuda::ladder::idea(r)).size(), 20u) << name;
  }
  EXPECT_EQ(simt, 16);
  EXPECT_EQ(tensor_core, 5);
  EXPECT_EQ(rungs.front(), Rung::uncoalesced);
  EXPECT_EQ(cuda::ladder::label(Rung::ffma_tuned), "s16");
  // One idea per rung: s5 -> s6 -> s7 and s11 -> s12 -> s13 -> s14 are the steps split out of
  // s6 vector_loads and s11 fragment_prefetch of 2026-11-26.
  EXPECT_EQ(cuda::ladder::label(Rung::vector_fragments), "s6");
  EXPECT_EQ(cuda::ladder::label(Rung::vector_loads), "s7");
  EXPECT_EQ(cuda::ladder::label(Rung::grouped_tiles), "s11");
  EXPECT_EQ(cuda::ladder::label(Rung::fragment_prefetch), "s12");
  EXPECT_EQ(cuda::ladder::label(Rung::two_blocks_per_sm), "s13");
  EXPECT_EQ(cuda::ladder::label(Rung::edge_free_loads), "s14");
  EXPECT_EQ(cuda::ladder::label(Rung::tf32_mma), "t1");
  EXPECT_EQ(cuda::ladder::label(Rung::wgmma_repacked), "t5");
  EXPECT_STREQ(cuda::gemm_version_name(GemmVersion::best), "ffma_tuned");
  // The names the rungs had before the ladder was put in teaching order still work.
  EXPECT_EQ(cuda::ladder::from_name("naive"), Rung::coalesced);
  EXPECT_EQ(cuda::ladder::from_name("register_tiles"), Rung::register_prefetch);
  EXPECT_FALSE(cuda::ladder::from_name("fastest").has_value());
  EXPECT_EQ(cuda::ladder::from_name("fragment_prefetch"), Rung::fragment_prefetch);
  EXPECT_EQ(cuda::ladder::from_name("vector_loads"), Rung::vector_loads);
  EXPECT_FALSE(cuda::ladder::from_name("s17").has_value());
  for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    EXPECT_EQ(*cuda::gemm_math_from_name(cuda::gemm_math_name(m)), m);
  }
  EXPECT_FALSE(cuda::gemm_math_from_name("fp16").has_value());
}

// s1-s15 live only in the ladder; s16 and the tensor-core path are production's versions, of the
// same name.
TEST(GemmVersions, ProductionRungsAreProductionVersions) {
  int production = 0;
  for (Rung r : cuda::ladder::rungs()) {
    const std::optional<GemmVersion> v = cuda::ladder::production_version(r);
    const bool expected = r == Rung::ffma_tuned || cuda::ladder::path(r) == Path::tensor_core;
    EXPECT_EQ(v.has_value(), expected) << cuda::ladder::name(r);
    if (!v) continue;
    ++production;
    EXPECT_STREQ(cuda::gemm_version_name(*v), cuda::ladder::name(r));
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      EXPECT_EQ(cuda::supports(*v, m), cuda::ladder::supports(r, m)) << cuda::ladder::name(r);
    }
  }
  EXPECT_EQ(production, 6);
  EXPECT_EQ(cuda::ladder::production_version(Rung::adaptive_tiles), std::nullopt);
  EXPECT_EQ(cuda::ladder::production_version(Rung::ffma_tuned), GemmVersion::best);
}

TEST(GemmVersions, EachVersionComputesInItsMath) {
  for (Rung r : cuda::ladder::rungs()) {
    if (cuda::ladder::path(r) != Path::simt) continue;
    EXPECT_TRUE(cuda::ladder::supports(r, GemmMath::fp32)) << cuda::ladder::name(r);
    EXPECT_FALSE(cuda::ladder::supports(r, GemmMath::tf32)) << cuda::ladder::name(r);
    EXPECT_FALSE(cuda::ladder::supports(r, GemmMath::bf16)) << cuda::ladder::name(r);
  }
  EXPECT_TRUE(cuda::supports(GemmVersion::tf32_mma, GemmMath::tf32));
  EXPECT_FALSE(cuda::supports(GemmVersion::tf32_mma, GemmMath::bf16));
  EXPECT_TRUE(cuda::supports(GemmVersion::bf16_mma, GemmMath::bf16));
  EXPECT_FALSE(cuda::supports(GemmVersion::bf16_mma, GemmMath::fp32));
  EXPECT_TRUE(cuda::supports(GemmVersion::wgmma, GemmMath::tf32));
  EXPECT_TRUE(cuda::supports(GemmVersion::wgmma, GemmMath::bf16));
  EXPECT_FALSE(cuda::supports(GemmVersion::wgmma, GemmMath::fp32));
  EXPECT_TRUE(cuda::supports(GemmVersion::wgmma_pipelined, GemmMath::tf32));
  EXPECT_FALSE(cuda::supports(GemmVersion::wgmma_pipelined, GemmMath::bf16));
  EXPECT_FALSE(cuda::supports(GemmVersion::wgmma_pipelined, GemmMath::fp32));
  EXPECT_TRUE(cuda::supports(GemmVersion::wgmma_repacked, GemmMath::tf32));
  EXPECT_TRUE(cuda::supports(GemmVersion::wgmma_repacked, GemmMath::bf16));
  EXPECT_FALSE(cuda::supports(GemmVersion::wgmma_repacked, GemmMath::fp32));
  EXPECT_TRUE(cuda::supports(GemmVersion::ffma_tuned, GemmMath::fp32));
  EXPECT_FALSE(cuda::supports(GemmVersion::ffma_tuned, GemmMath::tf32));
  // wgmma_in_place reads 16-bit operands only (cuda::gemm_16bit): no math on fp32 operands, no
  // rung of the ladder.
  EXPECT_STREQ(cuda::gemm_version_name(GemmVersion::wgmma_in_place), "wgmma_in_place");
  EXPECT_FALSE(cuda::ladder::from_name("wgmma_in_place").has_value());
  for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    EXPECT_FALSE(cuda::supports(GemmVersion::wgmma_in_place, m));
  }
  for (Rung r : cuda::ladder::rungs()) {
    int maths = 0;
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16})
      maths += cuda::ladder::supports(r, m);
    EXPECT_GE(maths, 1) << cuda::ladder::name(r);
  }
}

TEST(GemmVersions, CpuComputesEveryMathInFp32) {
  Context ctx(Device::cpu());
  Random rng(3);
  Tensor a({7, 33}), b({33, 5}), c_fp32({7, 5}), c({7, 5});
  for (Tensor* t : {&a, &b}) {
    float* p = t->data<float>();
    for (int64_t i = 0; i < t->numel(); ++i) p[i] = float(rng.uniform(-1.0, 1.0));
  }
  gemm(ctx, false, false, 1.0f, a, b, 0.0f, c_fp32);
  for (GemmMath m : {GemmMath::tf32, GemmMath::bf16}) {
    c.fill(std::nanf(""));
    gemm(ctx, false, false, 1.0f, a, b, 0.0f, c, m);
    for (int64_t i = 0; i < c.numel(); ++i) {
      EXPECT_EQ(c.data<float>()[i], c_fp32.data<float>()[i]) << cuda::gemm_math_name(m);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
