// What the CPU and CUDA scale tests share: a case's shape [outer, C, inner] and its random inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::scale_test {

struct Case {
  int64_t outer, C, inner;
};

inline std::string str(const Case& c) {
  return std::to_string(c.outer) + "x" + std::to_string(c.C) + "x" + std::to_string(c.inner);
}

// x and dy [outer * C * inner] and the scale s and bias b [C], uniform in [-1, 1) drawn in that
// order from Random(seed), and their values in double for ref::.
struct Inputs {
  Tensor x, dy, s, b;
  std::vector<double> xd, dyd, sd, bd;
};

inline Inputs random_inputs(const Case& c, uint64_t seed) {
  Random rng(seed);
  const int64_t n = c.outer * c.C * c.inner;
  Inputs in;
  in.x = testing::random_tensor(rng, {n});
  in.dy = testing::random_tensor(rng, {n});
  in.s = testing::random_tensor(rng, {c.C});
  in.b = testing::random_tensor(rng, {c.C});
  in.xd = testing::to_double(in.x);
  in.dyd = testing::to_double(in.dy);
  in.sd = testing::to_double(in.s);
  in.bd = testing::to_double(in.b);
  return in;
}

}  // namespace crema::kernels::scale_test
