// CUDA convolution math modes: every (version, math) against the double reference on awkward
// geometries, each pass within the math's tolerance where the version computes it in the math
// (tf32 2e-3, bf16 1e-2) and within fp32's 1e-5 where it computes in fp32 whatever the math; each
// pass computed in tf32 or bf16 must also differ from the reference by more than fp32 rounding
// (the math reached the tensor cores). fp32 is unchanged: the default call, an explicit fp32 and
// the Tensor-level dispatch give bit-identical outputs.
#include <gtest/gtest.h>

#include <array>
#include <optional>
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

constexpr cuda::ConvPass kPasses[] = {cuda::ConvPass::forward, cuda::ConvPass::backward_data,
                                      cuda::ConvPass::backward_filter};

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
      {2, 40, 11, 11, 24, 3, 3, 1, 1, 2, 2},       // strided, the tensor maths' v9 territory
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
        const std::array<double, 3> worst = check_version(ctx, p, v, math);
        for (cuda::ConvPass pass : kPasses) {
          if (!cuda::supports(v, pass, g) || !cuda::computes_in(v, pass, math)) continue;
          // Rounding the operands to 10 (tf32) or 7 (bf16) mantissa bits leaves a relative error
          // of about 1e-4 or 1e-3 on random data; fp32 arithmetic stays near 1e-7. Each pass on
          // its own: one that missed the tensor cores fails even when the others reach them.
          EXPECT_GT(worst[int(pass)], 1e-5)
              << conv_test::describe(g) << " " << cuda::conv_version_name(v) << " "
              << cuda::conv_pass_name(pass) << " " << cuda::gemm_math_name(math)
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

// The heuristic in tf32 and bf16 picks the versions measured fastest there (README.md, "The
// heuristic in tf32 and bf16"), each of which implements its pass; fp32 keeps its own choice.
TEST(ConvolutionMathCuda, HeuristicFollowsTheMath) {
  CREMA_REQUIRE_CUDA();
  using V = ConvVersion;
  struct Expected {
    Conv2dGeometry g;
    V forward, data, filter;  // in tf32 and bf16
  };
  const Expected cases[] = {
      {{128, 64, 32, 32, 64, 3, 3, 1, 1}, V::winograd_4x4, V::winograd_4x4, V::winograd_4x4},
      {{128, 256, 8, 8, 256, 3, 3, 1, 1}, V::winograd_2x2, V::winograd_2x2, V::winograd_4x4},
      {{128, 64, 32, 32, 128, 3, 3, 1, 1, 2, 2},
       V::nhwc_implicit_gemm,
       V::nhwc_implicit_gemm,
       V::implicit_gemm},
      {{128, 256, 8, 8, 512, 3, 3, 1, 1, 2, 2},
       V::nhwc_implicit_gemm,
       V::im2col_gemm,
       V::implicit_gemm},
      {{128, 64, 32, 32, 128, 1, 1, 0, 0, 2, 2},
       V::implicit_gemm,
       V::nhwc_implicit_gemm,
       V::implicit_gemm},
      {{128, 3, 32, 32, 64, 3, 3, 1, 1}, V::implicit_gemm, V::im2col_gemm, V::implicit_gemm},
      {{8, 16, 9, 9, 32, 1, 1}, V::pointwise_gemm, V::pointwise_gemm, V::implicit_gemm},
      {{8, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},
       V::depthwise_direct,
       V::depthwise_direct,
       V::depthwise_direct},
  };
  for (const Expected& e : cases) {
    for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
      const std::string what = conv_test::describe(e.g) + " " + cuda::gemm_math_name(math);
      EXPECT_EQ(cuda::forward_version(e.g, math), e.forward) << what;
      EXPECT_EQ(cuda::backward_data_version(e.g, math), e.data) << what;
      EXPECT_EQ(cuda::backward_filter_version(e.g, math), e.filter) << what;
    }
  }
  // fp32's choice for ResNet's strided 3x3 layer is still v2 (and Winograd 4x4 at 256 channels).
  EXPECT_EQ(cuda::forward_version(cases[2].g), V::implicit_gemm);
  EXPECT_EQ(cuda::backward_data_version(cases[2].g), V::implicit_gemm);
  EXPECT_EQ(cuda::forward_version(cases[1].g), V::winograd_4x4);
  for (const Conv2dGeometry& g : geometries()) {
    for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      EXPECT_TRUE(cuda::supports(cuda::forward_version(g, math), cuda::ConvPass::forward, g));
      EXPECT_TRUE(
          cuda::supports(cuda::backward_data_version(g, math), cuda::ConvPass::backward_data, g));
      EXPECT_TRUE(cuda::supports(cuda::backward_filter_version(g, math),
                                 cuda::ConvPass::backward_filter, g))
          << conv_test::describe(g);
    }
  }
}

// Without a version, the Tensor-level passes run the heuristic's version for their math: the
// same bits as the raw call of that version in that math.
TEST(ConvolutionMathCuda, TensorLevelDefaultIsTheMathsHeuristic) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 980;
  for (const Conv2dGeometry& g : geometries()) {
    const Problem p = reference_problem(g, seed += 16);
    DeviceTensors d(ctx, p);
    const Tensor x = d.x.view({g.N, g.C, g.H, g.W});
    const Tensor w = d.w.view({g.K, g.C / g.groups, g.R, g.S});
    const Tensor dy = d.dy.view({g.N, g.K, g.P(), g.Q()});
    Tensor y = d.y.view({g.N, g.K, g.P(), g.Q()});
    Tensor dx = d.dx.view({g.N, g.C, g.H, g.W});
    for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
      const std::string what = conv_test::describe(g) + " " + cuda::gemm_math_name(math);
      const GemmMath* m = &math;
      const std::vector<float> raw = forward_output(ctx, p, d, cuda::forward_version(g, math), m);
      ctx.fill(y, kNaN);
      conv2d_forward(ctx, g, x, w, &d.bias, y, std::nullopt, math);
      EXPECT_EQ(y.to_vector(), raw) << what;

      const ConvVersion data = cuda::backward_data_version(g, math);
      ctx.fill(dx, kNaN);
      cuda::conv2d_backward_data(g, d.dy.data<float>(), d.w.data<float>(), d.dx.data<float>(),
                                 workspace_for(ctx, g, data), ctx.stream(), data, math);
      const std::vector<float> raw_dx = dx.to_vector();
      ctx.fill(dx, kNaN);
      conv2d_backward_data(ctx, g, dy, w, dx, std::nullopt, math);
      EXPECT_EQ(dx.to_vector(), raw_dx) << what;
    }
  }
}

}  // namespace
}  // namespace crema::kernels
