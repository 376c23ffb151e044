#include "core/random.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"

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

std::string Random::state() const {
  // The spare travels as its bit pattern, so it comes back exactly.
  uint64_t spare_bits = 0;
  std::memcpy(&spare_bits, &spare_, sizeof spare_bits);
  std::ostringstream out;
  out << engine_ << ' ' << (has_spare_ ? 1 : 0) << ' ' << spare_bits;
  return out.str();
}

void Random::set_state(const std::string& text) {
  std::istringstream in(text);
  std::mt19937_64 engine;
  int has_spare = 0;
  uint64_t spare_bits = 0;
  in >> engine >> has_spare >> spare_bits;
  if (in.fail() || (has_spare != 0 && has_spare != 1) || !(in >> std::ws).eof()) {
    throw Error("not a random generator state (" + std::to_string(text.size()) + " characters)");
  }
  engine_ = engine;
  has_spare_ = has_spare == 1;
  std::memcpy(&spare_, &spare_bits, sizeof spare_);
}

}  // namespace crema
