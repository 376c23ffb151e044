// Shared by the softmax tests (CPU and CUDA; softmax, log-softmax and the cross-entropy): the
// cases, their [outer, C, inner] extents, and one check of a softmax-like op's CPU path.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::softmax_testing {

struct Case {
  Shape shape;
  int axis;
};

struct Extents {
  int64_t outer, C, inner;
};

// The tests' own arithmetic, independent of the dispatch's.
inline Extents extents(const Case& c) {
  const int a = c.axis < 0 ? c.axis + int(c.shape.size()) : c.axis;
  return {shape_count(c.shape, 0, a), c.shape[size_t(a)],
          shape_count(c.shape, a + 1, int(c.shape.size()))};
}

inline std::string describe(const Case& c) {
  return shape_str(c.shape) + " axis " + std::to_string(c.axis);
}

// For the CPU: rows, per-pixel maps (more than one 256-position block), other axes, N = 1, C = 1.
inline const std::vector<Case>& cpu_cases() {
  static const std::vector<Case> cases = {
      {{1, 1}, 1},     {{1, 10}, 1},         {{7, 13}, -1}, {{3, 5, 4, 7}, 1}, {{2, 3, 300}, 1},
      {{64, 1000}, 1}, {{2, 21, 20, 20}, 1}, {{5, 3}, 0},   {{2, 3, 4}, 2},
  };
  return cases;
}

// The Tensor-level functions of a softmax-like op (softmax or log-softmax) and its reference.
struct CpuSoftmaxOp {
  void (*ref_forward)(int64_t outer, int64_t C, int64_t inner, const double* x, double* y);
  void (*ref_backward)(int64_t outer, int64_t C, int64_t inner, const double* y, const double* dy,
                       double* dx);
  void (*forward)(Context& ctx, const Tensor& x, Tensor& y, int axis);
  void (*backward)(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
};

// The CPU path of `op` against ref<double> on every CPU case, outputs poisoned first, on two
// threads; then in place (y over x, dx over dy): the same bits. Inputs uniform in
// [-range, range).
inline void check_cpu_against_reference(const CpuSoftmaxOp& op, uint64_t seed, double range) {
  for (const Case& c : cpu_cases()) {
    SCOPED_TRACE(describe(c));
    const Extents e = extents(c);
    Context ctx(Device::cpu(), 1, 2);
    Random rng(++seed);
    const Tensor x = testing::random_tensor(rng, c.shape, -range, range);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    Tensor y = testing::poisoned(c.shape), dx = testing::poisoned(c.shape);
    op.forward(ctx, x, y, c.axis);
    op.backward(ctx, y, dy, dx, c.axis);
    const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
    std::vector<double> y_ref(xd.size()), dx_ref(xd.size());
    op.ref_forward(e.outer, e.C, e.inner, xd.data(), y_ref.data());
    op.ref_backward(e.outer, e.C, e.inner, y_ref.data(), dyd.data(), dx_ref.data());
    EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-6);
    EXPECT_LT(testing::rel_error(dx.to_vector(), dx_ref), 1e-5);
    Tensor t = x.clone(), g = dy.clone();
    op.forward(ctx, t, t, c.axis);
    op.backward(ctx, t, g, g, c.axis);
    EXPECT_EQ(t.to_vector(), y.to_vector());
    EXPECT_EQ(g.to_vector(), dx.to_vector());
  }
}

}  // namespace crema::kernels::softmax_testing
