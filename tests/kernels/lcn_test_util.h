// Shared by the CPU and CUDA LCN tests: the awkward cases both run, and ref<double>'s results of
// every pass on float inputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/lcn/lcn.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::testing {

inline LcnShape lcn_shape(const Shape& s) {
  return {s[0], s[1], s[2], s[3]};
}

inline std::string lcn_str(const Shape& shape, const LcnParams& p) {
  return shape_str(shape) + " n " + std::to_string(p.local_size) + " alpha " +
         std::to_string(p.alpha) + " beta " + std::to_string(p.beta) + " k " + std::to_string(p.k);
}

// A single element, a window of one, windows wider than the image, odd sizes, a column image.
inline std::vector<std::pair<Shape, LcnParams>> lcn_awkward_cases() {
  return {
      {{1, 1, 1, 1}, {3, 1.0, 0.5, 1.0}},   {{2, 3, 7, 5}, {1, 0.5, 0.75, 2.0}},
      {{2, 3, 7, 5}, {3, 1.0, 0.5, 0.1}},   {{1, 2, 13, 1}, {5, 2.0, 0.75, 1.0}},
      {{3, 1, 4, 9}, {9, 1e-4, 0.75, 2.0}}, {{1, 2, 17, 19}, {7, 1.0, 0.5, 0.5}},
  };
}

// Output blending: beta = 0 on a NaN-poisoned output, beta = 1, alpha = 0.5.
struct LcnBlend {
  double alpha, beta;
};
inline const std::vector<LcnBlend> kLcnBlends = {{1.0, 0.0}, {1.0, 1.0}, {0.5, 0.25}};

// ref<double> of every pass; the outputs start from `prior` (NaN when beta is 0).
struct LcnReference {
  std::vector<double> divnorm_y, divnorm_dx, divnorm_dmeans, lcn_y, lcn_dx;
};
inline LcnReference lcn_reference(const Shape& shape, const LcnParams& p, const LcnBlend& b,
                                  const Tensor& x, const Tensor& means, const Tensor& dy,
                                  const Tensor& prior) {
  const LcnShape s = lcn_shape(shape);
  const std::vector<double> xd = to_double(x), md = to_double(means), gd = to_double(dy),
                            pd = to_double(prior);
  LcnReference r{pd, pd, pd, pd, pd};
  ref::divnorm_forward(s, p, b.alpha, xd.data(), md.data(), b.beta, r.divnorm_y.data());
  ref::divnorm_backward(s, p, b.alpha, xd.data(), md.data(), gd.data(), b.beta, r.divnorm_dx.data(),
                        r.divnorm_dmeans.data());
  ref::lcn_forward(s, p, b.alpha, xd.data(), b.beta, r.lcn_y.data());
  ref::lcn_backward(s, p, b.alpha, xd.data(), gd.data(), b.beta, r.lcn_dx.data());
  return r;
}

// f32 against ref<double>: window sums in double, a pow and a few float roundings per element.
constexpr double kLcnTol = 1e-5;

}  // namespace crema::kernels::testing
