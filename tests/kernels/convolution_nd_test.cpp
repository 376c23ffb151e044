// N-d convolution on the CPU: the reference proved on its own (it equals the 2-D reference for
// rank 1 and 2, a 3-D convolution equals a sum of 2-D ones over the depth taps, the backward
// passes are adjoints), then the Tensor-level passes (fast path in f32, reference in f64) against
// it on the awkward geometries of convolution_nd_test_util.h, the workspace query, and the
// geometry's error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "tests/kernels/convolution_nd_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using conv_test::describe;
using conv_test::nd_geometries;
using crema::testing::error_of;
using testing::kNaN;
using testing::rel_error;

std::vector<double> random_doubles(Random& random, int64_t count) {
  std::vector<double> values(static_cast<size_t>(count));
  for (double& v : values) v = random.uniform(-1.0, 1.0);
  return values;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// A host tensor of `dtype` (f32 or f64) holding `values`.
Tensor tensor_of(const Shape& shape, const std::vector<double>& values, DType dtype = DType::f32) {
  if (dtype == DType::f32) {
    return Tensor::from_vector(shape, std::vector<float>(values.begin(), values.end()));
  }
  Tensor t(shape, DType::f64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

Tensor filled(const Shape& shape, double value, DType dtype = DType::f32) {
  return tensor_of(shape, std::vector<double>(size_t(shape_numel(shape)), value), dtype);
}

// ||out - ref|| / ||ref|| on the tensor's own precision.
double rel_error_of(const Tensor& out, const std::vector<double>& ref) {
  if (out.dtype() == DType::f32) return rel_error(out.to_vector(), ref);
  const double* v = out.data<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (v[i] - ref[i]) * (v[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::isnan(diff) ? diff : std::sqrt(diff / norm);
}

struct Data {
  std::vector<double> x, w, bias, dy;
};

Data random_data(const ConvNdGeometry& g, Random& random) {
  return {random_doubles(random, g.N * g.C * g.in_volume()),
          random_doubles(random, g.K * (g.C / g.groups) * g.kernel_volume()),
          random_doubles(random, g.K), random_doubles(random, g.N * g.K * g.out_volume())};
}

// ---------------------------------------------------------------------------------------------
// The reference, proved on its own.

// Rank 1 and 2 are the 2-D reference's sums (the 1-D one as H = R = 1), bit for bit.
TEST(ConvolutionNdRef, Rank1And2EqualThe2dReference) {
  Random random(3);
  for (const ConvNdGeometry& g : nd_geometries()) {
    if (g.rank == 3) continue;
    const Conv2dGeometry g2 = g.as_2d();
    ASSERT_EQ(g2.P() * g2.Q(), g.out_volume()) << describe(g);
    const Data d = random_data(g, random);
    std::vector<double> y(d.dy.size()), y2(d.dy.size()), dx(d.x.size()), dx2(d.x.size());
    std::vector<double> dw(d.w.size(), 0.5), dw2(d.w.size(), 0.5);
    ref::conv_nd_forward(g, d.x.data(), d.w.data(), d.bias.data(), y.data());
    ref::conv2d_forward(g2, d.x.data(), d.w.data(), d.bias.data(), y2.data());
    ref::conv_nd_backward_data(g, d.dy.data(), d.w.data(), dx.data());
    ref::conv2d_backward_data(g2, d.dy.data(), d.w.data(), dx2.data());
    ref::conv_nd_backward_filter(g, d.x.data(), d.dy.data(), dw.data());
    ref::conv2d_backward_filter(g2, d.x.data(), d.dy.data(), dw2.data());
    EXPECT_EQ(y, y2) << describe(g);
    EXPECT_EQ(dx, dx2) << describe(g);
    EXPECT_EQ(dw, dw2) << describe(g);
  }
}

// A 3-D convolution is, per output depth o and depth tap t, the 2-D convolution of the input's
// depth slice d = o*stride_d - pad_d + t*dilation_d with the filters' slice t, summed over t:
// an independent route through the 2-D reference that pins down the depth axis.
TEST(ConvolutionNdRef, ThreeDEqualsSumOf2dSlices) {
  Random random(5);
  for (const ConvNdGeometry& g : nd_geometries()) {
    if (g.rank != 3) continue;
    const Data d = random_data(g, random);
    std::vector<double> y(d.dy.size());
    ref::conv_nd_forward(g, d.x.data(), d.w.data(), d.bias.data(), y.data());

    Conv2dGeometry g2 = g.as_2d();  // the in-plane axes, one image at a time
    g2.N = 1;
    const int64_t Cg = g.C / g.groups, T = g.kernel[0], RS = g.kernel[1] * g.kernel[2];
    const int64_t HW = g.in[1] * g.in[2], PQ = g2.P() * g2.Q(), D = g.in[0], O = g.out(0);
    std::vector<double> expected(y.size()), image(g.C * HW), w_t(g.K * Cg * RS), y_t(g.K * PQ);
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t o = 0; o < O; ++o) {
        for (int64_t k = 0; k < g.K; ++k) {
          for (int64_t i = 0; i < PQ; ++i) expected[((n * g.K + k) * O + o) * PQ + i] = d.bias[k];
        }
        for (int64_t t = 0; t < T; ++t) {
          const int64_t depth = o * g.stride[0] - g.pad[0] + t * g.dilation[0];
          if (depth < 0 || depth >= D) continue;
          for (int64_t c = 0; c < g.C; ++c) {
            for (int64_t i = 0; i < HW; ++i)
              image[c * HW + i] = d.x[((n * g.C + c) * D + depth) * HW + i];
          }
          for (int64_t kc = 0; kc < g.K * Cg; ++kc) {
            for (int64_t i = 0; i < RS; ++i) w_t[kc * RS + i] = d.w[(kc * T + t) * RS + i];
          }
          ref::conv2d_forward<double>(g2, image.data(), w_t.data(), nullptr, y_t.data());
          for (int64_t k = 0; k < g.K; ++k) {
            for (int64_t i = 0; i < PQ; ++i) {
              expected[((n * g.K + k) * O + o) * PQ + i] += y_t[k * PQ + i];
            }
          }
        }
      }
    }
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-12) << describe(g);
  }
}

// <conv(x, w), dy> == <x, backward_data(dy, w)> == <w, backward_filter(x, dy)>.
TEST(ConvolutionNdRef, BackwardPassesAreAdjoints) {
  Random random(7);
  for (const ConvNdGeometry& g : nd_geometries()) {
    const Data d = random_data(g, random);
    std::vector<double> y(d.dy.size()), dx(d.x.size(), kNaN), dw(d.w.size(), 0.0);
    ref::conv_nd_forward<double>(g, d.x.data(), d.w.data(), nullptr, y.data());
    ref::conv_nd_backward_data(g, d.dy.data(), d.w.data(), dx.data());
    ref::conv_nd_backward_filter(g, d.x.data(), d.dy.data(), dw.data());
    const double forward = dot(y, d.dy);
    const double tolerance = 1e-12 * (1.0 + std::abs(forward)) * std::sqrt(double(y.size()));
    EXPECT_NEAR(dot(d.x, dx), forward, tolerance) << describe(g);
    EXPECT_NEAR(dot(d.w, dw), forward, tolerance) << describe(g);
  }
}

// ---------------------------------------------------------------------------------------------
// The Tensor level: f32 (rank 1 and 2 through the 2-D paths, rank 3 through vol2col + GEMM) and
// f64 (the reference) against the double reference. f32 within 1e-5 relative (sums of at most a
// few hundred products of values in [-1, 1]); f64 within 1e-12.

void check_passes(Context& ctx, const ConvNdGeometry& g, const Data& d, DType dtype,
                  double tolerance) {
  std::vector<double> y(d.dy.size()), dx(d.x.size()), dw(d.w.size(), 0.25), db(g.K, 0.25);
  ref::conv_nd_forward(g, d.x.data(), d.w.data(), d.bias.data(), y.data());
  ref::conv_nd_backward_data(g, d.dy.data(), d.w.data(), dx.data());
  ref::conv_nd_backward_filter(g, d.x.data(), d.dy.data(), dw.data());
  ref::channel_bias_gradient(g.N, g.K, g.out_volume(), d.dy.data(), db.data());

  const Tensor x = tensor_of(g.x_shape(), d.x, dtype), w = tensor_of(g.w_shape(), d.w, dtype);
  const Tensor bias = tensor_of({g.K}, d.bias, dtype), dy = tensor_of(g.y_shape(), d.dy, dtype);
  Tensor y_out = filled(g.y_shape(), kNaN, dtype), dx_out = filled(g.x_shape(), kNaN, dtype);
  Tensor dw_out = filled(g.w_shape(), 0.25, dtype), db_out = filled({g.K}, 0.25, dtype);
  conv_nd_forward(ctx, g, x, w, &bias, y_out);
  conv_nd_backward_data(ctx, g, dy, w, dx_out);
  conv_nd_backward_weights(ctx, g, x, dy, &dw_out, &db_out);
  const std::string what = describe(g) + (dtype == DType::f64 ? " f64" : " f32");
  EXPECT_LT(rel_error_of(y_out, y), tolerance) << "forward " << what;
  EXPECT_LT(rel_error_of(dx_out, dx), tolerance) << "backward data " << what;
  EXPECT_LT(rel_error_of(dw_out, dw), tolerance) << "backward filter " << what;
  EXPECT_LT(rel_error_of(db_out, db), tolerance) << "backward bias " << what;
}

TEST(ConvolutionNdCpu, AllPassesMatchReference) {
  Random random(11);
  for (const int threads : {1, 2}) {
    Context ctx(Device::cpu(), 1, threads);
    for (const ConvNdGeometry& g : nd_geometries()) {
      const Data d = random_data(g, random);
      check_passes(ctx, g, d, DType::f32, 1e-5);
      check_passes(ctx, g, d, DType::f64, 1e-12);
    }
  }
}

// Frozen weights: only db; and only dw.
TEST(ConvolutionNdCpu, EitherParameterGradientAlone) {
  Random random(13);
  Context ctx(Device::cpu());
  for (const ConvNdGeometry& g : {nd_geometries()[1], nd_geometries()[6]}) {
    const Data d = random_data(g, random);
    const Tensor x = tensor_of(g.x_shape(), d.x), dy = tensor_of(g.y_shape(), d.dy);
    std::vector<double> dw(d.w.size(), 0.0), db(g.K, 0.0);
    ref::conv_nd_backward_filter(g, d.x.data(), d.dy.data(), dw.data());
    ref::channel_bias_gradient(g.N, g.K, g.out_volume(), d.dy.data(), db.data());
    Tensor dw_out = filled(g.w_shape(), 0.0), db_out = filled({g.K}, 0.0);
    conv_nd_backward_weights(ctx, g, x, dy, nullptr, &db_out);
    conv_nd_backward_weights(ctx, g, x, dy, &dw_out, nullptr);
    EXPECT_LT(rel_error(dw_out.to_vector(), dw), 1e-5) << describe(g);
    EXPECT_LT(rel_error(db_out.to_vector(), db), 1e-5) << describe(g);
  }
}

// The memory plan's query on the CPU: rank 1 and 2 ask the 2-D query of their 2-D geometry,
// rank 3 takes vol2col's columns in f32 and nothing in f64 (the GPU's: convolution_nd_cuda_test).
TEST(ConvolutionNdCpu, WorkspaceBytesAreWhatThePassesTake) {
  const Device cpu = Device::cpu();
  for (const ConvNdGeometry& g : nd_geometries()) {
    SCOPED_TRACE(describe(g));
    for (const ConvPass pass :
         {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
      const size_t bytes =
          conv_nd_workspace_bytes(cpu, pass, g, DType::f32, Layout::nchw, {}, true, 2);
      if (g.rank < 3) {
        EXPECT_EQ(bytes, conv2d_workspace_bytes(cpu, pass, g.as_2d(), DType::f32, Layout::nchw, {},
                                                true, 2));
      } else {
        EXPECT_EQ(bytes, cpu::conv_nd_workspace(g) * sizeof(float));
        EXPECT_GT(bytes, 0u);
        EXPECT_EQ(conv_nd_workspace_bytes(cpu, pass, g, DType::f64, Layout::nchw, {}, true, 2), 0u);
      }
    }
  }
}

TEST(ConvolutionNdCpu, GeometryAndTensorErrorsNameTheProblem) {
  Context ctx(Device::cpu());
  ConvNdGeometry g{3, 1, 2, 4, {4, 5, 6}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1};
  const Tensor x = filled(g.x_shape(), 0.0), w = filled(g.w_shape(), 0.0);
  Tensor y = filled(g.y_shape(), 0.0);

  ConvNdGeometry big = g;
  big.kernel = {5, 3, 3};
  EXPECT_CONTAINS(error_of([&] { big.validate("conv1"); }),
                  "conv1: the 5x3x3 filter (spanning 5x3x3 with dilation 1x1x1) is larger than "
                  "the padded input 4x5x6 (input 4x5x6, padding 0x0x0)");
  ConvNdGeometry rank4 = g;
  rank4.rank = 4;
  EXPECT_CONTAINS(error_of([&] { rank4.validate("conv1"); }),
                  "conv1: 1, 2 or 3 spatial axes, got 4");
  ConvNdGeometry stride0 = g;
  stride0.stride[2] = 0;
  EXPECT_CONTAINS(error_of([&] { stride0.validate("conv1"); }),
                  "conv1: the stride along spatial axis 2 must be positive, got 0");
  ConvNdGeometry groups = g;
  groups.groups = 3;
  EXPECT_CONTAINS(error_of([&] { groups.validate("conv1"); }), "3 groups must divide both");

  const Tensor x4 = filled({1, 2, 20, 6}, 0.0);
  EXPECT_CONTAINS(error_of([&] { conv_nd_forward(ctx, g, x4, w, nullptr, y); }),
                  "conv_nd_forward: x is f32[1, 2, 20, 6]");
  EXPECT_CONTAINS(error_of([&] { conv_nd_backward_weights(ctx, g, x, y, nullptr, nullptr); }),
                  "conv_nd_backward_weights: neither dw nor db given");
}

}  // namespace
}  // namespace crema::kernels
