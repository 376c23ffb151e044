// The 16-bit floating-point formats of crema's bf16 and f16 tensors, of PyTorch and of
// safetensors files: the storage types, and their conversions to and from float32 on the host.
//
//   f16 (IEEE 754 binary16): sign 1, exponent 5 (bias 15), mantissa 10; exponent 0 holds zero and
//        the subnormals m * 2^-24, exponent 31 infinity and NaN. Largest finite 65504.
//   bf16 (bfloat16): the top 16 bits of a float32 (sign 1, exponent 8, mantissa 7), so widening
//        is a shift and the range is float32's.
//
// Widening is exact: every f16 and bf16 value is a float32 value. Narrowing rounds to nearest,
// ties to even, as PyTorch's `.to(torch.bfloat16)` and `.to(torch.float16)` do (and CUDA's
// __float2bfloat16_rn, __float2half_rn): a float32 beyond the largest finite value by half an
// ulp or more becomes infinity (65520 and up for f16), values below 2^-14 become f16 subnormals,
// and a NaN becomes the quiet NaN of its sign with no payload (0x7fc0/0xffc0, 0x7e00/0xfe00), so
// the result never depends on where the conversion ran. (PyTorch 1.13's CPU writes every bf16
// NaN as 0xffff; tests/core/float16_test.cpp compares NaNs as NaNs.)
//
// bf16_t and f16_t are 16-bit structs holding those bits, so that `Tensor::data<bf16_t>()` is a
// typed pointer and a bf16 is never mistaken for an integer. In CUDA code,
// kernels/common/float16_cuda.cuh converts them to __nv_bfloat16 / __half (a reinterpretation of
// the same 16 bits) and to and from float.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace crema {

struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};
static_assert(sizeof(bf16_t) == 2 && sizeof(f16_t) == 2, "16-bit storage types");

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t b) {
  return f32_from_bits(uint32_t(b) << 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
  const float magnitude = float(mantissa) * (1.0f / 16777216.0f);  // zero and subnormals: m 2^-24
  return f32_from_bits(f32_bits(magnitude) | sign);
}

// Round to nearest even at bit 16: adding 0x7fff carries into bit 16 exactly when the dropped
// half exceeds one half, and adding the kept lowest bit too breaks a tie toward even. The carry
// may run into the exponent (rounding up to the next power of two, or to infinity): that is the
// right answer.
inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;                        // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;                       // >= 65520: infinity
  if (magnitude >= 0x38800000u) {                                            // >= 2^-14: normal
    const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);  // as bf16, at bit 13
    return uint16_t(sign | ((rounded - ((127u - 15u) << 23)) >> 13));        // rebias 127 -> 15
  }
  if (magnitude < 0x33000000u) return sign;  // < 2^-25: rounds to zero
  // Subnormal: m 2^(e-150) is (m >> shift) units of 2^-24, shift = 126 - e in 14..24; round the
  // dropped bits to nearest even. Rounding up from 0x3ff gives 0x400, the smallest normal.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;
  uint32_t units = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (units & 1u) != 0)) ++units;
  return uint16_t(sign | units);
}

inline float to_f32(bf16_t b) {
  return bf16_to_f32(b.bits);
}
inline float to_f32(f16_t h) {
  return f16_to_f32(h.bits);
}
inline bf16_t to_bf16(float f) {
  return bf16_t{f32_to_bf16_bits(f)};
}
inline f16_t to_f16(float f) {
  return f16_t{f32_to_f16_bits(f)};
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
