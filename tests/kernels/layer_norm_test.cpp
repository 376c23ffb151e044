// LayerNorm kernels on the CPU: PyTorch's nn.LayerNorm over the last axis and over the channels
// of NCHW (tests/fixtures/zoo_layer_fixtures.safetensors) for ref<double> and the float32 path,
// the float32 path against ref<double> on awkward shapes (rows; columns with inner above the
// task block; C = 1; threaded and not, bit for bit between thread counts), without weight and
// bias, dx aliasing dy, large offsets (the two-pass variance), and the dispatch's errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layout/layout.h"
#include "kernels/scale/scale.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

Tensor f64_tensor(const Shape& shape, const std::vector<double>& values) {
  Tensor t(shape, DType::f64);
  std::memcpy(t.data<double>(), values.data(), values.size() * sizeof(double));
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  if (t.dtype() == DType::f32) return testing::to_double(t);
  return {t.data<double>(), t.data<double>() + t.numel()};
}

// Relative error of got against want, in norm (kernel_test_util's rel_error for doubles).
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

// Runs forward and backward (with the parameter gradients, accumulated into zeros) in `dtype` on
// the CPU and compares with PyTorch's values.
void check_fixture(const std::string& name, int axis, DType dtype, double tolerance) {
  SCOPED_TRACE(name + (dtype == DType::f64 ? " f64" : " f32"));
  const crema::testing::SafetensorsFixture f("zoo_layer_fixtures.safetensors");
  const Shape& xs = f.shape(name + ".x");
  const float eps = float(f.doubles(name + ".eps")[0]);
  auto input = [&](const std::string& key) {
    return dtype == DType::f64 ? f64_tensor(f.shape(name + key), f.doubles(name + key))
                               : f.input(name + key);
  };
  const Tensor x = input(".x"), weight = input(".weight"), bias = input(".bias"), dy = input(".dy");
  const int64_t C = xs[size_t(axis)];
  Context ctx(Device::cpu(), 1, 2);
  Tensor y(xs, dtype), dx(xs, dtype), mean({x.numel() / C}, dtype), rstd({x.numel() / C}, dtype),
      dweight({C}, dtype), dbias({C}, dtype);
  std::memset(dweight.raw(), 0, dweight.nbytes());
  std::memset(dbias.raw(), 0, dbias.nbytes());
  layer_norm_forward(ctx, x, &weight, &bias, axis, eps, y, mean, rstd);
  layer_norm_backward(ctx, x, dy, &weight, mean, rstd, axis, &dx, &dweight, &dbias);
  EXPECT_LT(rel_error(values_of(y), f.doubles(name + ".y")), tolerance);
  EXPECT_LT(rel_error(values_of(dx), f.doubles(name + ".dx")), tolerance);
  EXPECT_LT(rel_error(values_of(dweight), f.doubles(name + ".dweight")), tolerance);
  EXPECT_LT(rel_error(values_of(dbias), f.doubles(name + ".dbias")), tolerance);
}

TEST(LayerNorm, MatchesPyTorch) {
  check_fixture("ln_last", 2, DType::f64, 1e-12);
  check_fixture("ln_channels", 1, DType::f64, 1e-12);
  check_fixture("ln_last", 2, DType::f32, 1e-6);
  check_fixture("ln_channels", 1, DType::f32, 1e-6);
}

struct Case {
  Shape shape;
  int axis;
};

// The float32 path against ref<double>: y, mean, rstd, dx and the parameter gradients (added to
// 1: they accumulate) within float32 rounding, and the same bits on 1 and 3 threads.
TEST(LayerNorm, CpuMatchesReference) {
  const std::vector<Case> cases = {{{1, 1}, 1},        {{5, 1}, 1},        {{3, 7}, 1},
                                   {{2, 3, 768}, 2},   {{1, 13, 7, 7}, 1}, {{3, 5, 17, 19}, 1},
                                   {{2, 96, 1, 1}, 1}, {{4, 7, 33}, 1},    {{2, 3, 5, 11}, 3},
                                   {{1, 1, 9, 9}, 1},  {{3, 9, 300}, 1},   {{64, 192}, 1}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " axis " + std::to_string(c.axis));
    const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
    Random rng(++seed);
    const Tensor x = testing::random_tensor(rng, c.shape, -2, 3);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    const Tensor w = testing::random_tensor(rng, {C}, 0.5, 1.5),
                 b = testing::random_tensor(rng, {C});
    const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
    const std::vector<double> wd = testing::to_double(w), bd = testing::to_double(b);
    const int64_t outer = shape_count(c.shape, 0, c.axis);
    const int64_t inner = shape_count(c.shape, c.axis + 1, int(c.shape.size()));
    std::vector<double> y_ref(xd.size()), dx_ref(xd.size()), h_ref(xd.size());
    std::vector<double> m_ref(static_cast<size_t>(positions)),
        r_ref(static_cast<size_t>(positions));
    ref::layer_norm_forward(outer, C, inner, xd.data(), wd.data(), bd.data(), 1e-5f, y_ref.data(),
                            m_ref.data(), r_ref.data());
    ref::layer_norm_backward(outer, C, inner, xd.data(), dyd.data(), wd.data(), m_ref.data(),
                             r_ref.data(), dx_ref.data(), h_ref.data());
    std::vector<double> dw_ref(size_t(C), 1.0), db_ref(size_t(C), 1.0);
    ref::channel_reduce(outer, C, inner, dyd.data(), h_ref.data(), true, dw_ref.data());
    ref::channel_reduce<double>(outer, C, inner, dyd.data(), nullptr, true, db_ref.data());
    std::vector<std::vector<float>> first;
    for (int threads : {1, 3}) {
      Context ctx(Device::cpu(), 1, threads);
      Tensor y = testing::poisoned(c.shape), dx = testing::poisoned(c.shape),
             m = testing::poisoned({positions}), r = testing::poisoned({positions});
      Tensor dw = Tensor::from_vector({C}, std::vector<float>(size_t(C), 1.0f));
      Tensor db = Tensor::from_vector({C}, std::vector<float>(size_t(C), 1.0f));
      layer_norm_forward(ctx, x, &w, &b, c.axis, 1e-5f, y, m, r);
      layer_norm_backward(ctx, x, dy, &w, m, r, c.axis, &dx, &dw, &db);
      EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 2e-6);
      EXPECT_LT(testing::rel_error(m.to_vector(), m_ref), 2e-6);
      EXPECT_LT(testing::rel_error(r.to_vector(), r_ref), 2e-6);
      EXPECT_LT(testing::rel_error(dx.to_vector(), dx_ref), 1e-5);
      EXPECT_LT(testing::rel_error(dw.to_vector(), dw_ref), 2e-6);
      EXPECT_LT(testing::rel_error(db.to_vector(), db_ref), 2e-6);
      const std::vector<std::vector<float>> got = {y.to_vector(), dx.to_vector(), dw.to_vector(),
                                                   db.to_vector()};
      if (first.empty()) {
        first = got;
      } else {
        EXPECT_EQ(got, first);
      }
    }
  }
}

// Without weight and bias, y is xhat, so the weight's gradient is sum dy * y; dx may overwrite dy
// (one tensor); the parameter sums alone (no dx) are the same.
TEST(LayerNorm, NoAffineAndInPlaceGradient) {
  Context ctx(Device::cpu(), 1, 1);
  Random rng(7);
  for (const Case& c : std::vector<Case>{{{3, 10}, 1}, {{2, 6, 5, 3}, 1}}) {
    SCOPED_TRACE(shape_str(c.shape));
    const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
    const Tensor x = testing::random_tensor(rng, c.shape),
                 dy = testing::random_tensor(rng, c.shape);
    Tensor y(c.shape), m({positions}), r({positions}), dx(c.shape);
    Tensor dw = Tensor::from_vector({C}, std::vector<float>(size_t(C), 0.0f)), db = dw.clone();
    Tensor dw_y = dw.clone(), dw_alone = dw.clone(), db_alone = dw.clone();
    layer_norm_forward(ctx, x, nullptr, nullptr, c.axis, 1e-5f, y, m, r);
    layer_norm_backward(ctx, x, dy, nullptr, m, r, c.axis, &dx, &dw, &db);
    channel_reduce(ctx, dy, &y, c.axis, 1, false, dw_y);
    EXPECT_EQ(dw.to_vector(), dw_y.to_vector());
    layer_norm_backward(ctx, x, dy, nullptr, m, r, c.axis, nullptr, &dw_alone, &db_alone);
    EXPECT_EQ(dw_alone.to_vector(), dw.to_vector());
    EXPECT_EQ(db_alone.to_vector(), db.to_vector());
    Tensor g(c.shape);
    g.copy_from(dy);
    layer_norm_backward(ctx, x, g, nullptr, m, r, c.axis, &g, nullptr, nullptr);
    EXPECT_EQ(g.to_vector(), dx.to_vector());
  }
}

// A 4-D tensor stored nhwc is normalized along the same logical axis as its nchw copy: the
// channels (axis 1, rows in memory) and the width (axis 3, strided by C in memory). The copies'
// kernels differ (rows against columns), so they agree to float32 rounding.
TEST(LayerNorm, NhwcMatchesNchw) {
  Context ctx(Device::cpu(), 1, 1);
  Random rng(9);
  const Shape shape{2, 13, 5, 7};
  for (int axis : {1, 3}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int64_t C = shape[size_t(axis)], positions = shape_numel(shape) / C;
    const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
    const Tensor w = testing::random_tensor(rng, {C}, 0.5, 1.5),
                 b = testing::random_tensor(rng, {C});
    auto run = [&](Layout layout, std::vector<float>& y_out, std::vector<float>& dx_out,
                   std::vector<float>& dw_out) {
      Tensor xl(shape), dyl(shape), y(shape), dx(shape), m({positions}), r({positions});
      for (Tensor* t : {&xl, &dyl, &y, &dx}) t->set_layout(layout);
      convert(ctx, x, xl);
      convert(ctx, dy, dyl);
      Tensor dw = Tensor::from_vector({C}, std::vector<float>(size_t(C), 0.0f)), db = dw.clone();
      layer_norm_forward(ctx, xl, &w, &b, axis, 1e-5f, y, m, r);
      layer_norm_backward(ctx, xl, dyl, &w, m, r, axis, &dx, &dw, &db);
      Tensor y_nchw(shape), dx_nchw(shape);
      convert(ctx, y, y_nchw);
      convert(ctx, dx, dx_nchw);
      y_out = y_nchw.to_vector();
      dx_out = dx_nchw.to_vector();
      dw_out = dw.to_vector();
    };
    std::vector<float> y0, dx0, dw0, y1, dx1, dw1;
    run(Layout::nchw, y0, dx0, dw0);
    run(Layout::nhwc, y1, dx1, dw1);
    // rows against columns: the same sums in other orders, float32 rounding apart
    EXPECT_LT(testing::rel_error(y1, testing::to_double(y0)), 2e-6);
    EXPECT_LT(testing::rel_error(dx1, testing::to_double(dx0)), 1e-5);
    EXPECT_LT(testing::rel_error(dw1, testing::to_double(dw0)), 2e-6);
  }
}

// Values 1e3 + noise in [-1, 1): E[x^2] - E[x]^2 in float32 would leave the variance (about 1/3)
// to the rounding of 1e6 (ulp 0.06), tens of percent off; two passes keep y to the rounding of x
// and of the float32 mean (about 1e-4 relative).
TEST(LayerNorm, LargeOffsetKeepsPrecision) {
  for (const Case& c : std::vector<Case>{{{4, 256}, 1}, {{2, 64, 3, 5}, 1}}) {
    SCOPED_TRACE(shape_str(c.shape));
    Random rng(11);
    std::vector<float> v = testing::random_values(rng, shape_numel(c.shape));
    for (float& e : v) e += 1e3f;
    const Tensor x = Tensor::from_vector(c.shape, v);
    const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
    const int64_t outer = shape_count(c.shape, 0, c.axis);
    const int64_t inner = shape_count(c.shape, c.axis + 1, int(c.shape.size()));
    const std::vector<double> xd = testing::to_double(x);
    std::vector<double> y_ref(xd.size()), m_ref(static_cast<size_t>(positions)),
        r_ref(static_cast<size_t>(positions));
    ref::layer_norm_forward<double>(outer, C, inner, xd.data(), nullptr, nullptr, 1e-5f,
                                    y_ref.data(), m_ref.data(), r_ref.data());
    Context ctx(Device::cpu(), 1, 1);
    Tensor y(c.shape), m({positions}), r({positions});
    layer_norm_forward(ctx, x, nullptr, nullptr, c.axis, 1e-5f, y, m, r);
    EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-3);
  }
}

TEST(LayerNorm, Errors) {
  Context ctx(Device::cpu(), 1, 1);
  Tensor x({2, 3, 4}), y({2, 3, 4}), m({8}), r({8}), w({3}), wrong({5});
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { layer_norm_forward(ctx, x, nullptr, nullptr, 3, 1e-5f, y, m, r); }),
                  "axis 3");
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { layer_norm_forward(ctx, x, &wrong, nullptr, 1, 1e-5f, y, m, r); }),
                  "weight");
  EXPECT_CONTAINS(
      crema::testing::error_of([&] { layer_norm_forward(ctx, x, &w, nullptr, 1, 0.0f, y, m, r); }),
      "eps");
  Tensor m6({6});
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { layer_norm_forward(ctx, x, &w, nullptr, 1, 1e-5f, y, m6, r); }),
                  "mean");
}

}  // namespace
}  // namespace crema::kernels
