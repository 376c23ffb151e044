// Adaptive pooling on the CPU: the window formula by hand, PyTorch's adaptive_avg_pool2d and
// adaptive_max_pool2d (tests/fixtures/zoo_layer_fixtures.safetensors) for ref<double> and the
// float32 path, the float32 path bit for bit against ref<float> on awkward sizes (threaded too),
// the divisible case equal to pool2d's fixed windows (what layers/pooling.cpp relies on), ties and
// NaN, and the dispatch's errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/pooling/adaptive_pooling.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

// A float64 host tensor holding `values`.
Tensor f64_tensor(const Shape& shape, const std::vector<double>& values) {
  Tensor t(shape, DType::f64);
  std::memcpy(t.data<double>(), values.data(), values.size() * sizeof(double));
  return t;
}

std::string describe(const AdaptivePool2dGeometry& g) {
  return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " " + std::to_string(g.H) +
         "x" + std::to_string(g.W) + " -> " + std::to_string(g.P) + "x" + std::to_string(g.Q);
}

TEST(AdaptivePooling, WindowsAsPyTorch) {
  // 7 rows to 3: [0, 3), [2, 5), [4, 7); 3 rows to 5: [0, 1), [0, 2), [1, 2), [1, 3), [2, 3).
  const std::vector<std::pair<int64_t, int64_t>> seven_to_three = {{0, 3}, {2, 5}, {4, 7}};
  for (int64_t p = 0; p < 3; ++p) {
    EXPECT_EQ(adaptive_start(p, 7, 3), seven_to_three[size_t(p)].first);
    EXPECT_EQ(adaptive_end(p, 7, 3), seven_to_three[size_t(p)].second);
  }
  const std::vector<std::pair<int64_t, int64_t>> three_to_five = {
      {0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}};
  for (int64_t p = 0; p < 5; ++p) {
    EXPECT_EQ(adaptive_start(p, 3, 5), three_to_five[size_t(p)].first);
    EXPECT_EQ(adaptive_end(p, 3, 5), three_to_five[size_t(p)].second);
  }
}

TEST(AdaptivePooling, HandComputed) {
  // One 3x3 plane to 2x2: windows rows [0, 2), [1, 3), columns likewise.
  const AdaptivePool2dGeometry g{1, 1, 3, 3, 2, 2};
  const std::vector<double> x = {1, 2, 3, 4, 9, 6, 7, 8, 5};
  std::vector<double> y(4), argmax(4), dx(9);
  ref::adaptive_pool2d_forward<double>(g, PoolMode::average, x.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{4, 5, 7, 7}));
  ref::adaptive_pool2d_forward(g, PoolMode::max, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, (std::vector<double>{9, 9, 9, 9}));
  EXPECT_EQ(argmax, (std::vector<double>{4, 4, 4, 4}));
  const std::vector<double> dy = {1, 2, 3, 4};
  ref::adaptive_pool2d_backward(g, PoolMode::max, dy.data(), argmax.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
  ref::adaptive_pool2d_backward<double>(g, PoolMode::average, dy.data(), nullptr, dx.data());
  // The centre is in all four windows: (1 + 2 + 3 + 4) / 4.
  EXPECT_EQ(dx, (std::vector<double>{0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}));
}

// PyTorch's values (float64 from float32 inputs): exact to 1e-12 for ref<double>, within float32
// rounding (1e-6 relative to the largest value) for the float32 path.
TEST(AdaptivePooling, MatchesPyTorch) {
  const crema::testing::SafetensorsFixture f("zoo_layer_fixtures.safetensors");
  int cases = 0;
  for (const char* mode_name : {"avg", "max"}) {
    for (const char* sizes : {"7x5_to_3x4", "3x6_to_5x3", "6x6_to_3x2", "5x7_to_1x1"}) {
      const std::string name = std::string(mode_name) + "_" + sizes;
      SCOPED_TRACE(name);
      const PoolMode mode = std::string(mode_name) == "max" ? PoolMode::max : PoolMode::average;
      const Shape& xs = f.shape(name + ".x");
      const std::vector<double> size = f.doubles(name + ".size");
      const AdaptivePool2dGeometry g{xs[0],           xs[1], xs[2], xs[3], int64_t(size[0]),
                                     int64_t(size[1])};
      const Shape ys = {g.N, g.C, g.P, g.Q};
      const std::vector<double> want_y = f.doubles(name + ".y"), want_dx = f.doubles(name + ".dx");
      const bool max = mode == PoolMode::max;

      Context ctx(Device::cpu(), 1, 1);
      const Tensor x = f64_tensor(xs, f.doubles(name + ".x"));
      const Tensor dy = f64_tensor(ys, f.doubles(name + ".dy"));
      Tensor y(ys, DType::f64), argmax(ys, DType::f64), dx(xs, DType::f64);
      adaptive_pool2d_forward(ctx, g, mode, x, y, max ? &argmax : nullptr);
      adaptive_pool2d_backward(ctx, g, mode, dy, max ? &argmax : nullptr, dx);
      for (size_t i = 0; i < want_y.size(); ++i) EXPECT_NEAR(y.data<double>()[i], want_y[i], 1e-12);
      for (size_t i = 0; i < want_dx.size(); ++i) {
        EXPECT_NEAR(dx.data<double>()[i], want_dx[i], 1e-12);
      }

      Tensor y32(ys), argmax32(ys), dx32(xs);
      adaptive_pool2d_forward(ctx, g, mode, f.input(name + ".x"), y32, max ? &argmax32 : nullptr);
      adaptive_pool2d_backward(ctx, g, mode, f.input(name + ".dy"), max ? &argmax32 : nullptr,
                               dx32);
      EXPECT_LT(testing::rel_error(y32.to_vector(), want_y), 1e-6);
      EXPECT_LT(testing::rel_error(dx32.to_vector(), want_dx), 1e-6);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 8);
}

// The float32 path (threaded or not) is the reference's loop per plane: the same bits.
TEST(AdaptivePooling, CpuMatchesReferenceBitForBit) {
  const std::vector<AdaptivePool2dGeometry> geometries = {
      {1, 1, 1, 1, 1, 1}, {1, 3, 7, 5, 3, 4},   {2, 5, 3, 6, 5, 3},    {3, 7, 13, 11, 7, 7},
      {2, 3, 9, 9, 4, 2}, {1, 2, 5, 5, 10, 10}, {4, 37, 31, 29, 6, 6}, {2, 64, 17, 17, 1, 1}};
  for (const AdaptivePool2dGeometry& g : geometries) {
    SCOPED_TRACE(describe(g));
    Random rng(uint64_t(g.C * 131 + g.H));
    const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
    const Tensor x = testing::random_tensor(rng, xs), dy = testing::random_tensor(rng, ys);
    for (PoolMode mode : {PoolMode::average, PoolMode::max}) {
      const bool max = mode == PoolMode::max;
      std::vector<float> y_ref(size_t(shape_numel(ys))), argmax_ref(y_ref.size());
      std::vector<float> dx_ref(size_t(shape_numel(xs)));
      ref::adaptive_pool2d_forward(g, mode, x.data<float>(), y_ref.data(), argmax_ref.data());
      ref::adaptive_pool2d_backward(g, mode, dy.data<float>(), argmax_ref.data(), dx_ref.data());
      for (int threads : {1, 3}) {
        Context ctx(Device::cpu(), 1, threads);
        Tensor y = testing::poisoned(ys), argmax = testing::poisoned(ys),
               dx = testing::poisoned(xs);
        adaptive_pool2d_forward(ctx, g, mode, x, y, max ? &argmax : nullptr);
        adaptive_pool2d_backward(ctx, g, mode, dy, max ? &argmax : nullptr, dx);
        EXPECT_EQ(y.to_vector(), y_ref);
        EXPECT_EQ(dx.to_vector(), dx_ref);
        if (max) {
          EXPECT_EQ(argmax.to_vector(), argmax_ref);
        }
      }
    }
  }
}

// Where P divides H and Q divides W, the adaptive windows are pool2d's with kernel = stride =
// H / P: the same values and gradients, bit for bit (layers/pooling.cpp runs pool2d there).
TEST(AdaptivePooling, DivisibleSizesArePool2dFixedWindows) {
  for (const auto& [H, W, P, Q] : std::vector<std::array<int64_t, 4>>{
           {6, 6, 3, 2}, {7, 7, 7, 7}, {7, 5, 1, 1}, {12, 8, 4, 2}}) {
    const AdaptivePool2dGeometry a{2, 3, H, W, P, Q};
    SCOPED_TRACE(describe(a));
    Pool2dGeometry g{2, 3, H, W, H / P, W / Q, H / P, W / Q, 0, 0, P, Q};
    Random rng(uint64_t(H * W));
    const Shape xs = {2, 3, H, W}, ys = {2, 3, P, Q};
    const Tensor x = testing::random_tensor(rng, xs), dy = testing::random_tensor(rng, ys);
    Context ctx(Device::cpu(), 1, 1);
    for (PoolMode mode : {PoolMode::average, PoolMode::max}) {
      const bool max = mode == PoolMode::max;
      Tensor y1(ys), y2(ys), a1(ys), a2(ys), dx1(xs), dx2(xs);
      adaptive_pool2d_forward(ctx, a, mode, x, y1, max ? &a1 : nullptr);
      adaptive_pool2d_backward(ctx, a, mode, dy, max ? &a1 : nullptr, dx1);
      pool2d_forward(ctx, g, mode, x, y2, max ? &a2 : nullptr);
      pool2d_backward(ctx, g, mode, dy, max ? &a2 : nullptr, dx2);
      EXPECT_EQ(y1.to_vector(), y2.to_vector());
      EXPECT_EQ(dx1.to_vector(), dx2.to_vector());
      if (max) {
        EXPECT_EQ(a1.to_vector(), a2.to_vector());
      }
    }
  }
}

TEST(AdaptivePooling, TiesPickTheFirstAndNaNWins) {
  const AdaptivePool2dGeometry g{1, 1, 3, 3, 2, 2};
  Context ctx(Device::cpu(), 1, 1);
  Tensor x = Tensor::from_vector({1, 1, 3, 3}, {5, 5, 1, 5, 5, 1, 1, 1, testing::kNaN});
  Tensor y({1, 1, 2, 2}), argmax({1, 1, 2, 2});
  adaptive_pool2d_forward(ctx, g, PoolMode::max, x, y, &argmax);
  EXPECT_EQ(argmax.to_vector(), (std::vector<float>{0, 1, 3, 8}));
  EXPECT_TRUE(std::isnan(y.to_vector()[3]));
}

TEST(AdaptivePooling, Errors) {
  Context ctx(Device::cpu(), 1, 1);
  const AdaptivePool2dGeometry g{2, 3, 5, 5, 2, 2};
  Tensor x({2, 3, 5, 5}), y({2, 3, 2, 2}), wrong({2, 3, 3, 3}), argmax({2, 3, 2, 2});
  EXPECT_CONTAINS(crema::testing::error_of([&] {
                    adaptive_pool2d_forward(ctx, g, PoolMode::average, x, wrong, nullptr);
                  }),
                  "adaptive_pool2d_forward");
  EXPECT_CONTAINS(
      crema::testing::error_of([&] {
        adaptive_pool2d_forward(ctx, {2, 3, 5, 5, 0, 2}, PoolMode::average, x, y, nullptr);
      }),
      "invalid geometry");
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { adaptive_pool2d_forward(ctx, g, PoolMode::average, x, y, &argmax); }),
                  "no argmax");
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { adaptive_pool2d_backward(ctx, g, PoolMode::max, y, nullptr, x); }),
                  "needs the forward's argmax");
}

}  // namespace
}  // namespace crema::kernels
