// The CUDA GEMM versions' names, order and math (plain host code, so tested on the CPU too), and
// the Tensor-level gemm's math argument on the CPU (which always computes in fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels {
namespace {

using cuda::GemmMath;
using cuda::GemmVersion;

TEST(GemmVersions, LadderOrderAndNamesRoundTrip) {
  const std::vector<GemmVersion>& versions = cuda::gemm_versions();
  ASSERT_EQ(versions.size(), 11u);
  for (size_t i = 0; i < versions.size(); ++i) {
    EXPECT_EQ(int(versions[i]), int(i) + 1);  // v1..v11 in ladder order
    const char* name = cuda::gemm_version_name(versions[i]);
    ASSERT_TRUE(cuda::gemm_version_from_name(name).has_value()) << name;
    EXPECT_EQ(*cuda::gemm_version_from_name(name), versions[i]);
  }
  EXPECT_STREQ(cuda::gemm_version_name(GemmVersion::best), "ffma_tuned");
  EXPECT_FALSE(cuda::gemm_version_from_name("fastest").has_value());
  for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    EXPECT_EQ(*cuda::gemm_math_from_name(cuda::gemm_math_name(m)), m);
  }
  EXPECT_FALSE(cuda::gemm_math_from_name("fp16").has_value());
}

TEST(GemmVersions, EachVersionComputesInItsMath) {
  EXPECT_TRUE(cuda::supports(GemmVersion::warp_tiles, GemmMath::fp32));
  EXPECT_FALSE(cuda::supports(GemmVersion::warp_tiles, GemmMath::tf32));
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
  for (GemmVersion v : cuda::gemm_versions()) {
    int maths = 0;
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16})
      maths += cuda::supports(v, m);
    EXPECT_GE(maths, 1) << cuda::gemm_version_name(v);
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
