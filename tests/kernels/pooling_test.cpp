// Pooling: the reference against hand-computed windows (padding, partial ceil-mode windows, ties,
// NaN), its backward against central differences in double, and the CPU path against
// ref<double> on awkward geometries, argmax included, with poisoned outputs.
#include "kernels/pooling/pooling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_test_util.h"
#include "tests/kernels/pooling_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::kNaN;

using testing::describe;
using testing::geometry;

TEST(Pool2dOutputExtent, FloorCeilAndTheLastWindowRule) {
  EXPECT_EQ(pool2d_output_extent(24, 2, 2, 0, false), 12);
  EXPECT_EQ(pool2d_output_extent(5, 2, 2, 0, false), 2);
  EXPECT_EQ(pool2d_output_extent(5, 2, 2, 0, true), 3);  // last window [4, 6) is partial
  EXPECT_EQ(pool2d_output_extent(6, 3, 2, 1, false), 3);
  EXPECT_EQ(pool2d_output_extent(6, 3, 2, 1, true), 4);
  // ceil gives 3, but the third window would start at 2*3 - 1 = 5 = in: dropped (Caffe, PyTorch).
  EXPECT_EQ(pool2d_output_extent(5, 2, 3, 1, true), 2);
  EXPECT_THROW(pool2d_output_extent(5, 2, 2, 2, false), Error);  // pad >= kernel
  EXPECT_THROW(pool2d_output_extent(1, 4, 1, 1, false), Error);  // no window fits
}

TEST(Pool2dRef, MaxWithPaddingByHand) {
  // x [1,1,3,3]; kernel 2, stride 2, pad 1 -> 2x2 windows: rows {0}, {1,2}; columns likewise.
  const std::vector<double> x = {4, 9, 2,  //
                                 3, 5, 7,  //
                                 8, 1, 6};
  const Pool2dGeometry g = geometry(1, 1, 3, 3, 2, 2, 1, false);
  ASSERT_EQ(g.P, 2);
  std::vector<double> y(4, kNaN), argmax(4, kNaN);
  ref::pool2d_forward(g, PoolMode::max, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, (std::vector<double>{4, 9, 8, 7}));
  EXPECT_EQ(argmax, (std::vector<double>{0, 1, 6, 5}));
}

TEST(Pool2dRef, AverageCountsPaddingButNotBeyondIt) {
  const std::vector<double> x = {4, 9, 2,  //
                                 3, 5, 7,  //
                                 8, 1, 6};
  // Every window is 2x2 within the padded input, so each divides by 4.
  const Pool2dGeometry g = geometry(1, 1, 3, 3, 2, 2, 1, false);
  std::vector<double> y(4, kNaN);
  ref::pool2d_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{4 / 4.0, (9 + 2) / 4.0, (3 + 8) / 4.0, (5 + 7 + 1 + 6) / 4.0}));
}

TEST(Pool2dRef, AverageWithoutPaddingCountsOnlyTheInput) {
  const std::vector<double> x = {4, 9, 2,  //
                                 3, 5, 7,  //
                                 8, 1, 6};
  // count_include_pad false: each window divides by the elements it covers (1, 2, 2, 4).
  Pool2dGeometry g = geometry(1, 1, 3, 3, 2, 2, 1, false);
  g.count_include_pad = false;
  std::vector<double> y(4, kNaN);
  ref::pool2d_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{4, (9 + 2) / 2.0, (3 + 8) / 2.0, (5 + 7 + 1 + 6) / 4.0}));
  const std::vector<double> dy = {1, 2, 3, 4};
  std::vector<double> dx(9, kNaN);
  ref::pool2d_backward<double>(g, PoolMode::average, dy.data(), nullptr, dx.data());
  EXPECT_EQ(dx, (std::vector<double>{1, 1, 1, 1.5, 1, 1, 1.5, 1, 1}));
}

TEST(Pool2dRef, PartialCeilModeWindow) {
  // One row of 5, kernel 1x2, stride 1x2, ceil mode: the last window covers only element 4 and,
  // with no padding, averages over that one element.
  const std::vector<double> x = {3, -1, 2, 7, -5};
  const Pool2dGeometry g = {1, 1, 1, 5, 1, 2,
                            1, 2, 0, 0, 1, pool2d_output_extent(5, 2, 2, 0, true)};
  ASSERT_EQ(g.Q, 3);
  std::vector<double> y(3, kNaN), argmax(3, kNaN);
  ref::pool2d_forward(g, PoolMode::max, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, (std::vector<double>{3, 7, -5}));
  EXPECT_EQ(argmax, (std::vector<double>{0, 3, 4}));
  ref::pool2d_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{1, 4.5, -5}));
}

TEST(Pool2dRef, TiesPickTheFirstInRowMajorOrderAndNaNWins) {
  // Window [[1, 5], [5, 2]]: 5 appears at (0,1) and (1,0); row-major order picks (0,1) = 1.
  const std::vector<float> x = {1, 5, 5, 2};
  const Pool2dGeometry g = geometry(1, 1, 2, 2, 2, 2, 0, false);
  std::vector<float> y(1), argmax(1);
  ref::pool2d_forward(g, PoolMode::max, x.data(), y.data(), argmax.data());
  EXPECT_EQ(argmax[0], 1.0f);
  // Window [[1, 1, 7], [7, 0, 0]]: row-major order reaches (0,2) before (1,0). (Taking column
  // maxima first and then the leftmost column would pick (1,0) = 3.)
  const std::vector<float> x2 = {1, 1, 7, 7, 0, 0};
  const Pool2dGeometry g2 = {1, 1, 2, 3, 2, 3, 1, 1, 0, 0, 1, 1};
  ref::pool2d_forward(g2, PoolMode::max, x2.data(), y.data(), argmax.data());
  EXPECT_EQ(argmax[0], 2.0f);
  const std::vector<float> with_nan = {1, 9, kNaN, 2};
  ref::pool2d_forward(g, PoolMode::max, with_nan.data(), y.data(), argmax.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(argmax[0], 2.0f);
}

// L(x) = sum(dy * pool(x)); the reference backward must be its gradient.
void check_gradient(const Pool2dGeometry& g, PoolMode mode, uint64_t seed) {
  SCOPED_TRACE(describe(g) + (g.count_include_pad ? "" : " excluding padding"));
  Random rng(seed);
  const int64_t nx = g.N * g.C * g.H * g.W, ny = g.N * g.C * g.P * g.Q;
  std::vector<double> x = testing::to_double(testing::random_values(rng, nx, -2, 2));
  const std::vector<double> dy = testing::to_double(testing::random_values(rng, ny));
  std::vector<double> y(static_cast<size_t>(ny)), argmax(static_cast<size_t>(ny)),
      dx(size_t(nx), kNaN);
  ref::pool2d_forward(g, mode, x.data(), y.data(), argmax.data());
  ref::pool2d_backward(g, mode, dy.data(), argmax.data(), dx.data());
  auto loss = [&] {
    std::vector<double> out(static_cast<size_t>(ny));
    ref::pool2d_forward<double>(g, mode, x.data(), out.data(), nullptr);
    double l = 0;
    for (int64_t i = 0; i < ny; ++i) l += dy[i] * out[i];
    return l;
  };
  const double eps = 1e-6;
  for (int64_t i = 0; i < nx; ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double plus = loss();
    x[i] = saved - eps;
    const double minus = loss();
    x[i] = saved;
    EXPECT_NEAR(dx[i], (plus - minus) / (2 * eps), 1e-7) << describe(g) << " element " << i;
  }
}

TEST(Pool2dRef, BackwardMatchesFiniteDifferences) {
  for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
    check_gradient(geometry(2, 2, 5, 5, 3, 2, 1, false), mode, 1);  // overlapping, padded
    check_gradient(geometry(1, 1, 5, 6, 2, 2, 0, true), mode, 2);   // partial ceil windows
    check_gradient(geometry(1, 2, 7, 5, 3, 2, 1, true), mode, 3);
  }
  Pool2dGeometry exclude = geometry(1, 2, 7, 5, 3, 2, 1, true);
  exclude.count_include_pad = false;
  check_gradient(exclude, PoolMode::average, 4);
}

void check_cpu(const Pool2dGeometry& g, PoolMode mode, int threads, uint64_t seed) {
  SCOPED_TRACE(describe(g) + (mode == PoolMode::max ? " max" : " average") +
               (g.count_include_pad ? "" : " excluding padding") +
               " threads=" + std::to_string(threads));
  Context ctx(Device::cpu(), 1, threads);
  Random rng(seed);
  const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
  const Tensor x = testing::random_tensor(rng, xs);
  const Tensor dy = testing::random_tensor(rng, ys);
  Tensor y = testing::poisoned(ys), argmax = testing::poisoned(ys), dx = testing::poisoned(xs);
  const bool max = mode == PoolMode::max;
  pool2d_forward(ctx, g, mode, x, y, max ? &argmax : nullptr);
  pool2d_backward(ctx, g, mode, dy, max ? &argmax : nullptr, dx);

  const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
  std::vector<double> y_ref(static_cast<size_t>(shape_numel(ys))), argmax_ref(y_ref.size());
  std::vector<double> dx_ref(static_cast<size_t>(shape_numel(xs)));
  ref::pool2d_forward(g, mode, xd.data(), y_ref.data(), argmax_ref.data());
  ref::pool2d_backward(g, mode, dyd.data(), argmax_ref.data(), dx_ref.data());
  EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-6);
  EXPECT_LT(testing::rel_error(dx.to_vector(), dx_ref), 1e-6);
  if (max) {
    EXPECT_EQ(testing::to_double(argmax), argmax_ref);
  }
}

TEST(Pool2dCpu, MatchesReferenceOnAwkwardGeometries) {
  const std::vector<Pool2dGeometry> cases = {
      geometry(1, 1, 1, 1, 1, 1, 0, false),    // a single element
      geometry(1, 3, 24, 24, 2, 2, 0, false),  // LeNet
      geometry(2, 3, 7, 9, 2, 2, 0, true),     // odd sizes, partial last windows
      geometry(1, 2, 13, 11, 3, 2, 0, true),   // overlapping windows (AlexNet's 3/2), ceil
      geometry(3, 2, 9, 8, 3, 2, 1, false),    // stride 2 with padding
      geometry(2, 1, 10, 7, 3, 3, 2, true),    // padding 2, stride = kernel
      geometry(1, 1, 6, 17, 5, 1, 2, false),   // stride 1, heavy overlap
      geometry(1, 2, 11, 13, 2, 3, 1, true),   // stride > kernel: gaps between windows
      geometry(2, 1, 2, 2, 3, 2, 1, true),     // every window clipped: no interior columns
      geometry(3, 8, 37, 37, 3, 2, 1, true),   // large enough for the threaded path
  };
  uint64_t seed = 10;
  for (const Pool2dGeometry& g : cases) {
    for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
      for (int threads : {1, 2}) check_cpu(g, mode, threads, ++seed);
    }
    Pool2dGeometry exclude = g;  // average over the input only
    exclude.count_include_pad = false;
    check_cpu(exclude, PoolMode::average, 2, ++seed);
  }
  // A rectangular window with different strides and pads per axis.
  const Pool2dGeometry rect = {2,
                               3,
                               11,
                               8,
                               3,
                               2,
                               2,
                               1,
                               1,
                               0,
                               pool2d_output_extent(11, 3, 2, 1, true),
                               pool2d_output_extent(8, 2, 1, 0, true)};
  check_cpu(rect, PoolMode::max, 2, 100);
  check_cpu(rect, PoolMode::average, 2, 101);
}

TEST(Pool2dCpu, TiesAndNaNPickTheSameElementAsTheReference) {
  // Values from {0, 1, 2} make ties in almost every window; a few NaN must propagate.
  const Pool2dGeometry g = geometry(2, 3, 9, 10, 3, 2, 1, true);
  Random rng(5);
  std::vector<float> values(static_cast<size_t>(g.N * g.C * g.H * g.W));
  for (float& v : values) v = float(rng.below(3));
  values[17] = values[200] = kNaN;
  const Tensor x = Tensor::from_vector({g.N, g.C, g.H, g.W}, values);
  Tensor y = testing::poisoned({g.N, g.C, g.P, g.Q}), argmax = testing::poisoned(y.shape());
  Context ctx(Device::cpu(), 1, 2);
  pool2d_forward(ctx, g, PoolMode::max, x, y, &argmax);
  std::vector<float> y_ref(static_cast<size_t>(y.numel())), argmax_ref(y_ref.size());
  ref::pool2d_forward(g, PoolMode::max, values.data(), y_ref.data(), argmax_ref.data());
  EXPECT_EQ(argmax.to_vector(), argmax_ref);
  const std::vector<float> out = y.to_vector();
  EXPECT_GT(testing::count_nan(out), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i] == y_ref[i] || (std::isnan(out[i]) && std::isnan(y_ref[i]))) << i;
  }
}

// The nhwc dispatch (the reference in channels-last, f32 and f64) gives, at every logical
// position, the bits of the nchw reference: the same comparisons and sums in the same order.
template <class T>
void check_nhwc(const Pool2dGeometry& g, PoolMode mode, uint64_t seed) {
  Context ctx;
  Random rng(seed);
  const bool max = mode == PoolMode::max;
  const DType dtype = dtype_of<T>();
  const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
  auto random = [&](const Shape& shape) {
    Tensor t(shape, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = T(rng.uniform(-1.0, 1.0));
    return t;
  };
  const Tensor x = random(xs), dy = random(ys);
  Tensor y(ys, dtype), argmax(ys, dtype), dx(xs, dtype);
  ref::pool2d_forward(g, mode, x.data<T>(), y.data<T>(), max ? argmax.data<T>() : nullptr);
  ref::pool2d_backward(g, mode, dy.data<T>(), max ? argmax.data<T>() : nullptr, dx.data<T>());
  auto nhwc = [&](const Shape& shape) {
    Tensor t(shape, dtype);
    t.set_layout(Layout::nhwc);
    t.fill(kNaN);
    return t;
  };
  Tensor y2 = nhwc(ys), argmax2 = nhwc(ys), dx2 = nhwc(xs);
  pool2d_forward(ctx, g, mode, testing::in_layout(x, Layout::nhwc), y2, max ? &argmax2 : nullptr);
  pool2d_backward(ctx, g, mode, testing::in_layout(dy, Layout::nhwc), max ? &argmax2 : nullptr,
                  dx2);
  EXPECT_EQ(testing::in_layout(y2, Layout::nchw).to_vector(), y.to_vector());
  if (max) EXPECT_EQ(testing::in_layout(argmax2, Layout::nchw).to_vector(), argmax.to_vector());
  EXPECT_EQ(testing::in_layout(dx2, Layout::nchw).to_vector(), dx.to_vector());
}

TEST(Pool2d, NhwcMatchesNchwBitForBit) {
  uint64_t seed = 200;
  for (Pool2dGeometry g : testing::nhwc_geometries()) {
    for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
      SCOPED_TRACE(describe(g) + (mode == PoolMode::max ? " max" : " average"));
      check_nhwc<float>(g, mode, ++seed);
      check_nhwc<double>(g, mode, ++seed);
    }
    g.count_include_pad = false;
    check_nhwc<float>(g, PoolMode::average, ++seed);
  }
}

TEST(Pool2d, NhwcTensorsMustAgree) {
  Context ctx;
  const Pool2dGeometry g = geometry(1, 2, 4, 4, 2, 2, 0, false);
  Tensor x({1, 2, 4, 4}), y({1, 2, 2, 2}), argmax({1, 2, 2, 2});
  x.fill(1.0f);
  x.set_layout(Layout::nhwc);
  y.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(
      crema::testing::error_of([&] { pool2d_forward(ctx, g, PoolMode::max, x, y, &argmax); }),
      "pool2d_forward: argmax is f32[1, 2, 2, 2] on cpu, expected nhwc");
  Tensor dx({1, 2, 4, 4});
  EXPECT_CONTAINS(
      crema::testing::error_of([&] { pool2d_backward(ctx, g, PoolMode::average, y, nullptr, dx); }),
      "pool2d_backward: dx is f32[1, 2, 4, 4] on cpu, expected nhwc");
}

TEST(Pool2d, RejectsWrongTensorsAndGeometry) {
  Context ctx;
  const Pool2dGeometry g = geometry(1, 2, 6, 6, 2, 2, 0, false);
  Tensor x({1, 2, 6, 6}), y({1, 2, 3, 3}), argmax({1, 2, 3, 3}), dx({1, 2, 6, 6});
  x.fill(1.0f);
  Tensor wrong({1, 2, 3, 4});
  EXPECT_THROW(pool2d_forward(ctx, g, PoolMode::max, x, wrong, &argmax), Error);
  EXPECT_THROW(pool2d_forward(ctx, g, PoolMode::max, x, y, &wrong), Error);
  EXPECT_THROW(pool2d_forward(ctx, g, PoolMode::average, x, y, &argmax), Error);
  EXPECT_THROW(pool2d_backward(ctx, g, PoolMode::max, y, nullptr, dx), Error);
  Tensor doubles({1, 2, 6, 6}, DType::f64);
  EXPECT_THROW(pool2d_forward(ctx, g, PoolMode::average, doubles, y, nullptr), Error);
  Pool2dGeometry too_many = g;
  too_many.P = 4;  // the fourth window would start at 6 = H
  Tensor y4({1, 2, 4, 3});
  EXPECT_THROW(pool2d_forward(ctx, too_many, PoolMode::average, x, y4, nullptr), Error);
  Pool2dGeometry big_pad = g;
  big_pad.pad_h = 2;
  EXPECT_THROW(pool2d_forward(ctx, big_pad, PoolMode::average, x, y, nullptr), Error);
  try {
    pool2d_forward(ctx, g, PoolMode::max, x, wrong, &argmax);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[1, 2, 3, 4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
