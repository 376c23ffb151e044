// The Tensor-level convolution on CUDA in nhwc (convolution.h, "Tensors"): f32 tensors in each
// math (cuda::conv2d_*_nhwc) and bf16 and f16 tensors (the tensor-core passes of
// convolution_tc.h, fp32 bias, fp32 filter and bias gradients) through conv2d_* against the
// double reference on the same (rounded) inputs, on the CPU tests' awkward geometries plus ones
// on the 16-byte paths (channels multiples of 8) and a bias gradient over many row slices; y and
// dx poisoned with NaN, dw and db accumulated onto random values; bit-identical repeats; the
// errors for what does not run.
//
// Tolerance per element, u = 2^-24, n the terms of the sum, S = sum|terms| (the reference on
// absolute values):
//   f32 fp32 math   (n + 1) u S                       (fp32 products and sums)
//   f32 tf32 math   (2^-10 + (n + 1) u) S             (each operand rounded to 10 mantissa bits;
//                   2^-9 where a pass runs on wgmma, which truncates them: conv2d_nhwc_kernel)
//   f32 bf16 math   (2^-7 + (n + 1) u) S              (7 mantissa bits)
//   bf16, f16       2^-m |y| + (1 + 2^-m)(n + 1) u S  for y and dx (exact 16-bit products, fp32
//                   sums, one rounding to the type: m = 8 bf16, 11 f16); (n + 1) u S for the fp32
//                   dw and db (no final rounding)
// The inputs of a 16-bit run are the rounded values, so the reference sees what the GPU sees.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/convolution.h"
#include "tests/kernels/convolution_layout_test_util.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;
using testing::error_of;

// The layout tests' geometries, then the 16-byte paths (C/groups and K/groups multiples of 8) with
// several block tiles, N = 1 and stride 2.
std::vector<Conv2dGeometry> geometries() {
  std::vector<Conv2dGeometry> all = layout_geometries();
  // N C  H  W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
  all.push_back({2, 64, 9, 11, 72, 3, 3, 1, 1});
  all.push_back({1, 32, 15, 13, 136, 1, 1, 0, 0, 2, 2});
  all.push_back({3, 48, 8, 7, 32, 3, 3, 2, 2, 1, 1, 2, 2, 2});
  return all;
}

double representable(double v, DType dtype) {
  if (dtype == DType::bf16) return double(to_f32(to_bf16(float(v))));
  if (dtype == DType::f16) return double(to_f32(to_f16(float(v))));
  return v;
}

// A tensor on ctx's device in dtype and nhwc holding `values` (rounded to the dtype).
Tensor device_tensor(Context& ctx, const Shape& shape, DType dtype, const std::vector<double>& v) {
  Tensor host(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
      case DType::bf16:
        host.data<bf16_t>()[i] = to_bf16(float(v[i]));
        break;
      case DType::f16:
        host.data<f16_t>()[i] = to_f16(float(v[i]));
        break;
      default:
        host.data<float>()[i] = float(v[i]);
    }
  }
  Tensor t = ctx.empty(shape, dtype);
  t.copy_from(host);
  if (shape.size() == 4) t.set_layout(Layout::nhwc);
  return t;
}
Tensor poisoned(Context& ctx, const Shape& shape, DType dtype) {
  return device_tensor(ctx, shape, dtype, std::vector<double>(size_t(shape_numel(shape)), NAN));
}
std::vector<double> host_values(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  const std::vector<float> f = t.to_vector();
  return std::vector<double>(f.begin(), f.end());
}

// The bound on an output of n terms with sums S (the file's comment); `rounded`: y and dx of a
// 16-bit run, which round once to the type.
double bound(DType dtype, GemmMath math, bool rounded, int64_t n, double want, double S,
             bool truncated = false) {
  const double u = std::ldexp(1.0, -24), sums = double(n + 1) * u * S;
  if (dtype == DType::bf16 || dtype == DType::f16) {
    if (!rounded) return sums;
    const double r = std::ldexp(1.0, dtype == DType::bf16 ? -8 : -11);
    return r * std::fabs(want) + (1 + r) * sums;
  }
  if (math == GemmMath::tf32) return std::ldexp(1.0, truncated ? -9 : -10) * S + sums;
  if (math == GemmMath::bf16) return std::ldexp(1.0, -7) * S + sums;
  return sums;
}

struct Results {
  std::vector<double> y, dx, dw, db;
};

Results run_passes(Context& ctx, const Conv2dGeometry& g, DType dtype, GemmMath math,
                   const NhwcProblem& p) {
  const DType params = conv_parameter_dtype(dtype);
  ConvRequest request;
  request.math = math;
  const Tensor x = device_tensor(ctx, g.x_shape(), dtype, p.x);
  const Tensor w = device_tensor(ctx, g.w_shape(), dtype, p.w);
  const Tensor dy = device_tensor(ctx, g.y_shape(), dtype, p.dy);
  const Tensor bias = device_tensor(ctx, {g.K}, params, p.bias);
  Tensor dw = device_tensor(ctx, g.w_shape(), params, p.dw0);
  Tensor db = device_tensor(ctx, {g.K}, params, p.db0);
  Tensor y = poisoned(ctx, g.y_shape(), dtype), dx = poisoned(ctx, g.x_shape(), dtype);
  conv2d_forward(ctx, g, x, w, &bias, y, request);
  conv2d_backward_data(ctx, g, dy, w, dx, request);
  conv2d_backward_weights(ctx, g, x, dy, dw, &db, request);
  return {host_values(ctx, y), host_values(ctx, dx), host_values(ctx, dw), host_values(ctx, db)};
}

void check_geometry(const Conv2dGeometry& g, DType dtype, GemmMath math, uint64_t seed) {
  SCOPED_TRACE(describe(g) + " " + dtype_name(dtype) + " math " + cuda::gemm_math_name(math));
  Context ctx(Device::cuda(0));
  const NhwcProblem p = nhwc_problem(g, seed, [&](double v) { return representable(v, dtype); });
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups, NPQ = g.N * g.P() * g.Q();
  const Results r = run_passes(ctx, g, dtype, math, p);
  // f32 passes on wgmma truncate their operands to TF32 (tf32 math on Hopper).
  auto truncates = [&](ConvPass pass) {
    return dtype == DType::f32 &&
           std::string(conv2d_nhwc_kernel(pass, g, dtype, math)) == "tc_wgmma";
  };
  const bool y_truncated = truncates(ConvPass::forward),
             dx_truncated = truncates(ConvPass::backward_data);
  expect_within("y", r.y, p.y, [&](size_t i) {
    return bound(dtype, math, true, g.R * g.S * Cg + 1, p.y[i], p.y_abs[i], y_truncated);
  });
  expect_within("dx", r.dx, p.dx, [&](size_t i) {
    return bound(dtype, math, true, g.R * g.S * Kg, p.dx[i], p.dx_abs[i], dx_truncated);
  });
  expect_within("dw", r.dw, p.dw,
                [&](size_t i) { return bound(dtype, math, false, NPQ + 1, p.dw[i], p.dw_abs[i]); });
  // The bias gradient sums in fp32 whatever the math.
  expect_within("db", r.db, p.db, [&](size_t i) {
    return bound(dtype, GemmMath::fp32, false, NPQ + 1, p.db[i], p.db_abs[i]);
  });
  const Results again = run_passes(ctx, g, dtype, math, p);
  EXPECT_EQ(again.y, r.y);
  EXPECT_EQ(again.dx, r.dx);
  EXPECT_EQ(again.dw, r.dw);
  EXPECT_EQ(again.db, r.db);
}

TEST(ConvolutionLayoutCuda, NhwcF32EveryMathMatchesTheDoubleReference) {
  CREMA_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (const Conv2dGeometry& g : geometries()) {
    for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      check_geometry(g, DType::f32, math, seed++);
    }
  }
}

TEST(ConvolutionLayoutCuda, NhwcBf16MatchesTheDoubleReference) {
  CREMA_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (const Conv2dGeometry& g : geometries())
    check_geometry(g, DType::bf16, GemmMath::fp32, seed++);
}

TEST(ConvolutionLayoutCuda, NhwcF16MatchesTheDoubleReference) {
  CREMA_REQUIRE_CUDA();
  uint64_t seed = 200;
  for (const Conv2dGeometry& g : geometries())
    check_geometry(g, DType::f16, GemmMath::fp32, seed++);
}

// Many rows (N*P*Q = 180000: more than 512 slices of 256, so longer slices) and K not a multiple
// of the kernel's 32 channels, in each dtype.
TEST(ConvolutionLayoutCuda, BiasGradientOverManyRows) {
  CREMA_REQUIRE_CUDA();
  const Conv2dGeometry g{2, 3, 300, 300, 40, 1, 1};
  Context ctx(Device::cuda(0));
  uint64_t seed = 300;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Random rng(seed++);
    std::vector<double> dy(size_t(shape_numel(g.y_shape()))), db0(size_t(g.K));
    for (double& v : dy) v = representable(rng.uniform(-1.0, 1.0), dtype);
    for (double& v : db0) v = double(float(rng.uniform(-1.0, 1.0)));
    std::vector<double> want = db0, sums(db0.size());
    for (size_t i = 0; i < dy.size(); ++i) {
      want[i % size_t(g.K)] += dy[i];
      sums[i % size_t(g.K)] += std::fabs(dy[i]);
    }
    const Tensor tdy = device_tensor(ctx, g.y_shape(), dtype, dy);
    Tensor db = device_tensor(ctx, {g.K}, DType::f32, db0);
    conv2d_backward_bias(ctx, g, tdy, db);
    const int64_t n = g.N * g.P() * g.Q() + 1;
    const std::vector<double> got = host_values(ctx, db);
    expect_within("db", got, want, [&](size_t k) {
      return bound(DType::f32, GemmMath::fp32, false, n, want[k], sums[k] + std::fabs(db0[k]));
    });
    Tensor db_again = device_tensor(ctx, {g.K}, DType::f32, db0);
    conv2d_backward_bias(ctx, g, tdy, db_again);
    EXPECT_EQ(host_values(ctx, db_again), got);
  }
}

TEST(ConvolutionLayoutCuda, WhatDoesNotRunIsNamed) {
  CREMA_REQUIRE_CUDA();
  const Conv2dGeometry g{1, 8, 5, 5, 8, 3, 3, 1, 1};
  Context ctx(Device::cuda(0));
  Tensor x = ctx.empty(g.x_shape(), DType::bf16), w = ctx.empty(g.w_shape(), DType::bf16);
  Tensor y = ctx.empty(g.y_shape(), DType::bf16);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x, w, nullptr, y); }),
                  "conv2d_forward: no implementation for bf16 nchw on cuda:0");
  for (Tensor* t : {&x, &w, &y}) t->set_layout(Layout::nhwc);
  const Tensor bias16 = ctx.empty({g.K}, DType::bf16);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x, w, &bias16, y); }),
                  "conv2d_forward: bias is bf16[8] on cuda:0, expected f32[8] on cuda:0");
  Tensor dw16 = ctx.empty(g.w_shape(), DType::bf16);
  dw16.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(error_of([&] { conv2d_backward_filter(ctx, g, x, y, dw16); }),
                  "conv2d_backward_filter: dw is bf16[8, 8, 3, 3] nhwc on cuda:0, expected f32");
  Tensor x16f = ctx.empty(g.x_shape(), DType::f16);
  x16f.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x16f, w, nullptr, y); }),
                  "conv2d_forward: w is bf16[8, 8, 3, 3] nhwc on cuda:0, expected f16");
}

}  // namespace
}  // namespace crema::kernels::conv_test
