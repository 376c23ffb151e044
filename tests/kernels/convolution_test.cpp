#include "kernels/convolution/convolution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

using conv_test::describe;
using testing::count_nan;
using testing::kNaN;
using testing::rel_error;

std::vector<double> random_doubles(Random& random, int64_t count) {
  std::vector<double> values(static_cast<size_t>(count));
  for (double& v : values) v = random.uniform(-1.0, 1.0);
  return values;
}

std::vector<float> to_float(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

Tensor tensor_of(const Shape& shape, const std::vector<double>& values) {
  return Tensor::from_vector(shape, to_float(values));
}

// Awkward geometries: N = 1, odd sizes, stride 2, padding 1 and 2, rectangular filters,
// dilation 2, groups 2 and depthwise, P = Q = 1, 1x1 filters (pointwise: no im2col; and with
// stride or padding: im2col), sizes not multiples of anything, a batch that does not divide into
// the fast path's chunks, and LeNet's conv2.
std::vector<Conv2dGeometry> geometries() {
  return {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 3, 7, 9, 5, 3, 3, 1, 1},
      {2, 4, 11, 10, 6, 3, 2, 2, 1, 2, 2},
      {3, 5, 9, 13, 7, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 6, 8, 7, 4, 3, 3, 1, 1, 2, 1, 1, 1, 2},
      {5, 6, 7, 6, 4, 3, 3, 1, 1, 1, 2, 1, 1, 2},  // groups with enough images to split
      {2, 3, 5, 6, 3, 5, 2, 0, 0, 1, 5},           // P = Q = 1
      {3, 7, 5, 3, 9, 1, 1},
      {2, 4, 6, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},    // depthwise-like: one channel per group
      {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},             // outputs that read only padding
      {4, 2, 18, 17, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // long rows: one image per GEMM
      {37, 3, 9, 8, 5, 3, 2, 1, 0},                  // many images: several chunks, a partial last
      {4, 20, 12, 12, 50, 5, 5},                     // LeNet conv2
      {1, 6, 5, 7, 4, 1, 1, 0, 0, 1, 1, 1, 1, 2},    // pointwise with groups, in place (N = 1)
      {4, 3, 16, 17, 5, 1, 1},                       // pointwise, in place (P*Q >= 256)
      {9, 5, 4, 3, 6, 1, 1, 0, 0, 1, 1, 3, 2},       // pointwise in chunks (dilation is moot)
      {2, 3, 6, 5, 4, 1, 1, 1, 0, 2, 1},             // 1x1 with padding and stride: im2col
      {3, 4, 7, 6, 4, 3, 3, 1, 1, 2, 2, 1, 1, 4},    // depthwise: group = C = K, stride 2
      {2, 3, 8, 9, 6, 3, 2, 2, 1, 1, 2, 2, 1, 3},    // depthwise, 2 filters per channel, dilated
  };
}

struct Data {
  std::vector<double> x, w, bias, dy;
};

Data random_data(const Conv2dGeometry& g, Random& random) {
  return {random_doubles(random, g.N * g.C * g.H * g.W),
          random_doubles(random, g.K * (g.C / g.groups) * g.R * g.S), random_doubles(random, g.K),
          random_doubles(random, g.N * g.K * g.P() * g.Q())};
}

// ---------------------------------------------------------------------------------------------
// The reference, proved on its own.

TEST(ConvolutionRef, HandComputed) {
  // x = 1..9 as a 3x3 image, w = [[1, 2], [3, 4]], bias 0.5.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 2, 3, 4}, bias = {0.5};

  // No padding, stride 1: y[p,q] = x[p,q] + 2 x[p,q+1] + 3 x[p+1,q] + 4 x[p+1,q+1] + 0.5.
  const Conv2dGeometry plain{1, 1, 3, 3, 1, 2, 2};
  std::vector<double> y(4, kNaN);
  ref::conv2d_forward(plain, x.data(), w.data(), bias.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{37.5, 47.5, 67.5, 77.5}));

  // Padding 1, stride 2: output (p, q) reads pixels (2p - 1 + r, 2q - 1 + s).
  //   y[0,0] = 4*x[0,0]                          = 4
  //   y[0,1] = 3*x[0,1] + 4*x[0,2]               = 18
  //   y[1,0] = 2*x[1,0] + 4*x[2,0]               = 36
  //   y[1,1] = x[1,1] + 2x[1,2] + 3x[2,1] + 4x[2,2] = 77
  const Conv2dGeometry padded{1, 1, 3, 3, 1, 2, 2, 1, 1, 2, 2};
  ref::conv2d_forward<double>(padded, x.data(), w.data(), nullptr, y.data());
  EXPECT_EQ(y, (std::vector<double>{4, 18, 36, 77}));

  // Backward with dy = [[1, 0], [0, 2]] on the padded geometry: dx scatters w back onto the
  // pixels each output read; dw collects the pixels; db sums dy.
  const std::vector<double> dy = {1, 0, 0, 2};
  std::vector<double> dx(9, kNaN), dw = {10, 20, 30, 40}, db = {5};
  ref::conv2d_backward_data(padded, dy.data(), w.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{4, 0, 0, 0, 2, 4, 0, 6, 8}));
  ref::conv2d_backward_filter(padded, x.data(), dy.data(), dw.data());
  // dw[r,s] += 1*x[-1+r, -1+s] + 2*x[1+r, 1+s]: (0,0): 0 + 2*5, (0,1): 0 + 2*6, (1,0): 0 + 2*8,
  // (1,1): x[0,0] + 2*x[2,2].
  EXPECT_EQ(dw, (std::vector<double>{20, 32, 46, 59}));
  ref::conv2d_backward_bias(padded, dy.data(), db.data());
  EXPECT_EQ(db, (std::vector<double>{8}));
}

// The backward passes are the adjoints of the forward map:
//   <conv(x, w), dy> == <x, backward_data(dy, w)> == <w, backward_filter(x, dy)>.
TEST(ConvolutionRef, BackwardPassesAreAdjoints) {
  Random random(11);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    std::vector<double> y(d.dy.size()), dx(d.x.size()), dw(d.w.size(), 0.0);
    ref::conv2d_forward<double>(g, d.x.data(), d.w.data(), nullptr, y.data());
    ref::conv2d_backward_data(g, d.dy.data(), d.w.data(), dx.data());
    ref::conv2d_backward_filter(g, d.x.data(), d.dy.data(), dw.data());
    const double forward = dot(y, d.dy);
    const double tolerance = 1e-12 * (1.0 + std::abs(forward)) * std::sqrt(double(y.size()));
    EXPECT_NEAR(dot(d.x, dx), forward, tolerance) << describe(g);
    EXPECT_NEAR(dot(d.w, dw), forward, tolerance) << describe(g);
  }
}

// An independent route to the same forward result: im2col per image and group, then a GEMM,
// both from their own references. Also checks that groups act as separate convolutions.
TEST(ConvolutionRef, ForwardEqualsIm2colTimesFilter) {
  Random random(13);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    std::vector<double> y(d.dy.size());
    ref::conv2d_forward(g, d.x.data(), d.w.data(), d.bias.data(), y.data());

    const Im2colGeometry patches = g.group_patches();
    const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups, CRS = patches.col_rows();
    const int64_t PQ = g.P() * g.Q();
    std::vector<double> col(CRS * PQ), expected(y.size());
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t group = 0; group < g.groups; ++group) {
        ref::im2col(patches, d.x.data() + (n * g.C + group * Cg) * g.H * g.W, col.data());
        double* y_ng = expected.data() + (n * g.K + group * Kg) * PQ;  // [Kg, PQ]
        for (int64_t k = 0; k < Kg; ++k) {
          for (int64_t i = 0; i < PQ; ++i) y_ng[k * PQ + i] = d.bias[group * Kg + k];
        }
        ref::gemm<double>(false, false, Kg, PQ, CRS, 1.0, d.w.data() + group * Kg * CRS, CRS,
                          col.data(), PQ, 1.0, y_ng, PQ);
      }
    }
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-12) << describe(g);
  }
}

// ---------------------------------------------------------------------------------------------
// The fast path (through the Tensor-level dispatch) against the double reference.

constexpr double kTolerance = 1e-5;

TEST(ConvolutionCpu, ForwardMatchesReference) {
  Random random(17);
  Context ctx(Device::cpu(), 1, 2);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    for (const bool with_bias : {true, false}) {
      std::vector<double> expected(d.dy.size());
      ref::conv2d_forward(g, d.x.data(), d.w.data(), with_bias ? d.bias.data() : nullptr,
                          expected.data());
      const Tensor x = tensor_of(g.x_shape(), d.x), w = tensor_of(g.w_shape(), d.w);
      const Tensor bias = tensor_of({g.K}, d.bias);
      Tensor y = testing::poisoned(g.y_shape());
      conv2d_forward(ctx, g, x, w, with_bias ? &bias : nullptr, y);
      EXPECT_EQ(count_nan(y.to_vector()), 0) << describe(g);
      EXPECT_LT(rel_error(y.to_vector(), expected), kTolerance) << describe(g);
    }
  }
}

TEST(ConvolutionCpu, BackwardDataMatchesReferenceAndWritesAll) {
  Random random(19);
  Context ctx(Device::cpu(), 1, 2);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    std::vector<double> expected(d.x.size());
    ref::conv2d_backward_data(g, d.dy.data(), d.w.data(), expected.data());
    const Tensor dy = tensor_of(g.y_shape(), d.dy), w = tensor_of(g.w_shape(), d.w);
    Tensor dx = testing::poisoned(g.x_shape());
    conv2d_backward_data(ctx, g, dy, w, dx);
    EXPECT_EQ(count_nan(dx.to_vector()), 0) << describe(g);
    EXPECT_LT(rel_error(dx.to_vector(), expected), kTolerance) << describe(g);
  }
}

TEST(ConvolutionCpu, BackwardFilterAccumulates) {
  Random random(23);
  Context ctx(Device::cpu(), 1, 2);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    const std::vector<double> start = random_doubles(random, int64_t(d.w.size()));
    std::vector<double> expected = start;
    ref::conv2d_backward_filter(g, d.x.data(), d.dy.data(), expected.data());
    const Tensor x = tensor_of(g.x_shape(), d.x), dy = tensor_of(g.y_shape(), d.dy);
    Tensor dw = tensor_of(g.w_shape(), start);
    conv2d_backward_filter(ctx, g, x, dy, dw);
    EXPECT_LT(rel_error(dw.to_vector(), expected), kTolerance) << describe(g);
  }
}

TEST(ConvolutionCpu, BackwardBiasAccumulates) {
  Random random(29);
  Context ctx(Device::cpu(), 1, 2);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    const std::vector<double> start = random_doubles(random, g.K);
    std::vector<double> expected = start;
    ref::conv2d_backward_bias(g, d.dy.data(), expected.data());
    const Tensor dy = tensor_of(g.y_shape(), d.dy);
    Tensor db = tensor_of({g.K}, start);
    conv2d_backward_bias(ctx, g, dy, db);
    EXPECT_LT(rel_error(db.to_vector(), expected), kTolerance) << describe(g);
  }
}

// The raw-pointer path on 1 and 3 threads (the tests above run 2): every split of the work
// (one thread, threads sharing each chunk, threads taking their own images) gives the answer,
// with a workspace of exactly the reported size.
TEST(ConvolutionCpu, AnyThreadCountMatchesReference) {
  Random random(31);
  for (const Conv2dGeometry& g : geometries()) {
    const Data d = random_data(g, random);
    std::vector<double> y_ref(d.dy.size()), dx_ref(d.x.size()), dw_ref(d.w.size(), 0.0);
    ref::conv2d_forward(g, d.x.data(), d.w.data(), d.bias.data(), y_ref.data());
    ref::conv2d_backward_data(g, d.dy.data(), d.w.data(), dx_ref.data());
    ref::conv2d_backward_filter(g, d.x.data(), d.dy.data(), dw_ref.data());
    const std::vector<float> x = to_float(d.x), w = to_float(d.w), bias = to_float(d.bias);
    const std::vector<float> dy = to_float(d.dy);
    for (const int threads : {1, 3}) {
      std::vector<float> ws(cpu::conv2d_forward_workspace(g, threads), kNaN);
      std::vector<float> y(y_ref.size(), kNaN);
      cpu::conv2d_forward(g, x.data(), w.data(), bias.data(), y.data(), ws.data(), threads);
      EXPECT_LT(rel_error(y, y_ref), kTolerance) << describe(g) << " threads=" << threads;

      ws.assign(cpu::conv2d_backward_data_workspace(g, threads), kNaN);
      std::vector<float> dx(dx_ref.size(), kNaN);
      cpu::conv2d_backward_data(g, dy.data(), w.data(), dx.data(), ws.data(), threads);
      EXPECT_LT(rel_error(dx, dx_ref), kTolerance) << describe(g) << " threads=" << threads;

      ws.assign(cpu::conv2d_backward_filter_workspace(g, threads), kNaN);
      std::vector<float> dw(dw_ref.size(), 0.0f);
      cpu::conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), ws.data(), threads);
      EXPECT_LT(rel_error(dw, dw_ref), kTolerance) << describe(g) << " threads=" << threads;
    }
  }
}

// float64 tensors run the reference (used by gradient checks).
TEST(ConvolutionCpu, DoubleTensorsRunTheReference) {
  Random random(37);
  Context ctx;
  const Conv2dGeometry g = geometries()[3];
  const Data d = random_data(g, random);
  Tensor x(g.x_shape(), DType::f64), w(g.w_shape(), DType::f64), y(g.y_shape(), DType::f64);
  std::copy(d.x.begin(), d.x.end(), x.data<double>());
  std::copy(d.w.begin(), d.w.end(), w.data<double>());
  conv2d_forward(ctx, g, x, w, nullptr, y);
  std::vector<double> expected(d.dy.size());
  ref::conv2d_forward<double>(g, d.x.data(), d.w.data(), nullptr, expected.data());
  EXPECT_EQ(std::vector<double>(y.data<double>(), y.data<double>() + y.numel()), expected);
}

// ---------------------------------------------------------------------------------------------
// The transposed convolution: the convolution's passes with the roles of x and y swapped.

// Calls f(x_index, w_index, y_index) for every term y[n,c,h,w] += w[k,c',r,s] * x[n,k,p,q] of the
// transposed convolution (x [N,K,P,Q] its input, y [N,C,H,W] its output, written from its own
// definition: input pixel (p, q) of channel k spreads over the outputs its filters cover).
template <class F>
void for_each_transposed_term(const Conv2dGeometry& g, F f) {
  const int64_t P = g.P(), Q = g.Q(), Cg = g.C / g.groups, Kg = g.K / g.groups;
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t k = 0; k < g.K; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          for (int64_t cg = 0; cg < Cg; ++cg) {
            for (int64_t r = 0; r < g.R; ++r) {
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t h = p * g.stride_h - g.pad_h + r * g.dilation_h;
                const int64_t w = q * g.stride_w - g.pad_w + s * g.dilation_w;
                if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                const int64_t c = k / Kg * Cg + cg;
                f(((n * g.K + k) * P + p) * Q + q, ((k * Cg + cg) * g.R + r) * g.S + s,
                  ((n * g.C + c) * g.H + h) * g.W + w);
              }
            }
          }
        }
      }
    }
  }
}

TEST(ConvolutionTranspose, PassesMatchTheDefinition) {
  Random random(43);
  Context ctx(Device::cpu(), 1, 2);
  for (const Conv2dGeometry& g : geometries()) {
    // Transposed: x is the convolution's output shape, dy its input shape.
    const std::vector<double> x = random_doubles(random, g.N * g.K * g.P() * g.Q());
    const std::vector<double> w = random_doubles(random, g.K * (g.C / g.groups) * g.R * g.S);
    const std::vector<double> bias = random_doubles(random, g.C);
    const std::vector<double> dy = random_doubles(random, g.N * g.C * g.H * g.W);
    const std::vector<double> dw0 = random_doubles(random, int64_t(w.size()));
    const std::vector<double> db0 = random_doubles(random, g.C);
    std::vector<double> y(dy.size()), dx(x.size(), 0.0), dw = dw0, db = db0;
    const int64_t HW = g.H * g.W;
    for (size_t i = 0; i < y.size(); ++i) y[i] = bias[i / HW % g.C];
    for (size_t i = 0; i < dy.size(); ++i) db[i / HW % g.C] += dy[i];
    for_each_transposed_term(g, [&](int64_t xi, int64_t wi, int64_t yi) {
      y[yi] += w[wi] * x[xi];
      dx[xi] += w[wi] * dy[yi];
      dw[wi] += x[xi] * dy[yi];
    });

    const Tensor xt = tensor_of(g.y_shape(), x), wt = tensor_of(g.w_shape(), w);
    const Tensor bt = tensor_of({g.C}, bias), dyt = tensor_of(g.x_shape(), dy);
    Tensor yt = testing::poisoned(g.x_shape()), dxt = testing::poisoned(g.y_shape());
    Tensor dwt = tensor_of(g.w_shape(), dw0), dbt = tensor_of({g.C}, db0);
    conv_transpose2d_forward(ctx, g, xt, wt, &bt, yt);
    conv_transpose2d_backward_data(ctx, g, dyt, wt, dxt);
    conv_transpose2d_backward_weights(ctx, g, xt, dyt, &dwt, &dbt);
    EXPECT_LT(rel_error(yt.to_vector(), y), kTolerance) << describe(g);
    EXPECT_LT(rel_error(dxt.to_vector(), dx), kTolerance) << describe(g);
    EXPECT_LT(rel_error(dwt.to_vector(), dw), kTolerance) << describe(g);
    EXPECT_LT(rel_error(dbt.to_vector(), db), kTolerance) << describe(g);

    // Either parameter gradient alone (the other frozen) leaves the other untouched.
    Tensor only_db = tensor_of({g.C}, db0), only_dw = tensor_of(g.w_shape(), dw0);
    conv_transpose2d_backward_weights(ctx, g, xt, dyt, nullptr, &only_db);
    conv_transpose2d_backward_weights(ctx, g, xt, dyt, &only_dw, nullptr);
    EXPECT_EQ(only_db.to_vector(), dbt.to_vector()) << describe(g);
    EXPECT_EQ(only_dw.to_vector(), dwt.to_vector()) << describe(g);
  }
}

TEST(ConvolutionTranspose, DoubleTensorsRunTheReference) {
  Random random(47);
  Context ctx;
  const Conv2dGeometry g = geometries()[2];
  const std::vector<double> x = random_doubles(random, g.N * g.K * g.P() * g.Q());
  const std::vector<double> w = random_doubles(random, g.K * (g.C / g.groups) * g.R * g.S);
  const std::vector<double> bias = random_doubles(random, g.C);
  std::vector<double> expected(size_t(g.N * g.C * g.H * g.W));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = bias[i / (g.H * g.W) % g.C];
  for_each_transposed_term(
      g, [&](int64_t xi, int64_t wi, int64_t yi) { expected[yi] += w[wi] * x[xi]; });
  Tensor xt(g.y_shape(), DType::f64), wt(g.w_shape(), DType::f64), bt({g.C}, DType::f64);
  Tensor yt(g.x_shape(), DType::f64);
  std::copy(x.begin(), x.end(), xt.data<double>());
  std::copy(w.begin(), w.end(), wt.data<double>());
  std::copy(bias.begin(), bias.end(), bt.data<double>());
  conv_transpose2d_forward(ctx, g, xt, wt, &bt, yt);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(yt.data<double>()[i], expected[i], 1e-12) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Errors a user can cause.

void expect_error_mentions(const Conv2dGeometry& g, const std::vector<std::string>& parts) {
  try {
    g.validate("layer 'conv1'");
    ADD_FAILURE() << "no error for " << describe(g);
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

TEST(ConvolutionGeometry, ValidateRejectsWhatCannotWork) {
  EXPECT_NO_THROW((Conv2dGeometry{64, 1, 28, 28, 20, 5, 5}.validate("conv1")));
  // A 5x5 filter on a 2x4 input padded by 1: 4x6 padded, too short.
  expect_error_mentions({1, 1, 2, 4, 2, 5, 5, 1, 1}, {"layer 'conv1'", "5x5", "4x6", "2x4"});
  // Dilation makes a 3x3 filter span 5x5.
  expect_error_mentions({1, 1, 4, 8, 2, 3, 3, 0, 0, 1, 1, 2, 2}, {"5x5", "4x8"});
  expect_error_mentions({1, 6, 8, 8, 4, 3, 3, 0, 0, 1, 1, 1, 1, 4}, {"groups", "C=6", "K=4"});
  expect_error_mentions({1, 1, 8, 8, 2, 3, 3, 0, 0, 0, 1}, {"stride_h"});
  expect_error_mentions({0, 1, 8, 8, 2, 3, 3}, {"N"});
  expect_error_mentions({1, 1, 8, 8, 2, 3, 3, -1, 0}, {"padding"});
  expect_error_mentions({1, 1, 8, 8, 2, 3, 3, 0, 0, 1, 1, 0, 1}, {"dilation_h"});
  expect_error_mentions({1, 1, 8, 8, 2, 0, 3}, {"filter height R"});
  expect_error_mentions({1, 4, 8, 8, 6, 3, 3, 0, 0, 1, 1, 1, 1, 4}, {"groups", "K=6"});
}

TEST(ConvolutionGeometry, PointwiseAndDepthwise) {
  EXPECT_TRUE((Conv2dGeometry{2, 8, 5, 5, 4, 1, 1}.pointwise()));
  EXPECT_TRUE(
      (Conv2dGeometry{2, 8, 5, 5, 4, 1, 1, 0, 0, 1, 1, 2, 2}.pointwise()));  // dilation moot
  EXPECT_FALSE((Conv2dGeometry{2, 8, 5, 5, 4, 1, 1, 1, 0}.pointwise()));
  EXPECT_FALSE((Conv2dGeometry{2, 8, 5, 5, 4, 1, 1, 0, 0, 1, 2}.pointwise()));
  EXPECT_FALSE((Conv2dGeometry{2, 8, 5, 5, 4, 3, 1}.pointwise()));
  EXPECT_TRUE((Conv2dGeometry{2, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8}.depthwise()));
  EXPECT_TRUE((Conv2dGeometry{2, 8, 5, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8}.depthwise()));
  EXPECT_FALSE((Conv2dGeometry{2, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4}.depthwise()));
  EXPECT_FALSE((Conv2dGeometry{64, 1, 28, 28, 20, 5, 5}.depthwise()));  // LeNet conv1: C = 1
}

TEST(ConvolutionGeometry, TensorShapeMismatchThrows) {
  Context ctx;
  const Conv2dGeometry g{2, 3, 6, 6, 4, 3, 3};
  Random random(41);
  const Tensor x = testing::random_tensor(random, g.x_shape());
  const Tensor w_wrong = testing::random_tensor(random, {4, 3, 3, 2});
  Tensor y(g.y_shape());
  try {
    conv2d_forward(ctx, g, x, w_wrong, nullptr, y);
    ADD_FAILURE() << "no error for a wrong filter shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 3, 3, 3]"), std::string::npos) << e.what();
  }
  Tensor dx({2, 3, 6, 5});
  EXPECT_THROW(conv2d_backward_data(ctx, g, y, testing::random_tensor(random, g.w_shape()), dx),
               Error);
}

}  // namespace
}  // namespace crema::kernels
