// Random: the seeded random number generator every random choice in crema draws from
// (fillers, shuffling, dropout). Same seed, same numbers, on every platform: the engine is
// std::mt19937_64 (fully specified by the standard) and the distributions are written here,
// because the standard library's distributions differ between implementations.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace crema {

class Random {
 public:
  explicit Random(uint64_t seed = 1) : engine_(seed) {}

  uint64_t next() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return double(engine_() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double low, double high) { return low + (high - low) * uniform01(); }
  // Normal(mean, stddev) by the Box-Muller transform.
  double gaussian(double mean, double stddev);
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  // A new generator whose stream is determined by this one (for workers and sub-tasks).
  Random split() { return Random(next()); }

  // The generator's whole state as text (the engine's standard text form and the Gaussian spare),
  // for checkpoints: set_state(state()) continues the exact same sequence. set_state throws
  // crema::Error for text that state() did not produce.
  std::string state() const;
  void set_state(const std::string& text);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace crema
