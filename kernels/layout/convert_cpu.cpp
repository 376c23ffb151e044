// convert on the CPU, also the reference: every element goes through the host conversions of
// core/float16.h as kernels::cast does (widened exactly, rounded once to nearest even; an f64
// narrowed to f32 first), the transpose in 32 x 32 blocks spread over OpenMP threads.
#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "core/float16.h"
#include "kernels/layout/layout.h"

namespace crema::kernels::cpu {
namespace {

// Through float unless one side is f64 (float keeps every bit of the other types, NaN payloads
// included, as the GPU does); through double when one is.
inline float widen(float v) {
  return v;
}
inline double widen(double v) {
  return v;
}
inline float widen(bf16_t v) {
  return to_f32(v);
}
inline float widen(f16_t v) {
  return to_f32(v);
}

template <class T>
T narrow(float v);
template <>
bf16_t narrow<bf16_t>(float v) {
  return to_bf16(v);
}
template <>
f16_t narrow<f16_t>(float v) {
  return to_f16(v);
}
template <class Out, class V>
Out store(V v) {
  if constexpr (std::is_same_v<Out, double>) {
    return double(v);
  } else {
    return narrow<Out>(float(v));  // an f64 is rounded to f32 first, as kernels::cast does
  }
}

template <class In, class Out>
void convert_typed(int64_t B, int64_t R, int64_t S, const In* x, Out* y, bool accumulate,
                   int num_threads) {
  constexpr int64_t kBlock = 32;
  const int64_t blocks_r = (R + kBlock - 1) / kBlock, blocks_s = (S + kBlock - 1) / kBlock;
  const int64_t blocks = B * blocks_r * blocks_s;
  const bool transpose = R > 1 && S > 1;
#pragma omp parallel for num_threads(num_threads) schedule(static)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t b = t / (blocks_r * blocks_s), rest = t % (blocks_r * blocks_s);
    const int64_t r0 = (rest / blocks_s) * kBlock, s0 = (rest % blocks_s) * kBlock;
    const In* xb = x + b * R * S;
    Out* yb = y + b * R * S;
    for (int64_t r = r0; r < std::min(R, r0 + kBlock); ++r) {
      for (int64_t s = s0; s < std::min(S, s0 + kBlock); ++s) {
        const int64_t out = transpose ? s * R + r : r * S + s;  // R or S of 1: the same index
        const auto v = widen(xb[r * S + s]);
        if constexpr (std::is_same_v<Out, float>) {
          yb[out] = accumulate ? yb[out] + float(v) : float(v);
        } else {
          yb[out] = store<Out>(v);
        }
      }
    }
  }
}

template <class In>
void convert_from(int64_t B, int64_t R, int64_t S, const In* x, DType to, void* y, bool accumulate,
                  int num_threads) {
  switch (to) {
    case DType::f32:
      return convert_typed(B, R, S, x, static_cast<float*>(y), accumulate, num_threads);
    case DType::f64:
      return convert_typed(B, R, S, x, static_cast<double*>(y), false, num_threads);
    case DType::bf16:
      return convert_typed(B, R, S, x, static_cast<bf16_t*>(y), false, num_threads);
    case DType::f16:
      return convert_typed(B, R, S, x, static_cast<f16_t*>(y), false, num_threads);
  }
}

}  // namespace

void convert(int64_t B, int64_t R, int64_t S, DType from, const void* x, DType to, void* y,
             bool accumulate, int num_threads) {
  CREMA_CHECK(!accumulate || to == DType::f32, "cpu::convert accumulates into f32 only");
  switch (from) {
    case DType::f32:
      return convert_from(B, R, S, static_cast<const float*>(x), to, y, accumulate, num_threads);
    case DType::f64:
      return convert_from(B, R, S, static_cast<const double*>(x), to, y, accumulate, num_threads);
    case DType::bf16:
      return convert_from(B, R, S, static_cast<const bf16_t*>(x), to, y, accumulate, num_threads);
    case DType::f16:
      return convert_from(B, R, S, static_cast<const f16_t*>(x), to, y, accumulate, num_threads);
  }
}

}  // namespace crema::kernels::cpu
