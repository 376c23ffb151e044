// CUDA convolution: every version against the double-precision reference on the awkward
// geometries it supports (N = 1, odd sizes, stride, padding, dilation, groups, depthwise,
// pointwise, P = Q = 1, more channels than a tile) and LeNet's layers at N = 1, and against the
// CPU path for LeNet at N = 64 and 256 and for larger depthwise and pointwise layers. Outputs
// poisoned with NaN; dw and db pre-filled (they accumulate). Then the per-geometry version choice,
// bit-identical repeats, the Tensor-level dispatch (the transposed convolution too), and a
// CUDA-graph capture of a layer's three passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;

TEST(ConvolutionCuda, AwkwardGeometriesAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 3, 7, 9, 5, 3, 3, 1, 1},
      {2, 4, 11, 10, 6, 3, 2, 2, 1, 2, 2},
      {3, 5, 9, 13, 7, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 6, 8, 7, 4, 3, 3, 1, 1, 2, 1, 1, 1, 2},
      {2, 3, 9, 8, 5, 3, 2, 1, 0, 3, 2, 1, 2},        // stride 3x2 with dilation 1x2
      {2, 3, 5, 6, 3, 5, 2, 0, 0, 1, 5},              // P = Q = 1
      {3, 7, 5, 3, 9, 1, 1},                          // 1x1
      {2, 4, 6, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},     // one input channel per group
      {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},              // outputs that read only padding
      {37, 3, 9, 8, 5, 3, 2, 1, 0},                   // many images, N*P*Q not a tile multiple
      {3, 130, 6, 5, 70, 3, 3, 1, 1},                 // more channels than one tile holds
      {2, 12, 9, 9, 300, 3, 3, 1, 1, 1, 1, 1, 1, 3},  // 100 filters per group: several tiles
      lenet_conv1(1),
      lenet_conv2(1),
      {2, 6, 5, 7, 4, 1, 1, 0, 0, 1, 1, 1, 1, 2},    // pointwise, groups, H*W odd
      {3, 8, 4, 6, 12, 1, 1},                        // pointwise, float4 paths (Cg, H*W % 4 == 0)
      {2, 40, 6, 6, 140, 1, 1},                      // pointwise, several row tiles
      {1, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 2, 3},       // pointwise with a (moot) dilation
      {3, 4, 7, 6, 4, 3, 3, 1, 1, 2, 2, 1, 1, 4},    // depthwise: group = C = K, stride 2
      {2, 3, 8, 9, 6, 3, 2, 2, 1, 1, 2, 2, 1, 3},    // depthwise, 2 filters per channel, dilated
      {2, 5, 9, 7, 5, 5, 5, 2, 2, 1, 1, 1, 1, 5},    // depthwise 5x5: 26 taps, two tap blocks
      {1, 4, 6, 6, 4, 1, 1, 0, 0, 1, 1, 1, 1, 4},    // depthwise and pointwise at once
      {4, 3, 48, 45, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3},  // depthwise, filter gradient in 4 splits
      {2, 3, 19, 17, 10, 7, 7, 3, 3, 2, 2},          // a ResNet stem in small: 7x7, stride 2
      {1, 2, 13, 11, 9, 3, 3, 2, 1, 4, 3, 2, 1},     // stride 4x3, dilation 2x1
      {1, 3, 7, 8, 2, 1, 1, 0, 0, 3, 3},             // stride 3 1x1: pixels no output reads
      {2, 9, 6, 7, 20, 2, 3, 1, 1, 1, 1, 1, 1, 1},   // 20 output channels: 8-channel blocks
  };
  uint64_t seed = 1;
  for (const Conv2dGeometry& g : geometries) {
    const Problem p = reference_problem(g, seed += 16);
    for (const ConvAlgorithm* v : algorithms()) {
      if (v->supports(ConvPass::forward, g)) check_algorithm(ctx, p, *v);
    }
  }
}

TEST(ConvolutionCuda, LeNetBatchesAgainstCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 500;
  for (int64_t N : {64, 256}) {
    for (const Conv2dGeometry& g : {lenet_conv1(N), lenet_conv2(N)}) {
      const Problem p = cpu_problem(g, seed += 16);
      for (const ConvAlgorithm* v : algorithms()) {
        if (v->supports(ConvPass::forward, g)) check_algorithm(ctx, p, *v);
      }
    }
  }
}

// MobileNet-like depthwise and pointwise layers at batch sizes where the tiles and splits differ
// from the small cases above.
TEST(ConvolutionCuda, DepthwiseAndPointwiseBatchesAgainstCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      {16, 32, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32},  // depthwise 3x3
      {16, 64, 14, 14, 64, 3, 3, 1, 1, 2, 2, 1, 1, 64},  // depthwise 3x3, stride 2
      {16, 32, 28, 28, 64, 1, 1},                        // pointwise
      {8, 128, 7, 7, 256, 1, 1},                         // pointwise, H*W = 49
  };
  uint64_t seed = 700;
  for (const Conv2dGeometry& g : geometries) {
    const Problem p = cpu_problem(g, seed += 16);
    for (const ConvAlgorithm* v : algorithms()) {
      if (v->supports(ConvPass::forward, g)) check_algorithm(ctx, p, *v);
    }
  }
}

// Production keeps LeNet on v2 (and v1 for conv2's backward data), sends depthwise and pointwise
// geometries to v4 and v3 and ResNet's 3x3 layers to v6; a version asked for a geometry it
// cannot run is an error.
TEST(ConvolutionCuda, VersionChoicePerGeometry) {
  CREMA_REQUIRE_CUDA();
  for (int64_t N : {64, 256}) {
    EXPECT_EQ(forward_version(lenet_conv1(N)), &record("implicit_gemm"));
    EXPECT_EQ(backward_filter_version(lenet_conv1(N)), &record("implicit_gemm"));
    EXPECT_EQ(forward_version(lenet_conv2(N)), &record("implicit_gemm"));
    EXPECT_EQ(backward_data_version(lenet_conv2(N)), &record("im2col_gemm"));
    EXPECT_EQ(backward_filter_version(lenet_conv2(N)), &record("implicit_gemm"));
  }
  const Conv2dGeometry depthwise{8, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16};
  EXPECT_EQ(forward_version(depthwise), &record("depthwise_direct"));
  EXPECT_EQ(backward_data_version(depthwise), &record("depthwise_direct"));
  EXPECT_EQ(backward_filter_version(depthwise), &record("depthwise_direct"));
  const Conv2dGeometry pointwise{8, 16, 9, 9, 32, 1, 1};
  EXPECT_EQ(forward_version(pointwise), &record("pointwise_gemm"));
  EXPECT_EQ(backward_data_version(pointwise), &record("pointwise_gemm"));
  EXPECT_EQ(backward_filter_version(pointwise), &record("implicit_gemm"));
  const Conv2dGeometry resnet{64, 128, 28, 28, 128, 3, 3, 1, 1};
  EXPECT_EQ(forward_version(resnet), &record("winograd_4x4"));
  EXPECT_EQ(backward_data_version(resnet), &record("winograd_4x4"));
  EXPECT_EQ(backward_filter_version(resnet), &record("winograd_4x4"));
  const Conv2dGeometry few_channels{8, 16, 28, 28, 64, 3, 3, 1, 1};
  EXPECT_EQ(forward_version(few_channels), &record("implicit_gemm"));
  const Conv2dGeometry strided{8, 64, 28, 28, 64, 3, 3, 1, 1, 2, 2};
  EXPECT_EQ(forward_version(strided), &record("implicit_gemm"));
  // FFT for 5x5 and larger filters, 64 channels and more, padded maps up to 32 x 32 (fp32 only).
  const Conv2dGeometry large_filter{64, 128, 26, 26, 128, 7, 7, 3, 3};
  EXPECT_EQ(forward_version(large_filter), &record("fft"));
  EXPECT_EQ(backward_data_version(large_filter), &record("fft"));
  EXPECT_EQ(backward_filter_version(large_filter), &record("fft"));
  EXPECT_NE(forward_version(large_filter, GemmMath::tf32), &record("fft"));
  const Conv2dGeometry past_32{64, 64, 32, 32, 64, 7, 7, 3, 3};  // F = 64
  EXPECT_EQ(forward_version(past_32), &record("implicit_gemm"));
  // At stride 2 with 128 channels and more, one large GEMM after im2col (select.cpp).
  const Conv2dGeometry strided_large{64, 128, 26, 26, 128, 7, 7, 3, 3, 2, 2};
  EXPECT_EQ(forward_version(strided_large), &record("im2col_gemm"));

  // A record that does not implement a pass for a geometry is refused by the selection.
  EXPECT_THROW(
      check_conv_algorithm(record("depthwise_direct"), ConvPass::forward, lenet_conv2(2), "test"),
      Error);
  EXPECT_THROW(check_conv_algorithm(record("pointwise_gemm"), ConvPass::backward_data,
                                    lenet_conv2(2), "test"),
               Error);
  EXPECT_THROW(
      check_conv_algorithm(record("winograd_2x2"), ConvPass::forward, lenet_conv2(2), "test"),
      Error);
  const Conv2dGeometry pad3{2, 4, 7, 8, 6, 3, 3, 3, 3};
  EXPECT_THROW(check_conv_algorithm(record("winograd_4x4"), ConvPass::backward_data, pad3, "test"),
               Error);
}

// The passes of the best version, run twice from the same inputs, give the same bits.
TEST(ConvolutionCuda, RepeatsAreBitIdentical) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 900;
  const std::vector<Conv2dGeometry> geometries = {
      lenet_conv1(64),
      lenet_conv2(64),
      lenet_conv2(7),
      {8, 24, 32, 32, 24, 3, 3, 1, 1, 1, 1, 1, 1, 24},  // depthwise (v4, filter in 4 splits)
      {8, 24, 10, 10, 40, 1, 1}};                       // pointwise (v3)
  for (const Conv2dGeometry& g : geometries) {
    const Problem p = make_inputs(g, seed += 16);
    const ConvAlgorithm* forward =
        g.pointwise() || g.depthwise() ? forward_version(g) : &record("implicit_gemm");
    const ConvAlgorithm* data =
        g.pointwise() || g.depthwise() ? backward_data_version(g) : &record("implicit_gemm");
    expect_repeatable(ctx, p, *forward, *data, *backward_filter_version(g), true, describe(g));
  }
}

// The Tensor-level functions run the best version on a GPU context; captured in a CUDA graph
// (no host synchronization or allocation inside) and replayed, they give the same bits.
TEST(ConvolutionCuda, TensorLevelDispatchAndGraphCapture) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g = lenet_conv2(16);
  const Problem p = reference_problem(g, 1000);
  const Tensor x = upload(ctx, p.x).view({g.N, g.C, g.H, g.W});
  const Tensor w = upload(ctx, p.w).view({g.K, g.C, g.R, g.S});
  const Tensor bias = upload(ctx, p.bias).view({g.K});
  const Tensor dy = upload(ctx, p.dy).view({g.N, g.K, g.P(), g.Q()});
  Tensor y = ctx.empty({g.N, g.K, g.P(), g.Q()}), dx = ctx.empty({g.N, g.C, g.H, g.W});
  Tensor dw = ctx.empty({g.K, g.C, g.R, g.S}), db = ctx.empty({g.K});
  auto step = [&] {
    conv2d_forward(ctx, g, x, w, &bias, y);
    conv2d_backward_data(ctx, g, dy, w, dx);
    conv2d_backward_weights(ctx, g, x, dy, dw, &db);
  };
  ctx.fill(y, kNaN);
  ctx.fill(dx, kNaN);
  dw.copy_from(upload(ctx, p.dw0));
  db.copy_from(upload(ctx, p.db0));
  step();
  ctx.synchronize();
  expect_close(y, p.y, "Tensor-level forward");
  expect_close(dx, p.dx, "Tensor-level backward data");
  expect_close(dw, p.dw, "Tensor-level backward weights: dw");
  expect_close(db, p.db, "Tensor-level backward weights: db");
  const std::vector<float> direct[4] = {y.to_vector(), dx.to_vector(), dw.to_vector(),
                                        db.to_vector()};

  ctx.fill(y, kNaN);
  ctx.fill(dx, kNaN);
  dw.copy_from(upload(ctx, p.dw0));
  db.copy_from(upload(ctx, p.db0));
  ctx.synchronize();
  gpu::begin_capture(ctx.stream());
  step();
  const gpu::Graph graph = gpu::end_capture(ctx.stream());
  gpu::launch(graph, ctx.stream());
  ctx.synchronize();
  gpu::destroy_graph(graph);
  const std::vector<float> replayed[4] = {y.to_vector(), dx.to_vector(), dw.to_vector(),
                                          db.to_vector()};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(direct[i].data(), replayed[i].data(), direct[i].size() * sizeof(float)),
              0)
        << "graph replay, output " << i << " (y, dx, dw, db)";
  }

  // Tensors on the wrong device are the user's mistake, named in the message.
  const Tensor x_host = Tensor::from_vector({g.N, g.C, g.H, g.W}, p.x);
  try {
    conv2d_forward(ctx, g, x_host, w, &bias, y);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is f32[16, 20, 12, 12] on cpu, expected "
                                         "f32[16, 20, 12, 12] on cuda:0"),
              std::string::npos)
        << e.what();
  }
}

// The transposed convolution's Tensor-level passes on the GPU against the CPU's.
TEST(ConvolutionCuda, TransposedMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu(Device::cpu(), 1, 2);
  const std::vector<Conv2dGeometry> geometries = {
      {2, 4, 9, 11, 3, 3, 3, 1, 1, 2, 2},          // stride 2 upsampling
      {1, 6, 8, 7, 4, 3, 2, 1, 0, 2, 3, 1, 2, 2},  // groups, dilation, rectangular
      {2, 5, 8, 8, 5, 4, 4, 1, 1, 2, 2, 1, 1, 5},  // depthwise (FCN's bilinear upsampling)
      {3, 6, 5, 4, 9, 1, 1},                       // pointwise
  };
  uint64_t seed = 1200;
  for (const Conv2dGeometry& g : geometries) {
    SCOPED_TRACE(describe(g));
    Random rng(seed += 16);
    const Shape big = {g.N, g.C, g.H, g.W}, small = {g.N, g.K, g.P(), g.Q()};
    const Shape w_shape = {g.K, g.C / g.groups, g.R, g.S};
    const Tensor x = Tensor::from_vector(small, random_values(rng, shape_numel(small)));
    const Tensor w = Tensor::from_vector(w_shape, random_values(rng, shape_numel(w_shape)));
    const Tensor bias = Tensor::from_vector({g.C}, random_values(rng, g.C));
    const Tensor dy = Tensor::from_vector(big, random_values(rng, shape_numel(big)));
    const Tensor dw0 = Tensor::from_vector(w_shape, random_values(rng, shape_numel(w_shape)));
    const Tensor db0 = Tensor::from_vector({g.C}, random_values(rng, g.C));
    Tensor y(big), dx(small), dw = dw0.clone(), db = db0.clone();
    conv_transpose2d_forward(cpu, g, x, w, &bias, y);
    conv_transpose2d_backward_data(cpu, g, dy, w, dx);
    conv_transpose2d_backward_weights(cpu, g, x, dy, &dw, &db);

    auto device = [&](const Tensor& host) {
      Tensor t = gpu.empty(host.shape());
      t.copy_from(host);
      return t;
    };
    const Tensor xg = device(x), wg = device(w), bg = device(bias), dyg = device(dy);
    Tensor yg = gpu.empty(big), dxg = gpu.empty(small), dwg = device(dw0), dbg = device(db0);
    gpu.fill(yg, kNaN);
    gpu.fill(dxg, kNaN);
    conv_transpose2d_forward(gpu, g, xg, wg, &bg, yg);
    conv_transpose2d_backward_data(gpu, g, dyg, wg, dxg);
    conv_transpose2d_backward_weights(gpu, g, xg, dyg, &dwg, &dbg);
    gpu.synchronize();
    const auto as_double = [](const Tensor& t) {
      const std::vector<float> v = t.to_vector();
      return std::vector<double>(v.begin(), v.end());
    };
    expect_close(yg, as_double(y), "transposed forward");
    expect_close(dxg, as_double(dx), "transposed backward data");
    expect_close(dwg, as_double(dw), "transposed backward weights: dw");
    expect_close(dbg, as_double(db), "transposed backward weights: db");
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
