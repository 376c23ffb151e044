// N-d pooling on the CPU: the reference proved on its own (rank 1 and 2 equal the 2-D reference
// with the same argmax; a hand-computed 3-D case; average backward is the forward's adjoint, max
// backward the adjoint of the selection), then the Tensor-level passes (f32 fast path, f64
// reference) against it on awkward 1-D, 2-D and 3-D geometries, and the error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/pooling/pooling.h"
#include "kernels/pooling/pooling_nd.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/pooling_nd_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using pool_test::describe;
using pool_test::make_pool;
using pool_test::pool_geometries;
using testing::kNaN;

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

TEST(PoolingNdRef, Rank1And2EqualThe2dReference) {
  Random random(3);
  for (const PoolNdGeometry& g : pool_geometries()) {
    if (g.rank == 3) continue;
    const Pool2dGeometry g2 = g.as_2d();
    const std::vector<double> x = random_doubles(random, g.N * g.C * g.in_volume());
    const std::vector<double> dy = random_doubles(random, g.N * g.C * g.out_volume());
    for (const PoolMode mode : {PoolMode::max, PoolMode::average}) {
      std::vector<double> y(dy.size()), y2(dy.size()), a(dy.size()), a2(dy.size());
      std::vector<double> dx(x.size()), dx2(x.size());
      ref::pool_nd_forward(g, mode, x.data(), y.data(), a.data());
      ref::pool2d_forward(g2, mode, x.data(), y2.data(), a2.data());
      ref::pool_nd_backward(g, mode, dy.data(), a.data(), dx.data());
      ref::pool2d_backward(g2, mode, dy.data(), a2.data(), dx2.data());
      EXPECT_EQ(y, y2) << describe(g);
      if (mode == PoolMode::max) {
        EXPECT_EQ(a, a2) << describe(g);
      }
      EXPECT_EQ(dx, dx2) << describe(g);
    }
  }
}

// x[d, h, w] = 100d + 10h + w on a 2x3x3 volume, a 2x2x2 window with stride 1 and padding 1:
// output (1, 1, 1) covers d in [0, 2), h in [0, 2), w in [0, 2): max 111 at (1, 1, 1), average
// (0+1+10+11+100+101+110+111) / 8 = 55.5 either way; output (2, 3, 3) covers only x[1,2,2] = 122
// of its 8 window places: 122 / 8 with count_include_pad, 122 / 1 without.
TEST(PoolingNdRef, HandComputed3d) {
  PoolNdGeometry g{3, 1, 1, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {3, 4, 4}, true};
  std::vector<double> x(18);
  for (int d = 0; d < 2; ++d) {
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 3; ++w) x[(d * 3 + h) * 3 + w] = 100 * d + 10 * h + w;
    }
  }
  std::vector<double> y(48), argmax(48);
  ref::pool_nd_forward(g, PoolMode::max, x.data(), y.data(), argmax.data());
  const int center = (1 * 4 + 1) * 4 + 1;
  EXPECT_EQ(y[center], 111);
  EXPECT_EQ(argmax[center], (1 * 3 + 1) * 3 + 1);
  ref::pool_nd_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y[center], 55.5);
  EXPECT_EQ(y[(2 * 4 + 3) * 4 + 3], 122.0 / 8);
  g.count_include_pad = false;
  ref::pool_nd_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y[(2 * 4 + 3) * 4 + 3], 122.0);
  EXPECT_EQ(y[center], 55.5);
}

// Average pooling is linear and its backward the adjoint; max backward is the adjoint of the
// selection the argmax records: <y, dy> == <x, dx> for both.
TEST(PoolingNdRef, BackwardIsTheAdjoint) {
  Random random(5);
  for (const PoolNdGeometry& g : pool_geometries()) {
    const std::vector<double> x = random_doubles(random, g.N * g.C * g.in_volume());
    const std::vector<double> dy = random_doubles(random, g.N * g.C * g.out_volume());
    for (const PoolMode mode : {PoolMode::max, PoolMode::average}) {
      std::vector<double> y(dy.size()), argmax(dy.size()), dx(x.size(), kNaN);
      ref::pool_nd_forward(g, mode, x.data(), y.data(), argmax.data());
      ref::pool_nd_backward(g, mode, dy.data(), argmax.data(), dx.data());
      EXPECT_NEAR(dot(y, dy), dot(x, dx), 1e-12 * (1 + std::abs(dot(y, dy)))) << describe(g);
    }
  }
}

// A host tensor of `dtype` holding `values`, and its values back as doubles.
Tensor tensor_of(const Shape& shape, const std::vector<double>& values, DType dtype) {
  if (dtype == DType::f32) {
    return Tensor::from_vector(shape, std::vector<float>(values.begin(), values.end()));
  }
  Tensor t(shape, DType::f64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}
std::vector<double> values_of(const Tensor& t) {
  if (t.dtype() == DType::f64) return {t.data<double>(), t.data<double>() + t.numel()};
  return testing::to_double(t);
}

// f32 results within 1e-6 relative of the double reference (a window's sum of at most a few dozen
// values, one rounding per addition), argmax exactly; f64 bit for bit (the same loops).
TEST(PoolingNdCpu, TensorLevelMatchesReference) {
  Random random(7);
  for (const int threads : {1, 2}) {
    Context ctx(Device::cpu(), 1, threads);
    for (const PoolNdGeometry& g : pool_geometries()) {
      const std::vector<double> x = random_doubles(random, g.N * g.C * g.in_volume());
      const std::vector<double> dy = random_doubles(random, g.N * g.C * g.out_volume());
      for (const PoolMode mode : {PoolMode::max, PoolMode::average}) {
        std::vector<double> y(dy.size()), argmax(dy.size()), dx(x.size());
        ref::pool_nd_forward(g, mode, x.data(), y.data(), argmax.data());
        ref::pool_nd_backward(g, mode, dy.data(), argmax.data(), dx.data());
        for (const DType dtype : {DType::f32, DType::f64}) {
          SCOPED_TRACE(describe(g) + (mode == PoolMode::max ? " max " : " average ") +
                       (dtype == DType::f32 ? "f32" : "f64"));
          const double tolerance = dtype == DType::f32 ? 1e-6 : 0.0;
          const Tensor xt = tensor_of(g.x_shape(), x, dtype),
                       dyt = tensor_of(g.y_shape(), dy, dtype);
          Tensor yt = tensor_of(g.y_shape(), std::vector<double>(y.size(), kNaN), dtype);
          Tensor at = tensor_of(g.y_shape(), std::vector<double>(y.size(), kNaN), dtype);
          Tensor dxt = tensor_of(g.x_shape(), std::vector<double>(x.size(), kNaN), dtype);
          Tensor* argmax_t = mode == PoolMode::max ? &at : nullptr;
          pool_nd_forward(ctx, g, mode, xt, yt, argmax_t);
          pool_nd_backward(ctx, g, mode, dyt, argmax_t, dxt);
          const std::vector<double> y_out = values_of(yt), dx_out = values_of(dxt);
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_NEAR(y_out[i], y[i], tolerance * (1 + std::abs(y[i]))) << "y " << i;
          }
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_NEAR(dx_out[i], dx[i], tolerance * (1 + std::abs(dx[i]))) << "dx " << i;
          }
          if (mode == PoolMode::max) {
            EXPECT_EQ(values_of(at), argmax);
          }
        }
      }
    }
  }
}

// A net in nhwc labels every blob nhwc; only a 4-D tensor has a second memory order, so 1-D and
// 3-D pooling give the same bits whatever their tensors' label (rank 1 runs the 2-D calls on an
// nchw view).
TEST(PoolingNdCpu, OtherRanksIgnoreTheLayoutLabel) {
  Context ctx;
  Random random(9);
  for (const PoolNdGeometry& g : pool_geometries()) {
    if (g.rank == 2) continue;
    SCOPED_TRACE(describe(g));
    const std::vector<double> x = random_doubles(random, g.N * g.C * g.in_volume());
    const std::vector<double> dy = random_doubles(random, g.N * g.C * g.out_volume());
    std::vector<std::vector<double>> results[2];
    for (const Layout label : {Layout::nchw, Layout::nhwc}) {
      Tensor xt = tensor_of(g.x_shape(), x, DType::f32),
             dyt = tensor_of(g.y_shape(), dy, DType::f32);
      Tensor yt = tensor_of(g.y_shape(), std::vector<double>(dy.size(), kNaN), DType::f32);
      Tensor at = tensor_of(g.y_shape(), std::vector<double>(dy.size(), kNaN), DType::f32);
      Tensor dxt = tensor_of(g.x_shape(), std::vector<double>(x.size(), kNaN), DType::f32);
      for (Tensor* t : {&xt, &dyt, &yt, &at, &dxt}) t->set_layout(label);
      pool_nd_forward(ctx, g, PoolMode::max, xt, yt, &at);
      pool_nd_backward(ctx, g, PoolMode::max, dyt, &at, dxt);
      results[label == Layout::nhwc ? 1 : 0] = {values_of(yt), values_of(at), values_of(dxt)};
    }
    EXPECT_EQ(results[1], results[0]);
  }
}

TEST(PoolingNdCpu, ErrorsNameTheGeometry) {
  Context ctx(Device::cpu());
  PoolNdGeometry g = make_pool(3, 1, 1, {4, 4, 4}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false, true);
  const Tensor x = tensor_of(g.x_shape(), std::vector<double>(64, 0.0), DType::f32);
  Tensor y = tensor_of(g.y_shape(), std::vector<double>(8, 0.0), DType::f32);
  PoolNdGeometry padded = g;
  padded.pad = {0, 2, 0};
  EXPECT_CONTAINS(error_of([&] { pool_nd_forward(ctx, padded, PoolMode::average, x, y, nullptr); }),
                  "pool_nd_forward: padding must be smaller than the kernel (input 4x4x4, kernel "
                  "2x2x2, stride 2x2x2, pad 0x2x0, output 2x2x2)");
  PoolNdGeometry last = g;
  last.out = {3, 2, 2};
  EXPECT_CONTAINS(error_of([&] { pool_nd_forward(ctx, last, PoolMode::average, x, y, nullptr); }),
                  "the last window lies entirely in the padding");
  const Tensor x4 = tensor_of({1, 1, 16, 4}, std::vector<double>(64, 0.0), DType::f32);
  EXPECT_CONTAINS(error_of([&] { pool_nd_forward(ctx, g, PoolMode::average, x4, y, nullptr); }),
                  "pool_nd_forward: x is f32[1, 1, 16, 4]");
  Tensor dx = x.clone();
  EXPECT_CONTAINS(error_of([&] { pool_nd_backward(ctx, g, PoolMode::max, y, nullptr, dx); }),
                  "max pooling needs the forward's argmax");
}

}  // namespace
}  // namespace crema::kernels
