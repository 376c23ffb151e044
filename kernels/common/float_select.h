// `x > 0 ? a : b`, exactly, decided on the bits of x with integer operations, so that CPU loops
// vectorize it. Why: GCC (12, default -ftrapping-math) will not turn `x > 0 ? x : s * x` into a
// vector compare-and-select, because a float compare may raise an exception and the multiply,
// needed on one side only, would have to run speculatively; it keeps a branch per element, which
// mispredicts on every other element of random-signed data. Integer operations raise nothing and
// both candidates are computed unconditionally: the loop then vectorizes (about 50x faster,
// kernels/activations/README.md). Used by ReLU (kernels/activations/relu_cpu.cpp) and the fused
// batch norm + ReLU (kernels/batch_norm/batch_norm_cpu.cpp).
#pragma once

#include <cstdint>
#include <cstring>

namespace crema::kernels::cpu {

inline int32_t bits_of(float v) {
  int32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
inline float float_of(int32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// Read as a signed integer, the floats greater than zero (+inf included) are the bit patterns in
// (0, 0x7f800000]; zero, negative numbers (sign bit set, so negative as integers) and NaN (above
// 0x7f800000) are not.
inline float if_positive(float x, float a, float b) {
  const int32_t bx = bits_of(x);
  const int32_t mask = -int32_t((bx > 0) & (bx <= 0x7f800000));
  return float_of((bits_of(a) & mask) | (bits_of(b) & ~mask));
}

}  // namespace crema::kernels::cpu
