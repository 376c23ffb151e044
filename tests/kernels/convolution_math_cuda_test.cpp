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

using conv_test::check_algorithm;
using conv_test::DeviceTensors;
using conv_test::kNaN;
using conv_test::Problem;
using conv_test::record;
using conv_test::reference_problem;
using conv_test::workspace_for;
using cuda::GemmMath;

constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

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
    for (const ConvAlgorithm* v : conv_test::algorithms()) {
      if (!v->supports(ConvPass::forward, g)) continue;
      for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
        const std::array<double, 3> worst = check_algorithm(ctx, p, *v, math);
        for (ConvPass pass : kPasses) {
          if (!v->supports(pass, g) || !v->computes_in(pass, math)) continue;
          // v9's NHWC passes hand depthwise geometries to the direct kernel, which has no GEMM
          // and computes in fp32 whatever the math (convolution_depthwise_nhwc.h).
          if (g.depthwise() && std::string(v->name) == "nhwc_implicit_gemm") continue;
          // Rounding the operands to 10 (tf32) or 7 (bf16) mantissa bits leaves a relative error
          // of about 1e-4 or 1e-3 on random data; fp32 arithmetic stays near 1e-7. Each pass on
          // its own: one that missed the tensor cores fails even when the others reach them.
          EXPECT_GT(worst[int(pass)], 1e-5)
              << conv_test::describe(g) << " " << v->name << " " << conv_pass_name(pass) << " "
              << cuda::gemm_math_name(math) << ": as exact as fp32, so the math was not applied";
        }
      }
    }
  }
}

// y of one forward call, the version's default math or `math`.
std::vector<float> forward_output(Context& ctx, const Problem& p, DeviceTensors& d,
                                  const ConvAlgorithm* v, const GemmMath* math) {
  ctx.fill(d.y, kNaN);
  float* ws = workspace_for(ctx, p.g, *v);
  if (math == nullptr) {
    v->forward(p.g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(), d.y.data<float>(),
               ws, ctx.stream(), GemmMath::fp32);
  } else {
    v->forward(p.g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(), d.y.data<float>(),
               ws, ctx.stream(), *math);
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
    for (const ConvAlgorithm* v : conv_test::algorithms()) {
      if (!v->supports(ConvPass::forward, g)) continue;
      const std::vector<float> by_default = forward_output(ctx, p, d, v, nullptr);
      EXPECT_EQ(forward_output(ctx, p, d, v, &fp32), by_default) << v->name;
      // A forward without a tf32 path computes exactly as in fp32.
      if (!v->computes_in(ConvPass::forward, tf32)) {
        EXPECT_EQ(forward_output(ctx, p, d, v, &tf32), by_default) << v->name;
      }
      // The Tensor level passes the math through: fp32 there is the raw call's fp32.
      const Tensor x = d.x.view({g.N, g.C, g.H, g.W});
      const Tensor w = d.w.view({g.K, g.C / g.groups, g.R, g.S});
      Tensor y = d.y.view({g.N, g.K, g.P(), g.Q()});
      ctx.fill(y, kNaN);
      conv2d_forward(ctx, g, x, w, &d.bias, y, ConvRequest::pin(*v, fp32));
      EXPECT_EQ(y.to_vector(), by_default) << v->name;
    }
  }
}

// The heuristic in tf32 and bf16 picks the versions measured fastest there (README.md, "The
// heuristic in tf32 and bf16"), each of which implements its pass; fp32 keeps its own choice.
TEST(ConvolutionMathCuda, HeuristicFollowsTheMath) {
  CREMA_REQUIRE_CUDA();
  struct Expected {
    Conv2dGeometry g;
    const char *forward, *data, *filter;  // in tf32 and bf16
  };
  const Expected cases[] = {
      {{128, 64, 32, 32, 64, 3, 3, 1, 1}, "winograd_4x4", "winograd_4x4", "winograd_4x4"},
      {{128, 256, 8, 8, 256, 3, 3, 1, 1}, "winograd_2x2", "winograd_2x2", "winograd_4x4"},
      {{128, 64, 32, 32, 128, 3, 3, 1, 1, 2, 2},
       "nhwc_implicit_gemm",
       "nhwc_implicit_gemm",
       "implicit_gemm"},
      {{128, 256, 8, 8, 512, 3, 3, 1, 1, 2, 2},
       "nhwc_implicit_gemm",
       "im2col_gemm",
       "implicit_gemm"},
      {{128, 64, 32, 32, 128, 1, 1, 0, 0, 2, 2},
       "implicit_gemm",
       "nhwc_implicit_gemm",
       "implicit_gemm"},
      {{128, 3, 32, 32, 64, 3, 3, 1, 1}, "implicit_gemm", "im2col_gemm", "implicit_gemm"},
      {{8, 16, 9, 9, 32, 1, 1}, "pointwise_gemm", "pointwise_gemm", "implicit_gemm"},
      {{8, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},
       "depthwise_direct",
       "depthwise_direct",
       "depthwise_direct"},
  };
  for (const Expected& e : cases) {
    for (GemmMath math : {GemmMath::tf32, GemmMath::bf16}) {
      const std::string what = conv_test::describe(e.g) + " " + cuda::gemm_math_name(math);
      EXPECT_STREQ(conv_test::forward_version(e.g, math)->name, e.forward) << what;
      EXPECT_STREQ(conv_test::backward_data_version(e.g, math)->name, e.data) << what;
      EXPECT_STREQ(conv_test::backward_filter_version(e.g, math)->name, e.filter) << what;
    }
  }
  // fp32's choice for ResNet's strided 3x3 layer is v2 forward and im2col + col2im for backward
  // data (select.cpp: the broad suite's strided layers), and Winograd 4x4 at 256 channels.
  EXPECT_STREQ(conv_test::forward_version(cases[2].g)->name, "implicit_gemm");
  EXPECT_STREQ(conv_test::backward_data_version(cases[2].g)->name, "im2col_gemm");
  EXPECT_STREQ(conv_test::forward_version(cases[1].g)->name, "winograd_4x4");
  for (const Conv2dGeometry& g : geometries()) {
    for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      EXPECT_TRUE(conv_test::forward_version(g, math)->supports(ConvPass::forward, g));
      EXPECT_TRUE(conv_test::backward_data_version(g, math)->supports(ConvPass::backward_data, g));
      EXPECT_TRUE(
          conv_test::backward_filter_version(g, math)->supports(ConvPass::backward_filter, g))
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
      const std::vector<float> raw =
          forward_output(ctx, p, d, conv_test::forward_version(g, math), m);
      ctx.fill(y, kNaN);
      conv2d_forward(ctx, g, x, w, &d.bias, y,
                     ConvRequest{ConvRequest::Mode::heuristic, nullptr, math});
      EXPECT_EQ(y.to_vector(), raw) << what;

      const ConvAlgorithm* data = conv_test::backward_data_version(g, math);
      ctx.fill(dx, kNaN);
      data->backward_data(g, d.dy.data<float>(), d.w.data<float>(), d.dx.data<float>(),
                          workspace_for(ctx, g, *data), ctx.stream(), math);
      const std::vector<float> raw_dx = dx.to_vector();
      ctx.fill(dx, kNaN);
      conv2d_backward_data(ctx, g, dy, w, dx,
                           ConvRequest{ConvRequest::Mode::heuristic, nullptr, math});
      EXPECT_EQ(dx.to_vector(), raw_dx) << what;
    }
  }
}

}  // namespace
}  // namespace crema::kernels
