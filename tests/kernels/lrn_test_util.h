// Shared by the CPU and CUDA LRN tests: parameters, the awkward cases both run, and the
// reference's outputs in double.
#pragma once

#include <utility>
#include <vector>

#include "kernels/lrn/lrn.h"

namespace crema::kernels::testing {

inline LrnParams lrn_params(LrnRegion region, int64_t size, float alpha, float beta, float k) {
  return {region, size, alpha, beta, k};
}

inline LrnShape lrn_shape(const Shape& s) {
  return {s[0], s[1], s[2], s[3]};
}

// Windows wider than the tensor, a window of one, a single element.
inline std::vector<std::pair<Shape, LrnParams>> lrn_awkward_cases() {
  const LrnRegion across = LrnRegion::across_channels, within = LrnRegion::within_channel;
  return {
      {{1, 1, 1, 1}, lrn_params(across, 5, 1.0f, 0.75f, 1.0f)},  // a single element
      {{1, 1, 1, 1}, lrn_params(within, 3, 1.0f, 0.75f, 1.0f)},
      {{2, 3, 5, 7}, lrn_params(across, 7, 2.0f, 0.75f, 1.0f)},  // window wider than C
      {{2, 3, 5, 7}, lrn_params(across, 1, 0.5f, 0.5f, 2.0f)},   // a window of one
      {{1, 6, 4, 3}, lrn_params(within, 7, 1.5f, 0.6f, 1.0f)},   // window wider than H, W
      {{3, 2, 6, 5}, lrn_params(within, 3, 1e-2f, 0.75f, 1.0f)},
  };
}

// ref<double>'s forward and backward on x and dy.
struct LrnReference {
  std::vector<double> y, scale, dx;
};
inline LrnReference lrn_reference(const Shape& shape, const LrnParams& p,
                                  const std::vector<double>& x, const std::vector<double>& dy) {
  const LrnShape s = lrn_shape(shape);
  LrnReference r{std::vector<double>(x.size()), std::vector<double>(x.size()),
                 std::vector<double>(x.size())};
  ref::lrn_forward(s, p, x.data(), r.y.data(), r.scale.data());
  ref::lrn_backward(s, p, x.data(), r.y.data(), r.scale.data(), dy.data(), r.dx.data());
  return r;
}

}  // namespace crema::kernels::testing
