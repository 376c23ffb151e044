// Tensor ops on the CPU: ref<double> against hand-computed values, the fast path against
// ref<double> for every op on awkward shapes with every blend (beta = 0 on NaN, beta = 1,
// alpha = 0.5), thread-count independence, the f64 dispatch, and the dispatch's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/layout/layout.h"
#include "kernels/tensor_ops/tensor_ops.h"
#include "tests/kernels/tensor_ops_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using testing::Blend;
using testing::kBlends;
using testing::rel_error;

std::vector<double> doubles_of(const Tensor& t) {
  const double* p = t.data<double>();
  return {p, p + t.numel()};
}

Tensor f64(const Shape& shape, const std::vector<double>& values) {
  Tensor t(shape, DType::f64);
  std::memcpy(t.data<double>(), values.data(), values.size() * sizeof(double));
  return t;
}

// --- the reference against values worked by hand -----------------------------------------

TEST(TensorOpsRef, OpTensorBroadcastsAndBlends) {
  // C [2, 3] = max(2 * A, -1 * B) + 0.5 * C with B [1, 3] broadcast down the rows.
  const int64_t c_shape[] = {2, 3}, b_shape[] = {1, 3};
  const double a[] = {1, -2, 3, 0, 5, -6}, b[] = {-4, 1, -10};
  double c[] = {2, 2, 2, 4, 4, 4};
  ref::op_tensor<double>(OpTensorOp::max, 2, c_shape, b_shape, 2.0, a, -1.0, b, 0.5, c);
  EXPECT_EQ(std::vector<double>(c, c + 6), (std::vector<double>{5, 0, 11, 6, 12, 12}));
  // logical_not ignores B: C = 1 - A.
  double d[] = {0, 0, 0, 0, 0, 0};
  ref::op_tensor<double>(OpTensorOp::logical_not, 2, c_shape, b_shape, 1.0, a, 1.0, nullptr, 0.0,
                         d);
  EXPECT_EQ(std::vector<double>(d, d + 6), (std::vector<double>{0, 3, -2, 1, -4, 7}));
}

TEST(TensorOpsRef, ReduceKeepsRankAndReportsFirstIndex) {
  // x [2, 3, 2] reduced over axes 1 and 2 (y [2, 1, 1]); per n the reduced index is 2 * c + w.
  const int64_t x_shape[] = {2, 3, 2}, y_shape[] = {2, 1, 1};
  const double x[] = {1, -7, 3, 3, 0, 2, /* n = 1 */ 0, 5, -5, 0, 5, 1};
  struct Want {
    ReduceOp op;
    double y0, y1, i0, i1;
  };
  const Want wants[] = {{ReduceOp::sum, 2, 6, -1, -1},
                        {ReduceOp::max, 3, 5, 2, 1},
                        {ReduceOp::min, -7, -5, 1, 2},
                        {ReduceOp::amax, 7, 5, 1, 1},
                        {ReduceOp::avg, 2.0 / 6, 1, -1, -1},
                        {ReduceOp::norm1, 16, 16, -1, -1},
                        {ReduceOp::norm2, std::sqrt(72.0), std::sqrt(76.0), -1, -1},
                        {ReduceOp::mul, 0, 0, -1, -1},
                        {ReduceOp::mul_no_zeros, -126, -125, -1, -1}};
  for (const Want& w : wants) {
    SCOPED_TRACE(reduce_op_name(w.op));
    double y[] = {100, 100}, indices[] = {-1, -1};
    const bool indexed = detail::reduce_has_indices(w.op);
    ref::reduce_tensor<double>(w.op, 3, x_shape, y_shape, 1.0, x, 0.0, y,
                               indexed ? indices : nullptr);
    EXPECT_DOUBLE_EQ(y[0], w.y0);
    EXPECT_DOUBLE_EQ(y[1], w.y1);
    EXPECT_EQ(indices[0], w.i0);
    EXPECT_EQ(indices[1], w.i1);
  }
}

TEST(TensorOpsRef, TransformPermutesAndBlends) {
  // x [1, 2, 1, 3] (NCHW) -> y [1, 1, 3, 2] (NHWC), y = 2 x + 1 y.
  const int64_t x_shape[] = {1, 2, 1, 3};
  const int order[] = {0, 2, 3, 1};
  const double x[] = {1, 2, 3, 4, 5, 6};
  double y[] = {1, 1, 1, 1, 1, 1};
  ref::transform_tensor<double, double>(4, x_shape, order, 2.0, x, 1.0, y);
  EXPECT_EQ(std::vector<double>(y, y + 6), (std::vector<double>{3, 9, 5, 11, 7, 13}));
}

// --- the fast CPU path against the reference ---------------------------------------------

TEST(TensorOpsCpu, OpTensorMatchesReference) {
  Random rng(3);
  for (OpTensorOp op : testing::kOpTensorOps) {
    for (const testing::BroadcastCase& bc : testing::kBroadcastCases) {
      for (const Blend& blend : kBlends) {
        SCOPED_TRACE(std::string(op_tensor_op_name(op)) + " c " + shape_str(bc.c) + " b " +
                     shape_str(bc.b) + " " + testing::blend_str(blend));
        const bool positive = op == OpTensorOp::sqrt;
        const Tensor a = testing::op_input(rng, bc.c, positive, false);
        const Tensor b = testing::op_input(rng, bc.b, false, false);
        Tensor c = testing::prior_output(rng, bc.c, blend);
        const std::vector<double> want = testing::ref_op_tensor(op, blend, a, b, c);
        const BroadcastPlan plan = make_broadcast_plan(bc.c, bc.b);
        cpu::op_tensor(op, plan, float(blend.alpha), a.data<float>(), float(testing::kAlpha2),
                       b.data<float>(), float(blend.beta), c.data<float>(), 2);
        EXPECT_LT(rel_error(c.to_vector(), want), testing::kOpTensorTol);
      }
    }
  }
}

TEST(TensorOpsCpu, ReduceMatchesReferenceWithIndices) {
  Random rng(4);
  for (ReduceOp op : testing::kReduceOps) {
    const bool products = op == ReduceOp::mul || op == ReduceOp::mul_no_zeros;
    for (const testing::ReduceCase& rc : testing::kReduceCases) {
      for (const Blend& blend : kBlends) {
        SCOPED_TRACE(std::string(reduce_op_name(op)) + " x " + shape_str(rc.x) + " y " +
                     shape_str(rc.y) + " " + testing::blend_str(blend));
        const Tensor x = testing::op_input(rng, rc.x, false, products);
        Tensor y = testing::prior_output(rng, rc.y, blend);
        const bool indexed = detail::reduce_has_indices(op);
        std::vector<double> want_indices;
        const std::vector<double> want =
            testing::ref_reduce(op, blend, x, y, indexed ? &want_indices : nullptr);
        Tensor indices = testing::poisoned(rc.y);
        cpu::reduce_tensor(op, make_reduce_plan(rc.x, rc.y), float(blend.alpha), x.data<float>(),
                           float(blend.beta), y.data<float>(),
                           indexed ? indices.data<float>() : nullptr, 2);
        EXPECT_LT(rel_error(y.to_vector(), want), testing::kReduceTol);
        if (indexed) {
          EXPECT_EQ(rel_error(indices.to_vector(), want_indices), 0.0);
        }
      }
    }
  }
}

TEST(TensorOpsCpu, TransformMatchesReferenceForEveryOrder) {
  Random rng(5);
  // The last has enough elements for the CPU's threads.
  const Shape shapes[] = {{2, 3, 5, 7}, {1, 4, 1, 9}, {3, 1, 2, 1}, {4, 16, 12, 11}};
  for (const Shape& s : shapes) {
    std::vector<int> order = {0, 1, 2, 3};
    do {
      for (const Blend& blend : kBlends) {
        SCOPED_TRACE(shape_str(s) + " order " + std::to_string(order[0]) +
                     std::to_string(order[1]) + std::to_string(order[2]) +
                     std::to_string(order[3]) + " " + testing::blend_str(blend));
        const Tensor x = testing::random_tensor(rng, s);
        Tensor y = testing::prior_output(rng, permuted_shape(s, order), blend);
        const std::vector<double> want = testing::ref_transform(blend, x, order, y);
        cpu::transform_tensor(make_permute_map(s, order), float(blend.alpha), x.data<float>(),
                              float(blend.beta), y.data<float>(), 2);
        EXPECT_LT(rel_error(y.to_vector(), want), testing::kOpTensorTol);
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(TensorOpsCpu, ReduceDoesNotDependOnThreadCount) {
  Random rng(6);
  const Tensor x = testing::random_tensor(rng, {5, 64, 3, 9});
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    Context ctx(Device::cpu(), 1, threads);
    Tensor y = testing::poisoned({5, 1, 3, 1});
    reduce_tensor(ctx, ReduceOp::norm2, 1.0, x, 0.0, y);
    if (first.empty()) first = y.to_vector();
    EXPECT_EQ(std::memcmp(first.data(), y.to_vector().data(), first.size() * sizeof(float)), 0);
  }
}

// --- the Tensor-level entries ------------------------------------------------------------

TEST(TensorOps, TensorLevelF32AndF64AgreeWithReference) {
  Context ctx;
  Random rng(7);
  const Tensor a = testing::random_tensor(rng, {2, 3, 4}),
               b = testing::random_tensor(rng, {1, 3, 1});
  Tensor c = testing::poisoned({2, 3, 4});
  op_tensor(ctx, OpTensorOp::mul, 0.5, a, testing::kAlpha2, b, 0.0, c);
  const std::vector<double> want = testing::ref_op_tensor(OpTensorOp::mul, {0.5, 0.0}, a, b, c);
  EXPECT_LT(rel_error(c.to_vector(), want), testing::kOpTensorTol);

  const Tensor a64 = f64(a.shape(), testing::to_double(a)),
               b64 = f64(b.shape(), testing::to_double(b));
  Tensor c64(a.shape(), DType::f64);
  op_tensor(ctx, OpTensorOp::mul, 0.5, a64, testing::kAlpha2, b64, 0.0, c64);
  EXPECT_EQ(doubles_of(c64), want);

  Tensor y64({1, 3, 1}, DType::f64), i64({1, 3, 1}, DType::f64);
  reduce_tensor(ctx, ReduceOp::amax, 1.0, a64, 0.0, y64, &i64);
  Tensor y({1, 3, 1}), idx({1, 3, 1});
  reduce_tensor(ctx, ReduceOp::amax, 1.0, a, 0.0, y, &idx);
  EXPECT_LT(rel_error(y.to_vector(), doubles_of(y64)), testing::kReduceTol);
  EXPECT_EQ(rel_error(idx.to_vector(), doubles_of(i64)), 0.0);
}

TEST(TensorOps, TransformChangesDtypeOnTheCpu) {
  Context ctx;
  Random rng(8);
  const Tensor x = testing::random_tensor(rng, {2, 3, 4, 5});
  const std::vector<int> order = {0, 2, 3, 1};
  Tensor y64({2, 4, 5, 3}, DType::f64);
  y64.fill(1.0f);
  transform_tensor(ctx, 0.5, x, order, 1.0, y64);
  Tensor ones({2, 4, 5, 3});
  ones.fill(1.0f);
  EXPECT_EQ(doubles_of(y64), testing::ref_transform({0.5, 1.0}, x, order, ones));

  Tensor back = testing::poisoned({2, 3, 4, 5});
  transform_tensor(ctx, 1.0, y64, {0, 3, 1, 2}, 0.0, back);
  std::vector<double> want(size_t(x.numel()));
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * x.to_vector()[i] + 1.0;
  EXPECT_LT(rel_error(back.to_vector(), want), testing::kOpTensorTol);
}

TEST(TensorOps, SetAndScale) {
  Context ctx;
  Tensor y = testing::poisoned({3, 5});
  set_tensor(ctx, y, 2.5);
  scale_tensor(ctx, y, 0.5);
  EXPECT_EQ(y.to_vector(), std::vector<float>(15, 1.25f));
  Tensor y64({7}, DType::f64);
  set_tensor(ctx, y64, -3.0);
  scale_tensor(ctx, y64, 0.5);
  EXPECT_EQ(doubles_of(y64), std::vector<double>(7, -1.5));
}

TEST(TensorOps, ErrorsNameTheTensor) {
  Context ctx;
  Tensor a({2, 3}), b({2, 2}), c({2, 3}), y({2, 3}), bad_y({3, 1}), idx({2, 1}), y1({2, 1});
  EXPECT_CONTAINS(error_of([&] { op_tensor(ctx, OpTensorOp::add, 1, a, 1, b, 0, c); }),
                  "op_tensor add: b is f32[2, 2] on cpu, expected c's rank");
  Tensor bcast({1, 3});
  EXPECT_CONTAINS(error_of([&] { op_tensor(ctx, OpTensorOp::add, 1, a, 1, bcast, 0, bcast); }),
                  "op_tensor add: a is f32[2, 3]");
  EXPECT_CONTAINS(error_of([&] { reduce_tensor(ctx, ReduceOp::sum, 1, a, 0, bad_y); }),
                  "reduce_tensor sum: y is f32[3, 1] on cpu, expected x's rank");
  EXPECT_CONTAINS(error_of([&] { reduce_tensor(ctx, ReduceOp::sum, 1, a, 0, y1, &idx); }),
                  "only max, min and amax have them");
  EXPECT_CONTAINS(error_of([&] { reduce_tensor(ctx, ReduceOp::max, 1, a, 0, y1, &y1); }),
                  "indices shares storage with y");
  EXPECT_CONTAINS(error_of([&] {
                    transform_tensor(ctx, 1, a, {0, 0}, 0, y);
                  }),
                  "is not a permutation");
  EXPECT_CONTAINS(error_of([&] {
                    transform_tensor(ctx, 1, a, {0, 1}, 0, a);
                  }),
                  "transform_tensor: y shares storage with x");
  Tensor nine(Shape(9, 1));
  EXPECT_CONTAINS(
      error_of([&] { op_tensor(ctx, OpTensorOp::sqrt, 1, nine, 1, Tensor(), 0, nine); }),
      "op_tensor sqrt: c is f32[1, 1, 1, 1, 1, 1, 1, 1, 1] on cpu, more than 8 axes");
}

}  // namespace
}  // namespace crema::kernels
