// Helpers shared by the kernel tests: random and poisoned tensors, and the relative error of a
// float result against a double-precision reference.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace crema::kernels::testing {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline std::vector<float> random_values(Random& rng, int64_t n, double low = -1.0,
                                        double high = 1.0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(rng.uniform(low, high));
  return v;
}

inline Tensor random_tensor(Random& rng, const Shape& shape, double low = -1.0, double high = 1.0) {
  return Tensor::from_vector(shape, random_values(rng, shape_numel(shape), low, high));
}

// A tensor full of NaN: a kernel that leaves any element unwritten leaves a NaN behind.
inline Tensor poisoned(const Shape& shape) {
  Tensor t(shape);
  t.fill(kNaN);
  return t;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}
inline std::vector<double> to_double(const Tensor& t) {
  return to_double(t.to_vector());
}

inline int64_t count_nan(const std::vector<float>& v) {
  int64_t n = 0;
  for (float x : v) n += std::isnan(x) ? 1 : 0;
  return n;
}

// ||out - ref|| / ||ref|| (the plain norm when ref is zero); NaN anywhere in out gives NaN, which
// fails every EXPECT_LT.
inline double rel_error(const std::vector<float>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    diff += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace crema::kernels::testing
