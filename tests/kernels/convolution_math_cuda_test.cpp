// CUDA convolution math modes: every (version, math) against the double reference on awkward
// geometries, each pass within the math's tolerance where the version computes it in the math
// (tf32 2e-3, bf16 1e-2) and within fp32's 1e-5 where it computes in fp32 whatever the math; the
// passes computed in tf32 or bf16 must also differ from the reference by more than fp32 rounding
// (the math reached the tensor cores). fp32 is unchanged: the default call, an explicit fp32 and
// the Tensor-level dispatch give bit-identical outputs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/convolution.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using conv_test::check_version;
using conv_test::DeviceTensors;
using conv_test::kNaN;
using conv_test::kVersions;
using conv_test::Problem;
using conv_test::reference_problem;
using conv_test::workspace_for;
using cuda::ConvVersion;
using cuda::GemmMath;

const std::vector<Conv2dGeometry>& geometries() {
  static const std::vector<Conv2dGeometry> all = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 3, 7, 9, 5, 3, 3, 1, 1},
      {3, 5, 9, 13, 7, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 6, 8, 7, 4, 3, 3, 1, 1, 2, 1, 1, 1, 2},
      {3, 7, 5, 3, 9, 1, 1},                       // pointwise, odd sizes
      {2, 40, 6, 6, 140, 1, 1},                    // pointwise, several row tiles
      {3, 130, 6, 5, 70, 3, 3, 1, 1},              // more channels than one tile holds
      {2, 5, 9, 7, 5, 5, 5, 2, 2, 1, 1, 1, 1, 5},  // depthwise 5x5
      {2, 3, 19, 17, 10, 7, 7, 3, 3, 2, 2},        // a ResNet stem in small
      {2, 36, 10, 9, 33, 3, 3, 1, 1},              // Winograd-sized channels, odd tiles
  };
  return all;
}

TEST(ConvolutionMathCuda, EveryVersionAndMathAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 900;
  for (const Conv2dGeometry& g : geometries()) {
    const Problem p = reference_problem(g, seed += 16);
    for (ConvVersion v : kVersions) {
      if (!cuda::supports(v, g)) continue;
      for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
        const double worst = check_version(ctx, p, v, math);
        bool in_math = false;
        for (cuda::ConvPass pass : {cuda::ConvPass::forward, cuda::ConvPass::backward_data,
                                    cuda::ConvPass::backward_filter}) {
          in_math = in_math || (cuda::supports(v, pass, g) && cuda::computes_in(v, pass, math));
        }
        if (in_math) {
          // Rounding the operands to 10 (tf32) or 7 (bf16) mantissa bits leaves a relative error
          // of about 1e-4 or 1e-3 on random data; fp32 arithmetic stays near 1e-7.
          EXPECT_GT(worst, 1e-5) << conv_test::describe(g) << " " << cuda::conv_version_name(v)
                                 << " " << cuda::gemm_math_name(math)
                                 << ": as exact as fp32, so the math was not applied";
        }
      }
    }
  }
}

// y of one forward call, the version's default math or `math`.
std::vector<float> forward_output(Context& ctx, const Problem& p, DeviceTensors& d, ConvVersion v,
                                  const GemmMath* math) {
  ctx.fill(d.y, kNaN);
  float* ws = workspace_for(ctx, p.g, v);
  if (math == nullptr) {
    cuda::conv2d_forward(p.g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(),
                         d.y.data<float>(), ws, ctx.stream(), v);
  } else {
    cuda::conv2d_forward(p.g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(),
                         d.y.data<float>(), ws, ctx.stream(), v, *math);
  }
  return d.y.to_vector();
}

TEST(ConvolutionMathCuda, Fp32IsTheDefaultBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 950;
  const GemmMath fp32 = GemmMath::fp32, tf32 = GemmMath::tf32;
  for (const Conv2dGeometry& g : geometries()) {
    const Problem p = reference_problem(g, seed += 16);
    DeviceTensors d(ctx, p);
    for (ConvVersion v : kVersions) {
      if (!cuda::supports(v, g)) continue;
      const std::vector<float> by_default = forward_output(ctx, p, d, v, nullptr);
      EXPECT_EQ(forward_output(ctx, p, d, v, &fp32), by_default) << cuda::conv_version_name(v);
      // A forward without a tf32 path computes exactly as in fp32.
      if (!cuda::computes_in(v, cuda::ConvPass::forward, tf32)) {
        EXPECT_EQ(forward_output(ctx, p, d, v, &tf32), by_default) << cuda::conv_version_name(v);
      }
      // The Tensor level passes the math through: fp32 there is the raw call's fp32.
      const Tensor x = d.x.view({g.N, g.C, g.H, g.W});
      const Tensor w = d.w.view({g.K, g.C / g.groups, g.R, g.S});
      Tensor y = d.y.view({g.N, g.K, g.P(), g.Q()});
      ctx.fill(y, kNaN);
      conv2d_forward(ctx, g, x, w, &d.bias, y, v, fp32);
      EXPECT_EQ(y.to_vector(), by_default) << cuda::conv_version_name(v);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
