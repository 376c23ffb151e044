// Test support: a raw function's analytic gradient against central differences, in double; a
// float32 net's parameter gradient against central differences of its loss. (A whole layer's
// gradient check is check_gradients in layer_harness.h.)
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/net.h"

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

// Every `stride`-th element of param's gradient (as net.backward left it) against central
// differences of net.loss() over net.forward: float32 nets, so steps of 1e-2 within 2e-3.
inline void expect_net_gradient(Net& net, Context& ctx, Param& param, size_t stride = 1,
                                const std::string& what = "") {
  const std::vector<float> analytic = param.grad.to_vector();
  float* data = param.value.data<float>();
  for (size_t i = 0; i < analytic.size(); i += stride) {
    const float saved = data[i];
    data[i] = saved + 1e-2f;
    net.forward(ctx);
    const double plus = net.loss();
    data[i] = saved - 1e-2f;
    net.forward(ctx);
    const double minus = net.loss();
    data[i] = saved;
    EXPECT_NEAR(analytic[i], (plus - minus) / 2e-2, 2e-3) << what << " " << param.name << "[" << i
                                                          << "]";
  }
}

}  // namespace crema::testing
