// Test support: a raw function's analytic gradient against central differences, in double.
// (A whole layer's gradient check is check_gradients in layer_harness.h.)
#pragma once

#include <gtest/gtest.h>

#include <vector>

namespace crema::testing {

// For each i, (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) with eps = 1e-6 must be within 1e-7 of
// grad[i]. f maps the whole vector x to a scalar: a loss, or sum(y * dy) for a map.
template <class F>
void expect_gradient(std::vector<double> x, const std::vector<double>& grad, F f) {
  const double eps = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double plus = f(x);
    x[i] = saved - eps;
    const double minus = f(x);
    x[i] = saved;
    EXPECT_NEAR(grad[i], (plus - minus) / (2 * eps), 1e-7) << "element " << i;
  }
}

}  // namespace crema::testing
