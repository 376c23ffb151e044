// Cast, CPU: the host conversions of core/float16.h over OpenMP threads; the reference too.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/float16.h"
#include "kernels/cast/cast.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;

float as_f32(float v) {
  return v;
}
float as_f32(double v) {
  return float(v);
}  // rounded to nearest even
float as_f32(bf16_t v) {
  return to_f32(v);
}
float as_f32(f16_t v) {
  return to_f32(v);
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, double>) {
    return double(as_f32(v));  // From is not double here: exact
  } else if constexpr (std::is_same_v<To, float>) {
    return as_f32(v);
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return to_bf16(as_f32(v));
  } else {
    return to_f16(as_f32(v));
  }
}

template <class From, class To>
void cast_typed(int64_t n, const From* x, To* y, int num_threads) {
  if constexpr (std::is_same_v<From, To>) {
    if (n > 0) std::memcpy(y, x, size_t(n) * sizeof(To));
  } else {
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) y[i] = convert<To>(x[i]);
  }
}

// Calls f(p) with p the pointer `raw` as the element type of `dtype`.
template <class P, class F>
void with_type(DType dtype, P* raw, F f) {
  using Float = std::conditional_t<std::is_const_v<P>, const float, float>;
  using Double = std::conditional_t<std::is_const_v<P>, const double, double>;
  using Bf16 = std::conditional_t<std::is_const_v<P>, const bf16_t, bf16_t>;
  using F16 = std::conditional_t<std::is_const_v<P>, const f16_t, f16_t>;
  switch (dtype) {
    case DType::f32:
      return f(static_cast<Float*>(raw));
    case DType::f64:
      return f(static_cast<Double*>(raw));
    case DType::bf16:
      return f(static_cast<Bf16*>(raw));
    case DType::f16:
      return f(static_cast<F16*>(raw));
  }
}

}  // namespace

void cast(int64_t n, DType from, const void* x, DType to, void* y, int num_threads) {
  with_type(from, x, [&](auto* typed_x) {
    with_type(to, y, [&](auto* typed_y) { cast_typed(n, typed_x, typed_y, num_threads); });
  });
}

}  // namespace crema::kernels::cpu
