#include "core/random.h"

#include <cmath>

namespace crema {

double Random::gaussian(double mean, double stddev) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + stddev * spare_;
  }
  // Two uniforms give two independent standard normals; keep the second for the next call.
  double u1 = uniform01();
  while (u1 <= 0.0) u1 = uniform01();
  const double u2 = uniform01();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * M_PI * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return mean + stddev * radius * std::cos(angle);
}

}  // namespace crema
