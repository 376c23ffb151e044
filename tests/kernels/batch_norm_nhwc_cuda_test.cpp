// Batch normalization on CUDA in the layouts and storage types of mixed-precision training: x,
// y, dy, dx (and r, dr of the fused form) in f32, bf16 or f16, nchw or nhwc, with f32 parameters
// and statistics, at the Tensor level, against the float64 reference on the same (exactly
// widened) inputs; and the same bits on every run.
//
// Tolerances, relative (normwise) per output: y, dx, dr are rounded once into their dtype from
// float arithmetic on exact inputs, so within u(dtype) (2^-8 bf16, 2^-11 f16, 2^-24 f32) plus
// 1e-5 for that float arithmetic (z = (x - mean) * scale + shift, and dx's three terms, cancel);
// the statistics, running statistics and dgamma / dbeta are float results of double sums of the
// same exact inputs: 1e-5.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/batch_norm_relu.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::half_input;
using testing::HalfInput;
using testing::widened;

struct Case {
  Shape shape;
  Layout layout;
};

const Case kCases[] = {
    {{1, 3, 5, 7}, Layout::nhwc},     // N = 1, odd H and W
    {{2, 13, 9, 11}, Layout::nhwc},   // C not a multiple of 8
    {{4, 64, 14, 14}, Layout::nhwc},  // a ResNet stage's channels
    {{2, 3, 1, 1}, Layout::nhwc},     // one pixel
    {{64, 8, 64, 70}, Layout::nhwc},  // more rows than kMaxChunks chunks: longer chunks
    {{300, 13}, Layout::nchw},        // [N, C]: split_rows too
    // split_rows_vec: 16-byte vectors where C % 8 == 0 (bf16, f16) or C % 4 == 0 (f32), odd
    // N*H*W; C = 12 is f32's vector path and bf16's / f16's scalar fallback
    {{1, 8, 7, 9}, Layout::nhwc},
    {{3, 12, 5, 7}, Layout::nhwc},
    {{2, 64, 9, 7}, Layout::nhwc},
    {{1, 256, 5, 3}, Layout::nhwc},
    {{33, 256, 9, 9}, Layout::nhwc},  // several chunks of rows per 256-channel tile
    // rows_tiled: a block is lanes = C / V threads across a row (tiles of at most 256)
    {{3, 8, 1, 1}, Layout::nhwc},     // M = 3 rows of one bf16 vector
    {{2, 2048, 3, 1}, Layout::nhwc},  // 256 lanes in bf16, 2 tiles in f32; one row a step
    {{5, 520, 7, 3}, Layout::nhwc},   // 65 lanes (bf16), 3 rows a step: a pairwise tree of 3
    {{128, 64, 9, 9}, Layout::nhwc},  // 8 lanes, 32 rows a step: several chunks of 512 rows
    // kernel 1's column sums by warp shuffles where lanes divides 32 (bf16 / f32 lanes: C = 32
    // 4 / 8, C = 128 16 / 32, both above; C = 256 32 in two rounds of 4 channels), the tree
    // where it does not (C = 96: 12 / 24 lanes)
    {{5, 32, 9, 9}, Layout::nhwc},
    {{3, 128, 7, 5}, Layout::nhwc},
    {{2, 96, 11, 3}, Layout::nhwc},
    {{2, 5, 45, 47}, Layout::nchw},  // split_channel in bf16 / f16
};

std::string describe(const Case& c, DType dtype) {
  return std::string(dtype_name(dtype)) + " " + shape_str(c.shape) + " " + layout_name(c.layout);
}

// The [M, C, S] view the kernels normalize: an nhwc x is its memory's [N*H*W, C, 1].
BatchNormShape view(const Case& c) {
  if (c.layout == Layout::nhwc) return {c.shape[0] * c.shape[2] * c.shape[3], c.shape[1], 1};
  return batch_norm_shape(c.shape);
}

double rel(Context& ctx, const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = widened(ctx, got);
  return testing::rel_error(std::vector<float>(g.begin(), g.end()), want);
}

// An activation of the case in `dtype`: exact values in memory order, and the device tensor.
HalfInput activation(Context& ctx, Random& rng, const Case& c, DType dtype, double low,
                     double high) {
  HalfInput in = half_input(ctx, rng, c.shape, dtype, low, high);
  in.device.set_layout(c.layout);
  return in;
}

Tensor output(Context& ctx, const Case& c, DType dtype) {
  Tensor t = testing::poisoned_as(ctx, c.shape, dtype);
  t.set_layout(c.layout);
  return t;
}

struct Params {
  std::vector<double> gamma, beta, running_mean, running_var;
  Tensor g, b, rm, rv, tracked, mean, invstd, dgamma, dbeta;
};

Params params(Context& ctx, Random& rng, int64_t C) {
  Params p;
  auto vec = [&](double low, double high) {
    const std::vector<float> v = testing::random_values(rng, C, low, high);
    return std::vector<double>(v.begin(), v.end());
  };
  auto dev = [&](const std::vector<double>& v) {
    return testing::to_device(ctx, {C}, std::vector<float>(v.begin(), v.end()));
  };
  p.gamma = vec(0.5, 1.5);
  p.beta = vec(-0.5, 0.5);
  p.running_mean = vec(-0.2, 0.2);
  p.running_var = vec(0.5, 1.5);
  p.g = dev(p.gamma);
  p.b = dev(p.beta);
  p.rm = dev(p.running_mean);
  p.rv = dev(p.running_var);
  p.tracked = testing::to_device(ctx, {1}, {0.0f});
  p.mean = ctx.zeros({C});
  p.invstd = ctx.zeros({C});
  p.dgamma = ctx.zeros({C});
  p.dbeta = ctx.zeros({C});
  return p;
}

TEST(BatchNormNhwcCuda, PlainMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(describe(c, dtype));
      Random rng(uint64_t(shape_numel(c.shape)));
      const BatchNormShape s = view(c);
      const size_t n = size_t(shape_numel(c.shape)), C = size_t(s.C);
      const double tolerance = testing::unit_roundoff(dtype) + 1e-5;
      const HalfInput x = activation(ctx, rng, c, dtype, -1.0, 2.0);
      const HalfInput dy = activation(ctx, rng, c, dtype, -1.0, 1.0);
      Params p = params(ctx, rng, s.C);
      Tensor y = output(ctx, c, dtype), dx = output(ctx, c, dtype), y_inf = output(ctx, c, dtype);
      batch_norm_forward_training(ctx, x.device, p.g, p.b, 1e-3f, 0.2f, y, p.mean, p.invstd, p.rm,
                                  p.rv, p.tracked);
      batch_norm_backward(ctx, x.device, dy.device, p.g, p.mean, p.invstd, true, dx, p.dgamma,
                          p.dbeta);
      std::vector<double> y_ref(n), mean(C), invstd(C), rm = p.running_mean, rv = p.running_var,
                                                        tracked{0.0};
      ref::batch_norm_forward_training<double>(s, x.exact.data(), p.gamma.data(), p.beta.data(),
                                               1e-3, 0.2, y_ref.data(), mean.data(), invstd.data(),
                                               rm.data(), rv.data(), tracked.data());
      std::vector<double> dx_ref(n), dgamma(C, 0.0), dbeta(C, 0.0);
      ref::batch_norm_backward<double>(s, x.exact.data(), dy.exact.data(), p.gamma.data(),
                                       mean.data(), invstd.data(), true, dx_ref.data(),
                                       dgamma.data(), dbeta.data());
      EXPECT_LE(rel(ctx, y, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dx, dx_ref), tolerance);
      EXPECT_LE(rel(ctx, p.mean, mean), 1e-5);
      EXPECT_LE(rel(ctx, p.invstd, invstd), 1e-5);
      EXPECT_LE(rel(ctx, p.rm, rm), 1e-5);
      EXPECT_LE(rel(ctx, p.rv, rv), 1e-5);
      EXPECT_LE(rel(ctx, p.dgamma, dgamma), 1e-5);
      EXPECT_LE(rel(ctx, p.dbeta, dbeta), 1e-5);
      EXPECT_EQ(widened(ctx, p.tracked), std::vector<double>{1.0});

      batch_norm_forward_inference(ctx, x.device, p.g, p.b, p.rm, p.rv, 1e-3f, y_inf, p.mean,
                                   p.invstd);
      ref::batch_norm_forward_inference<double>(s, x.exact.data(), p.gamma.data(), p.beta.data(),
                                                rm.data(), rv.data(), 1e-3, y_ref.data(),
                                                mean.data(), invstd.data());
      EXPECT_LE(rel(ctx, y_inf, y_ref), tolerance);
    }
  }
}

TEST(BatchNormNhwcCuda, FusedMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(describe(c, dtype));
      Random rng(uint64_t(shape_numel(c.shape)) + 1);
      const BatchNormShape s = view(c);
      const size_t n = size_t(shape_numel(c.shape)), C = size_t(s.C);
      const double tolerance = testing::unit_roundoff(dtype) + 1e-5;
      const HalfInput x = activation(ctx, rng, c, dtype, -1.0, 2.0);
      const HalfInput r = activation(ctx, rng, c, dtype, -1.0, 1.0);
      const HalfInput dy = activation(ctx, rng, c, dtype, -1.0, 1.0);
      Params p = params(ctx, rng, s.C);
      Tensor y = output(ctx, c, dtype), dx = output(ctx, c, dtype), dr = output(ctx, c, dtype);
      Tensor none;
      batch_norm_relu_forward_training(ctx, x.device, r.device, p.g, p.b, 1e-3f, 0.2f, y, none,
                                       p.mean, p.invstd, p.rm, p.rv, p.tracked);
      batch_norm_relu_backward(ctx, x.device, y, dy.device, p.g, p.b, p.mean, p.invstd, true, dx,
                               dr, p.dgamma, p.dbeta);
      std::vector<double> y_ref(n), mean(C), invstd(C), rm = p.running_mean, rv = p.running_var;
      ref::batch_norm_relu_forward_training<double>(
          s, x.exact.data(), r.exact.data(), p.gamma.data(), p.beta.data(), 1e-3, 0.2, y_ref.data(),
          nullptr, mean.data(), invstd.data(), rm.data(), rv.data(), nullptr);
      std::vector<double> dx_ref(n), dr_ref(n), dgamma(C, 0.0), dbeta(C, 0.0);
      ref::batch_norm_relu_backward<double>(s, x.exact.data(), y_ref.data(), dy.exact.data(),
                                            p.gamma.data(), p.beta.data(), mean.data(),
                                            invstd.data(), true, dx_ref.data(), dr_ref.data(),
                                            dgamma.data(), dbeta.data());
      EXPECT_LE(rel(ctx, y, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dr, dr_ref), tolerance);
      EXPECT_LE(rel(ctx, dx, dx_ref), tolerance);
      EXPECT_LE(rel(ctx, p.dgamma, dgamma), 1e-5);
      EXPECT_LE(rel(ctx, p.dbeta, dbeta), 1e-5);
      EXPECT_LE(rel(ctx, p.rv, rv), 1e-5);
    }
  }
}

// Without gamma and beta, without dx (the parameter gradients only), and in place (y over x, dx
// over dy), in every storage type, against the reference: the rows_tiled paths that
// PlainMatchesTheReference leaves out.
TEST(BatchNormNhwcCuda, NoAffineNoDxAndInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : {Case{{3, 64, 5, 7}, Layout::nhwc}, Case{{2, 2048, 3, 1}, Layout::nhwc}}) {
      SCOPED_TRACE(describe(c, dtype));
      Random rng(7);
      const BatchNormShape s = view(c);
      const size_t n = size_t(shape_numel(c.shape)), C = size_t(s.C);
      const double tolerance = testing::unit_roundoff(dtype) + 1e-5;
      const HalfInput x = activation(ctx, rng, c, dtype, -1.0, 2.0);
      const HalfInput dy = activation(ctx, rng, c, dtype, -1.0, 1.0);
      Params p = params(ctx, rng, s.C);
      Tensor none;
      std::vector<double> y_ref(n), mean(C), invstd(C), dx_ref(n), dgamma(C, 0.0), dbeta(C, 0.0);

      // No affine parameters: y and dx against the reference without gamma and beta.
      Tensor y = output(ctx, c, dtype), dx = output(ctx, c, dtype);
      batch_norm_forward_training(ctx, x.device, none, none, 1e-3f, 0.2f, y, p.mean, p.invstd, none,
                                  none, none);
      batch_norm_backward(ctx, x.device, dy.device, none, p.mean, p.invstd, true, dx, none, none);
      ref::batch_norm_forward_training<double>(s, x.exact.data(), nullptr, nullptr, 1e-3, 0.2,
                                               y_ref.data(), mean.data(), invstd.data(), nullptr,
                                               nullptr, nullptr);
      ref::batch_norm_backward<double>(s, x.exact.data(), dy.exact.data(), nullptr, mean.data(),
                                       invstd.data(), true, dx_ref.data(), nullptr, nullptr);
      EXPECT_LE(rel(ctx, y, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dx, dx_ref), tolerance);
      EXPECT_LE(rel(ctx, p.mean, mean), 1e-5);

      // In place, affine: y over (a copy of) x, dx over (a copy of) dy.
      Tensor y_in_place = output(ctx, c, dtype), dx_in_place = output(ctx, c, dtype);
      ctx.copy(y_in_place, x.device);
      ctx.copy(dx_in_place, dy.device);
      batch_norm_forward_training(ctx, y_in_place, p.g, p.b, 1e-3f, 0.2f, y_in_place, p.mean,
                                  p.invstd, none, none, none);
      batch_norm_backward(ctx, x.device, dx_in_place, p.g, p.mean, p.invstd, true, dx_in_place,
                          none, none);
      ref::batch_norm_forward_training<double>(s, x.exact.data(), p.gamma.data(), p.beta.data(),
                                               1e-3, 0.2, y_ref.data(), mean.data(), invstd.data(),
                                               nullptr, nullptr, nullptr);
      ref::batch_norm_backward<double>(s, x.exact.data(), dy.exact.data(), p.gamma.data(),
                                       mean.data(), invstd.data(), true, dx_ref.data(),
                                       dgamma.data(), dbeta.data());
      EXPECT_LE(rel(ctx, y_in_place, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dx_in_place, dx_ref), tolerance);

      // No dx: only the parameter gradients (from zero), the sums' kernel and its finish.
      batch_norm_backward(ctx, x.device, dy.device, p.g, p.mean, p.invstd, true, none, p.dgamma,
                          p.dbeta);
      EXPECT_LE(rel(ctx, p.dgamma, dgamma), 1e-5);
      EXPECT_LE(rel(ctx, p.dbeta, dbeta), 1e-5);
    }
  }
}

// The fused forms the way ResNet runs them, in every storage type, against the reference:
// relu(bn(x)) in place (y over x, with the copy of x) and its backward without y or dr (the mask
// from z recomputed; dx over dy), and the residual form's backward with dr over dy. rows_tiled's
// kernels issue the loads of later rows before a row's stores: in place, each row's own loads must
// still come first (C = 64 and 256: kernel 1's warp shuffles, 96: its tree).
TEST(BatchNormNhwcCuda, FusedWithoutResidualAndInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& c : {Case{{3, 64, 9, 7}, Layout::nhwc}, Case{{2, 96, 11, 3}, Layout::nhwc},
                          Case{{5, 256, 3, 7}, Layout::nhwc}}) {
      SCOPED_TRACE(describe(c, dtype));
      Random rng(11);
      const BatchNormShape s = view(c);
      const size_t n = size_t(shape_numel(c.shape)), C = size_t(s.C);
      const double tolerance = testing::unit_roundoff(dtype) + 1e-5;
      const HalfInput x = activation(ctx, rng, c, dtype, -1.0, 2.0);
      const HalfInput r = activation(ctx, rng, c, dtype, -1.0, 1.0);
      const HalfInput dy = activation(ctx, rng, c, dtype, -1.0, 1.0);
      Params p = params(ctx, rng, s.C);
      Tensor none;

      // relu(bn(x)): y over x, x kept in x_copy; the backward reads x_copy, dx over dy.
      Tensor y = output(ctx, c, dtype), x_copy = output(ctx, c, dtype);
      Tensor dx = output(ctx, c, dtype);
      ctx.copy(y, x.device);
      ctx.copy(dx, dy.device);
      batch_norm_relu_forward_training(ctx, y, none, p.g, p.b, 1e-3f, 0.2f, y, x_copy, p.mean,
                                       p.invstd, p.rm, p.rv, p.tracked);
      batch_norm_relu_backward(ctx, x_copy, none, dx, p.g, p.b, p.mean, p.invstd, true, dx, none,
                               p.dgamma, p.dbeta);
      std::vector<double> y_ref(n), mean(C), invstd(C), rm = p.running_mean, rv = p.running_var;
      ref::batch_norm_relu_forward_training<double>(
          s, x.exact.data(), nullptr, p.gamma.data(), p.beta.data(), 1e-3, 0.2, y_ref.data(),
          nullptr, mean.data(), invstd.data(), rm.data(), rv.data(), nullptr);
      std::vector<double> dx_ref(n), dgamma(C, 0.0), dbeta(C, 0.0);
      ref::batch_norm_relu_backward<double>(
          s, x.exact.data(), nullptr, dy.exact.data(), p.gamma.data(), p.beta.data(), mean.data(),
          invstd.data(), true, dx_ref.data(), nullptr, dgamma.data(), dbeta.data());
      EXPECT_EQ(rel(ctx, x_copy, x.exact), 0.0);
      EXPECT_LE(rel(ctx, y, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dx, dx_ref), tolerance);
      EXPECT_LE(rel(ctx, p.dgamma, dgamma), 1e-5);
      EXPECT_LE(rel(ctx, p.dbeta, dbeta), 1e-5);

      // relu(bn(x) + r): its backward with dr over (a copy of) dy.
      Tensor y_sum = output(ctx, c, dtype), dx_sum = output(ctx, c, dtype);
      Tensor dr = output(ctx, c, dtype);
      ctx.copy(dr, dy.device);
      batch_norm_relu_forward_training(ctx, x.device, r.device, p.g, p.b, 1e-3f, 0.2f, y_sum, none,
                                       p.mean, p.invstd, none, none, none);
      batch_norm_relu_backward(ctx, x.device, y_sum, dr, p.g, p.b, p.mean, p.invstd, true, dx_sum,
                               dr, none, none);
      ref::batch_norm_relu_forward_training<double>(
          s, x.exact.data(), r.exact.data(), p.gamma.data(), p.beta.data(), 1e-3, 0.2, y_ref.data(),
          nullptr, mean.data(), invstd.data(), nullptr, nullptr, nullptr);
      std::vector<double> dr_ref(n);
      ref::batch_norm_relu_backward<double>(
          s, x.exact.data(), y_ref.data(), dy.exact.data(), p.gamma.data(), p.beta.data(),
          mean.data(), invstd.data(), true, dx_ref.data(), dr_ref.data(), nullptr, nullptr);
      EXPECT_LE(rel(ctx, y_sum, y_ref), tolerance);
      EXPECT_LE(rel(ctx, dr, dr_ref), tolerance);
      EXPECT_LE(rel(ctx, dx_sum, dx_ref), tolerance);
    }
  }
}

// Fixed partials and trees, no atomics: two runs, the same bits, in every storage type.
TEST(BatchNormNhwcCuda, Deterministic) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case c{{16, 64, 28, 28}, Layout::nhwc};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(describe(c, dtype));
    std::vector<std::vector<double>> runs[2];
    for (auto& run : runs) {
      Random rng(5);
      const HalfInput x = activation(ctx, rng, c, dtype, -1.0, 2.0);
      const HalfInput dy = activation(ctx, rng, c, dtype, -1.0, 1.0);
      Params p = params(ctx, rng, c.shape[1]);
      Tensor y = output(ctx, c, dtype), dx = output(ctx, c, dtype);
      batch_norm_forward_training(ctx, x.device, p.g, p.b, 1e-5f, 0.1f, y, p.mean, p.invstd, p.rm,
                                  p.rv, p.tracked);
      batch_norm_backward(ctx, x.device, dy.device, p.g, p.mean, p.invstd, true, dx, p.dgamma,
                          p.dbeta);
      for (const Tensor* t : {&y, &dx, &p.mean, &p.invstd, &p.rv, &p.dgamma, &p.dbeta}) {
        run.push_back(widened(ctx, *t));
      }
    }
    EXPECT_EQ(runs[0], runs[1]);
  }
}

}  // namespace
}  // namespace crema::kernels
