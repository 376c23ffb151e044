// Concat and slice on the CPU: the reference by hand, the fast path against ref<double> on
// awkward shapes with poisoned outputs (bit for bit: these are copies), skipped slice parts, and
// the Tensor-level errors.
#include "kernels/concat/concat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

struct Case {
  int64_t outer, inner;
  std::vector<int64_t> extents;
};

const Case kCases[] = {
    {1, 1, {1}},
    {2, 3, {1, 2}},
    {3, 1, {4, 1, 2}},
    {1, 7, {5, 3}},
    {5, 13, {1, 1, 1, 1}},
    {2, 49, {20, 50}},
    {7, 5, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}},  // more parts than a CUDA launch takes
};

int64_t total(const std::vector<int64_t>& extents) {
  int64_t k = 0;
  for (int64_t e : extents) k += e;
  return k;
}

TEST(Concat, ReferenceByHand) {
  // Two [2, K_p, 1] parts along axis 1: rows of 1 and 2 elements.
  const std::vector<float> a = {1, 2}, b = {10, 11, 20, 21};
  const float* parts[] = {a.data(), b.data()};
  const int64_t extents[] = {1, 2};
  std::vector<float> whole(6);
  ref::concat<float>(2, 1, 2, extents, parts, whole.data());
  EXPECT_EQ(whole, (std::vector<float>{1, 10, 11, 2, 20, 21}));
  std::vector<float> a2(2), b2(4);
  float* out[] = {a2.data(), b2.data()};
  ref::slice<float>(2, 1, 2, extents, whole.data(), out);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
}

TEST(Concat, CpuMatchesReference) {
  Random rng(1);
  for (const Case& c : kCases) {
    SCOPED_TRACE("outer " + std::to_string(c.outer) + " inner " + std::to_string(c.inner) +
                 " parts " + std::to_string(c.extents.size()));
    const int P = int(c.extents.size());
    const int64_t K = total(c.extents);
    std::vector<Tensor> parts;
    std::vector<std::vector<double>> parts_d;
    std::vector<const float*> pf;
    std::vector<const double*> pd;
    for (int64_t e : c.extents) {
      parts.push_back(testing::random_tensor(rng, {c.outer, e, c.inner}));
      parts_d.push_back(testing::to_double(parts.back()));
    }
    for (int p = 0; p < P; ++p) {
      pf.push_back(parts[size_t(p)].data<float>());
      pd.push_back(parts_d[size_t(p)].data());
    }
    std::vector<double> want(static_cast<size_t>(c.outer * K * c.inner));
    ref::concat(c.outer, c.inner, P, c.extents.data(), pd.data(), want.data());
    for (int threads : {1, 2}) {
      Tensor whole = testing::poisoned({c.outer, K, c.inner});
      cpu::concat(c.outer, c.inner, P, c.extents.data(), pf.data(), whole.data<float>(), threads);
      EXPECT_EQ(testing::rel_error(whole.to_vector(), want), 0.0);
      // Slicing it back gives the parts; part 0 skipped (null) stays poisoned.
      std::vector<Tensor> back;
      std::vector<float*> out;
      for (int p = 0; p < P; ++p) {
        back.push_back(testing::poisoned({c.outer, c.extents[size_t(p)], c.inner}));
        out.push_back(p == 0 ? nullptr : back.back().data<float>());
      }
      cpu::slice(c.outer, c.inner, P, c.extents.data(), whole.data<float>(), out.data(), threads);
      EXPECT_EQ(testing::count_nan(back[0].to_vector()), back[0].numel());
      for (int p = 1; p < P; ++p)
        EXPECT_EQ(back[size_t(p)].to_vector(), parts[size_t(p)].to_vector());
    }
  }
}

TEST(Concat, TensorLevelAlongEachAxis) {
  Context ctx;
  Random rng(2);
  const Shape whole_shape = {3, 5, 4};
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int64_t K = whole_shape[size_t(axis)];
    Shape s0 = whole_shape, s1 = whole_shape;
    s0[size_t(axis)] = 1;
    s1[size_t(axis)] = K - 1;
    const Tensor a = testing::random_tensor(rng, s0), b = testing::random_tensor(rng, s1);
    Tensor whole = testing::poisoned(whole_shape);
    concat(ctx, {&a, &b}, axis, whole);
    EXPECT_EQ(testing::count_nan(whole.to_vector()), 0);
    Tensor a2 = testing::poisoned(s0), b2 = testing::poisoned(s1);
    slice(ctx, whole, axis, {1, K - 1}, {&a2, &b2});
    EXPECT_EQ(a2.to_vector(), a.to_vector());
    EXPECT_EQ(b2.to_vector(), b.to_vector());
  }
}

// nhwc parts make the nhwc whole whose values are the nchw concat's, along every axis (channels:
// rows of C_p per pixel), for f32 (cpu::) and f64 (ref::); slicing it gives the parts back.
TEST(Concat, NhwcMatchesNchwAlongEachAxis) {
  Context ctx;
  Random rng(3);
  const Shape whole_shape = {2, 7, 3, 5};
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int axis = 0; axis < 4; ++axis) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      Shape s0 = whole_shape, s1 = whole_shape;
      s0[size_t(axis)] = 1;
      s1[size_t(axis)] = whole_shape[size_t(axis)] - 1;
      Tensor a(s0, dtype), b(s1, dtype), whole(whole_shape, dtype);
      for (Tensor* t : {&a, &b}) {
        const std::vector<float> v = testing::random_values(rng, t->numel());
        for (int64_t i = 0; i < t->numel(); ++i) {
          if (dtype == DType::f64) t->data<double>()[i] = v[size_t(i)];
          if (dtype == DType::f32) t->data<float>()[i] = v[size_t(i)];
        }
      }
      concat(ctx, {&a, &b}, axis, whole);
      const Tensor a_nhwc = testing::in_layout(a, Layout::nhwc);
      const Tensor b_nhwc = testing::in_layout(b, Layout::nhwc);
      Tensor whole_nhwc(whole_shape, dtype);
      whole_nhwc.set_layout(Layout::nhwc);
      whole_nhwc.fill(testing::kNaN);
      concat(ctx, {&a_nhwc, &b_nhwc}, axis, whole_nhwc);
      EXPECT_EQ(testing::in_layout(whole_nhwc, Layout::nchw).to_vector(), whole.to_vector());
      Tensor a2(s0, dtype), b2(s1, dtype);
      for (Tensor* t : {&a2, &b2}) {
        t->set_layout(Layout::nhwc);
        t->fill(testing::kNaN);
      }
      slice(ctx, whole_nhwc, axis, {s0[size_t(axis)], s1[size_t(axis)]}, {&a2, &b2});
      EXPECT_EQ(a2.to_vector(), a_nhwc.to_vector());
      EXPECT_EQ(b2.to_vector(), b_nhwc.to_vector());
    }
  }
}

TEST(Concat, Errors) {
  Context ctx;
  Tensor a({2, 3, 4}), b({2, 2, 5}), whole({2, 5, 4});
  a.fill(1.0f);
  b.fill(2.0f);
  try {
    concat(ctx, {&a, &b}, 1, whole);
    ADD_FAILURE() << "mismatched parts accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("part 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(concat(ctx, {&a}, 3, whole), Error);  // no axis 3
  Tensor c({2, 1, 4});
  EXPECT_THROW(slice(ctx, whole, 1, {3, 1}, {&a, &c}), Error);  // 3 + 1 != 5
  EXPECT_THROW(slice(ctx, whole, 1, {3, 2}, {&a, &c}), Error);  // c is not [2, 2, 4]
  Tensor d({2, 3, 4, 5}), e({2, 2, 4, 5}), whole4({2, 5, 4, 5});
  d.fill(1.0f);
  e.fill(2.0f);
  e.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(crema::testing::error_of([&] {
                    concat(ctx, {&d, &e}, 1, whole4);
                  }),
                  "concat: part 1 is f32[2, 2, 4, 5] nhwc on cpu, expected nchw");
}

}  // namespace
}  // namespace crema::kernels
