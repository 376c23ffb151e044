// The CUDA GEMM ladder's rungs (names, order, math, which are production's) and production's
// versions (plain host code, so tested on the CPU too), and the Tensor-level gemm's math argument
// on the CPU (which always computes in fp32).
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
using cuda::ladder::Rung;

TEST(GemmVersions, LadderOrderAndNamesRoundTrip) {
  const std::vector<Rung>& rungs = cuda::ladder::rungs();
  ASSERT_EQ(rungs.size(), 11u);
  for (size_t i = 0; i < rungs.size(); ++i) {
    EXPECT_EQ(cuda::ladder::number(rungs[i]), int(i) + 1);  // v1..v11 in ladder order
    const char* name = cuda::ladder::name(rungs[i]);
    ASSERT_TRUE(cuda::ladder::from_name(name).has_value()) << name;
    EXPECT_EQ(*cuda::ladder::from_name(name), rungs[i]);
  }
  EXPECT_STREQ(cuda::ladder::name(Rung::naive), "naive");
  EXPECT_STREQ(cuda::ladder::name(Rung::warp_tiles), "warp_tiles");
  EXPECT_STREQ(cuda::gemm_version_name(GemmVersion::best), "ffma_tuned");
  EXPECT_FALSE(cuda::ladder::from_name("fastest").has_value());
  for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    EXPECT_EQ(*cuda::gemm_math_from_name(cuda::gemm_math_name(m)), m);
  }
  EXPECT_FALSE(cuda::gemm_math_from_name("fp16").has_value());
}

// v1-v5 live only in the ladder; v6 up are production's versions, same number, same name.
TEST(GemmVersions, ProductionRungsAreProductionVersions) {
  for (Rung r : cuda::ladder::rungs()) {
    const std::optional<GemmVersion> v = cuda::ladder::production_version(r);
    EXPECT_EQ(v.has_value(), cuda::ladder::number(r) >= 6) << cuda::ladder::name(r);
    if (!v) continue;
    EXPECT_EQ(int(*v), cuda::ladder::number(r));
    EXPECT_STREQ(cuda::gemm_version_name(*v), cuda::ladder::name(r));
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      EXPECT_EQ(cuda::supports(*v, m), cuda::ladder::supports(r, m)) << cuda::ladder::name(r);
    }
  }
  EXPECT_EQ(cuda::ladder::production_version(Rung::adaptive_tiles), std::nullopt);
  EXPECT_EQ(cuda::ladder::production_version(Rung::ffma_tuned), GemmVersion::best);
}

TEST(GemmVersions, EachVersionComputesInItsMath) {
  EXPECT_TRUE(cuda::ladder::supports(Rung::naive, GemmMath::fp32));
  EXPECT_TRUE(cuda::ladder::supports(Rung::warp_tiles, GemmMath::fp32));
  EXPECT_FALSE(cuda::ladder::supports(Rung::warp_tiles, GemmMath::tf32));
  EXPECT_FALSE(cuda::ladder::supports(Rung::adaptive_tiles, GemmMath::bf16));
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
