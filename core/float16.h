// The 16-bit floating-point formats of PyTorch and safetensors files, widened to float32 when
// crema reads them (its tensors are f32, and f64 for references).
//
//   f16 (IEEE 754 binary16): sign 1, exponent 5 (bias 15), mantissa 10; exponent 0 holds zero and
//        the subnormals m * 2^-24, exponent 31 infinity and NaN.
//   bf16 (bfloat16): the top 16 bits of a float32, so widening is a shift.
// Both widen exactly: every f16 and bf16 value is a float32 value.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace crema {

inline float bf16_to_f32(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else {
    const float magnitude = float(mantissa) * (1.0f / 16777216.0f);  // zero and subnormals
    std::memcpy(&bits, &magnitude, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// How many tensors of a file were widened to f32, for the one line the log says about it.
struct Widened {
  int64_t f16 = 0, bf16 = 0;
  // "converted 3 f16 tensors to f32", "converted 2 f16 and 5 bf16 tensors to f32", or "".
  std::string text() const {
    std::string what;
    if (f16 > 0) what = std::to_string(f16) + " f16";
    if (bf16 > 0) what += (what.empty() ? "" : " and ") + std::to_string(bf16) + " bf16";
    return what.empty() ? "" : "converted " + what + " tensors to f32";
  }
};

}  // namespace crema
