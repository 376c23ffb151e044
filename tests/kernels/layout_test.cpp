// Layout transforms on the CPU: the reference by hand, the simplification of permutations, the
// fast batched transpose and general permutation against ref<double> on awkward shapes with
// poisoned outputs, every permutation of 4-D and some 5-D tensors through the Tensor-level
// dispatch, and its errors.
#include "kernels/layout/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

std::string str(const std::vector<int>& order) {
  std::string s;
  for (int a : order) s += std::to_string(a) + " ";
  return s;
}

// y = ref::permute(x) in double.
std::vector<double> ref_permute(const Tensor& x, const std::vector<int>& order) {
  const std::vector<double> xd = testing::to_double(x);
  std::vector<double> y(xd.size());
  ref::permute(x.ndim(), x.shape().data(), order.data(), xd.data(), y.data());
  return y;
}

TEST(Layout, ReferenceByHand) {
  // x [1, 2, 3] = [[0 1 2] [3 4 5]] -> y [1, 3, 2] = [[0 3] [1 4] [2 5]]
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  std::vector<float> y(6);
  ref::batched_transpose<float>(1, 2, 3, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // x [2, 1, 3], order [2, 0, 1]: y [3, 2, 1], y[k, n, 0] = x[n, 0, k].
  const std::vector<float> x2 = {0, 1, 2, 10, 11, 12};
  const int64_t shape[] = {2, 1, 3};
  const int order[] = {2, 0, 1};
  ref::permute<float>(3, shape, order, x2.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 10, 1, 11, 2, 12}));
}

TEST(Layout, SimplifyMergesAndDropsAxes) {
  auto plan = simplify_permutation({2, 3, 4, 5}, {0, 2, 3, 1});  // NCHW -> NHWC
  EXPECT_EQ(plan.shape, (Shape{2, 3, 20}));
  EXPECT_EQ(plan.order, (std::vector<int>{0, 2, 1}));
  plan = simplify_permutation({2, 3, 4, 5}, {0, 3, 1, 2});  // NHWC -> NCHW
  EXPECT_EQ(plan.shape, (Shape{2, 12, 5}));
  EXPECT_EQ(plan.order, (std::vector<int>{0, 2, 1}));
  plan = simplify_permutation({3, 4, 5}, {2, 0, 1});
  EXPECT_EQ(plan.shape, (Shape{12, 5}));
  EXPECT_EQ(plan.order, (std::vector<int>{1, 0}));
  plan = simplify_permutation({2, 1, 4, 5}, {0, 2, 3, 1});  // C = 1: nothing moves
  EXPECT_EQ(plan.shape, (Shape{40}));
  EXPECT_EQ(plan.order, (std::vector<int>{0}));
  plan = simplify_permutation({2, 3, 4, 5}, {3, 2, 1, 0});
  EXPECT_EQ(plan.shape, (Shape{2, 3, 4, 5}));
  EXPECT_EQ(plan.order, (std::vector<int>{3, 2, 1, 0}));
  plan = simplify_permutation({2, 3, 4, 5}, {1, 0, 2, 3});
  EXPECT_EQ(plan.shape, (Shape{2, 3, 20}));
  EXPECT_EQ(plan.order, (std::vector<int>{1, 0, 2}));
}

TEST(Layout, CpuBatchedTransposeMatchesReference) {
  const Shape cases[] = {{1, 1, 1},   {1, 1, 7},   {1, 7, 1},   {3, 2, 784},
                         {2, 33, 65}, {1, 64, 64}, {5, 31, 33}, {2, 100, 3}};
  Random rng(1);
  for (const Shape& s : cases) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = testing::random_tensor(rng, s);
    const std::vector<double> xd = testing::to_double(x);
    std::vector<double> want(xd.size());
    ref::batched_transpose(s[0], s[1], s[2], xd.data(), want.data());
    for (int threads : {1, 2}) {
      Tensor y = testing::poisoned({s[0], s[2], s[1]});
      cpu::batched_transpose(s[0], s[1], s[2], x.data<float>(), y.data<float>(), threads);
      EXPECT_EQ(testing::rel_error(y.to_vector(), want), 0.0);
    }
  }
}

TEST(Layout, CpuPermuteMatchesReferenceForEveryOrder) {
  Random rng(2);
  for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{1, 4, 1, 3}, Shape{3, 1, 2, 1}}) {
    const Tensor x = testing::random_tensor(rng, s);
    std::vector<int> order = {0, 1, 2, 3};
    do {
      SCOPED_TRACE(shape_str(s) + " order " + str(order));
      Tensor y = testing::poisoned(permuted_shape(s, order));
      cpu::permute(4, s.data(), order.data(), x.data<float>(), y.data<float>(), 2);
      EXPECT_EQ(testing::rel_error(y.to_vector(), ref_permute(x, order)), 0.0);
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(Layout, DispatchMatchesReferenceForEveryOrder) {
  Context ctx;
  Random rng(3);
  for (const Shape& s :
       {Shape{2, 3, 5, 7}, Shape{1, 6, 1, 5}, Shape{3, 2, 1, 9}, Shape{2, 3, 4, 5, 3}}) {
    const Tensor x = testing::random_tensor(rng, s);
    std::vector<int> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    do {
      SCOPED_TRACE(shape_str(s) + " order " + str(order));
      Tensor y = testing::poisoned(permuted_shape(s, order));
      permute(ctx, x, order, y);
      EXPECT_EQ(testing::rel_error(y.to_vector(), ref_permute(x, order)), 0.0);
      // The inverse order brings x back.
      Tensor back = testing::poisoned(s);
      permute(ctx, y, inverse_permutation(order), back);
      EXPECT_EQ(back.to_vector(), x.to_vector());
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(Layout, NchwNhwcRoundTrip) {
  Context ctx;
  Random rng(4);
  for (const Shape& s :
       {Shape{2, 3, 5, 7}, Shape{1, 20, 24, 24}, Shape{3, 1, 1, 1}, Shape{2, 17, 1, 33}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = testing::random_tensor(rng, s);
    Tensor nhwc = testing::poisoned({s[0], s[2], s[3], s[1]});
    nchw_to_nhwc(ctx, x, nhwc);
    EXPECT_EQ(testing::rel_error(nhwc.to_vector(), ref_permute(x, {0, 2, 3, 1})), 0.0);
    Tensor back = testing::poisoned(s);
    nhwc_to_nchw(ctx, nhwc, back);
    EXPECT_EQ(back.to_vector(), x.to_vector());
  }
}

TEST(Layout, Errors) {
  Context ctx;
  Tensor x({2, 3, 4}), y({4, 3, 2});
  x.fill(1.0f);
  for (const std::vector<int>& bad : {std::vector<int>{0, 1}, std::vector<int>{0, 1, 1},
                                      std::vector<int>{0, 1, 3}, std::vector<int>{-1, 0, 1}}) {
    try {
      permute(ctx, x, bad, y);
      ADD_FAILURE() << "order " << str(bad) << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a permutation"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(permute(ctx, x, {2, 0, 1}, y), Error);  // y must be [4, 2, 3]
  Tensor x4({2, 3, 4, 5}), z({2, 5, 4, 3});
  x4.fill(1.0f);
  EXPECT_THROW(nchw_to_nhwc(ctx, x4, z), Error);  // y must be [2, 4, 5, 3]
  EXPECT_THROW(nchw_to_nhwc(ctx, x, y), Error);   // x is not 4-D
}

}  // namespace
}  // namespace crema::kernels
