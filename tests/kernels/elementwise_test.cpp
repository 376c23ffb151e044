// Elementwise helpers: the reference by hand, the CPU path against ref<double> on odd and large
// sizes with poisoned outputs, aliasing, sums that do not depend on the thread count, the bias
// helpers, and shape errors.
#include "kernels/elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

using testing::kNaN;

TEST(ElementwiseRef, ByHand) {
  std::vector<double> x = {1, -2, 3}, y = {10, 20, 30};
  ref::axpy(3, 2.0, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{12, 16, 36}));
  ref::axpby(3, 1.0, x.data(), 0.5, y.data());
  EXPECT_EQ(y, (std::vector<double>{7, 6, 21}));
  ref::scale(3, -1.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{-7, -6, -21}));
  std::vector<double> out(3, kNaN);
  ref::add(3, x.data(), y.data(), out.data());
  EXPECT_EQ(out, (std::vector<double>{-6, -8, -18}));
  EXPECT_EQ(ref::sum(3, out.data()), -32.0);
  EXPECT_EQ(ref::sum_of_squares(3, x.data()), 14.0);
  ref::fill(3, 4.0, out.data());
  EXPECT_EQ(out, (std::vector<double>{4, 4, 4}));
  // y [2, 3] += bias [3]; dbias [3] += column sums of y.
  std::vector<double> matrix = {1, 2, 3, 4, 5, 6}, bias = {10, 20, 30};
  ref::add_bias_rows(2, 3, bias.data(), matrix.data());
  EXPECT_EQ(matrix, (std::vector<double>{11, 22, 33, 14, 25, 36}));
  ref::accumulate_bias_rows(2, 3, matrix.data(), bias.data());
  EXPECT_EQ(bias, (std::vector<double>{35, 67, 99}));
}

TEST(ElementwiseCpu, MatchesReference) {
  for (int64_t n : {1, 7, 1000, 100003}) {  // 100003 takes the threaded path
    SCOPED_TRACE("n=" + std::to_string(n));
    Context ctx(Device::cpu(), 1, 2);
    Random rng(static_cast<uint64_t>(n));
    const Tensor x = testing::random_tensor(rng, {n});
    const Tensor y0 = testing::random_tensor(rng, {n});
    const std::vector<double> xd = testing::to_double(x), y0d = testing::to_double(y0);

    Tensor t = testing::poisoned({n});
    fill(ctx, t, 0.75f);
    EXPECT_EQ(t.to_vector(), std::vector<float>(size_t(n), 0.75f));

    t = y0.clone();
    scale(ctx, -1.5f, t);
    std::vector<double> want = y0d;
    ref::scale(n, -1.5, want.data());
    EXPECT_LT(testing::rel_error(t.to_vector(), want), 1e-7);

    t = y0.clone();
    axpy(ctx, 0.3f, x, t);
    want = y0d;
    ref::axpy(n, double(0.3f), xd.data(), want.data());
    EXPECT_LT(testing::rel_error(t.to_vector(), want), 1e-6);

    t = y0.clone();
    axpby(ctx, 0.3f, x, -0.7f, t);
    want = y0d;
    ref::axpby(n, double(0.3f), xd.data(), double(-0.7f), want.data());
    EXPECT_LT(testing::rel_error(t.to_vector(), want), 1e-6);

    t = testing::poisoned({n});  // beta = 0: y is write-only
    axpby(ctx, 0.3f, x, 0.0f, t);
    ref::axpby(n, double(0.3f), xd.data(), 0.0, want.data());
    EXPECT_LT(testing::rel_error(t.to_vector(), want), 1e-7);

    t = testing::poisoned({n});
    add(ctx, x, y0, t);
    ref::add(n, xd.data(), y0d.data(), want.data());
    EXPECT_LT(testing::rel_error(t.to_vector(), want), 1e-7);

    EXPECT_NEAR(cpu::sum(n, x.data<float>(), 2), ref::sum(n, xd.data()), 1e-9 * double(n));
    EXPECT_NEAR(cpu::sum_of_squares(n, x.data<float>(), 2), ref::sum_of_squares(n, xd.data()),
                1e-9 * double(n));
    // The Tensor level writes the sums, rounded to float, into a one-element tensor.
    Tensor out = testing::poisoned({});
    sum(ctx, x, out);
    EXPECT_EQ(out.to_vector()[0], float(cpu::sum(n, x.data<float>(), 2)));
    sum_of_squares(ctx, x, out);
    EXPECT_EQ(out.to_vector()[0], float(cpu::sum_of_squares(n, x.data<float>(), 2)));
  }
}

TEST(ElementwiseCpu, AddMayAliasAnInput) {
  Context ctx;
  Random rng(2);
  const Tensor a = testing::random_tensor(rng, {3, 41}), b = testing::random_tensor(rng, {3, 41});
  Tensor out({3, 41});
  add(ctx, a, b, out);
  Tensor alias_a = a.clone(), alias_b = b.clone();
  add(ctx, alias_a, b, alias_a);
  add(ctx, a, alias_b, alias_b);
  EXPECT_EQ(alias_a.to_vector(), out.to_vector());
  EXPECT_EQ(alias_b.to_vector(), out.to_vector());
}

TEST(ElementwiseCpu, SumsDoNotDependOnTheThreadCount) {
  Random rng(3);
  const Tensor x = testing::random_tensor(rng, {300001}, -1, 3);
  const int64_t n = x.numel();
  const float* p = x.data<float>();
  EXPECT_EQ(cpu::sum(n, p, 1), cpu::sum(n, p, 2));
  EXPECT_EQ(cpu::sum(n, p, 1), cpu::sum(n, p, 3));
  EXPECT_EQ(cpu::sum_of_squares(n, p, 1), cpu::sum_of_squares(n, p, 2));
  EXPECT_EQ(cpu::sum_of_squares(n, p, 1), cpu::sum_of_squares(n, p, 3));
}

TEST(ElementwiseCpu, BiasRowsMatchReference) {
  uint64_t seed = 30;
  for (const Shape& shape :
       {Shape{1, 1}, Shape{5, 300}, Shape{64, 500}, Shape{2, 3, 7}, Shape{300, 257}}) {
    SCOPED_TRACE(shape_str(shape));
    Context ctx(Device::cpu(), 1, 2);
    Random rng(++seed);
    const int64_t N = shape.back(), M = shape_numel(shape) / N;
    const Tensor bias = testing::random_tensor(rng, {N});
    const Tensor y0 = testing::random_tensor(rng, shape);
    const Tensor dbias0 = testing::random_tensor(rng, {N});

    Tensor y = y0.clone();
    add_bias_rows(ctx, bias, y);
    std::vector<double> y_ref = testing::to_double(y0);
    ref::add_bias_rows(M, N, testing::to_double(bias).data(), y_ref.data());
    EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-7);

    Tensor dbias = dbias0.clone();
    accumulate_bias_rows(ctx, y0, dbias);
    std::vector<double> dbias_ref = testing::to_double(dbias0);
    ref::accumulate_bias_rows(M, N, testing::to_double(y0).data(), dbias_ref.data());
    EXPECT_LT(testing::rel_error(dbias.to_vector(), dbias_ref), 1e-6);
  }
}

// float64 tensors on the CPU run the double reference.
TEST(Elementwise, Float64RunsTheReference) {
  Context ctx;
  Tensor x({3}, DType::f64), y({3}, DType::f64), total({1}, DType::f64);
  const double xv[] = {0.1, 0.2, 0.3}, yv[] = {1, 2, 3};
  for (int i = 0; i < 3; ++i) {
    x.data<double>()[i] = xv[i];
    y.data<double>()[i] = yv[i];
  }
  axpy(ctx, 2.0f, x, y);
  std::vector<double> want(yv, yv + 3);
  ref::axpy(3, 2.0, xv, want.data());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.data<double>()[i], want[size_t(i)]);
  sum(ctx, x, total);
  EXPECT_EQ(total.data<double>()[0], ref::sum(3, xv));
}

TEST(Elementwise, RejectsMismatchedTensors) {
  Context ctx;
  Tensor a({2, 3}), b({3, 2}), bias({2}), d({2, 3}, DType::bf16);
  a.fill(1.0f);
  b.fill(1.0f);
  EXPECT_THROW(axpy(ctx, 1.0f, a, b), Error);
  EXPECT_THROW(axpby(ctx, 1.0f, a, 0.0f, b), Error);
  EXPECT_THROW(add(ctx, a, b, a), Error);
  EXPECT_THROW(add_bias_rows(ctx, bias, a), Error);
  EXPECT_THROW(accumulate_bias_rows(ctx, a, bias), Error);
  EXPECT_THROW(fill(ctx, d, 0.0f), Error);     // no bf16 implementation
  EXPECT_THROW(axpy(ctx, 1.0f, a, d), Error);  // y's dtype is not x's
  EXPECT_THROW(sum(ctx, a, b), Error);         // the result must have one element
  try {
    add_bias_rows(ctx, bias, a);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
