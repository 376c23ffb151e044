// Central differences for the kernel tests: a scalar function of a double vector against its
// analytic gradient (the reference kernels in double). layer_harness.h's check_gradients is the
// same idea for a whole layer, in float with a relative threshold.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace crema::testing {

struct FunctionGradientOptions {
  double step = 1e-6;       // central-difference step
  double tolerance = 1e-7;  // allowed |analytic - numeric|
};

// For every element i of x: grad[i] must be within `tolerance` of
// (f(x + step e_i) - f(x - step e_i)) / (2 step). Reports failures through GoogleTest, naming the
// element.
template <class F>
void expect_gradient(std::vector<double> x, const std::vector<double>& grad, F f,
                     const FunctionGradientOptions& options = {}) {
  ASSERT_EQ(x.size(), grad.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + options.step;
    const double plus = f(x);
    x[i] = saved - options.step;
    const double minus = f(x);
    x[i] = saved;
    EXPECT_NEAR(grad[i], (plus - minus) / (2 * options.step), options.tolerance) << "element " << i;
  }
}

}  // namespace crema::testing
