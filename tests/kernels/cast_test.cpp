// kernels::cast on the CPU: every pair of f32, f64, bf16, f16 against the host conversions of
// core/float16.h, bit for bit, on values of every kind (normal, subnormal, zero, infinite, NaN,
// beyond f16's range), and the checks of the Tensor-level call.
#include "kernels/cast/cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/float16.h"
#include "core/random.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

const DType kAll[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

// float32 values of every kind: random bit patterns (all exponents), specials, f16's edges.
std::vector<float> awkward_values(int64_t n) {
  Random rng(21);
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::nanf(""), -std::nanf(""), 65504.0f, 65520.0f,
                  0x1p-24f, 0x1p-25f, 1.0f / 3.0f, 3.4028235e38f, 1e-40f}) {
    v.push_back(s);
  }
  while (int64_t(v.size()) < n) v.push_back(f32_from_bits(uint32_t(rng.next())));
  return v;
}

// The bits of element i of `t`, whatever its dtype, and what the host conversions make of `x`.
uint64_t bits_at(const Tensor& t, int64_t i) {
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(t.raw()) + i * dtype_size(t.dtype()),
              dtype_size(t.dtype()));
  return bits;
}

uint64_t expected_bits(double x, DType to) {
  uint64_t bits = 0;
  switch (to) {
    case DType::f32:
      return f32_bits(float(x));
    case DType::f64:
      std::memcpy(&bits, &x, 8);
      return bits;
    case DType::bf16:
      return f32_to_bf16_bits(float(x));
    case DType::f16:
      return f32_to_f16_bits(float(x));
  }
  return bits;
}

TEST(Cast, EveryPairMatchesTheHostConversions) {
  Context ctx;
  const int64_t n = 40000;  // above the parallel threshold
  const std::vector<float> values = awkward_values(n);
  for (DType from : kAll) {
    // The source in `from`: the f32 values converted once by the host functions.
    Tensor x({n}, from);
    for (int64_t i = 0; i < n; ++i) {
      const float v = values[size_t(i)];
      switch (from) {
        case DType::f32:
          x.data<float>()[i] = v;
          break;
        case DType::f64:
          x.data<double>()[i] = double(v) * (1.0 + 0x1p-40);  // not an f32 value
          break;
        case DType::bf16:
          x.data<bf16_t>()[i] = to_bf16(v);
          break;
        case DType::f16:
          x.data<f16_t>()[i] = to_f16(v);
          break;
      }
    }
    const std::vector<float> widened = x.to_vector();
    for (DType to : kAll) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      Tensor y = cast_to(ctx, x, to);
      ASSERT_EQ(y.dtype(), to);
      ASSERT_EQ(y.shape(), x.shape());
      const std::vector<float> y_widened = y.to_vector();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        // From f64, the value itself (rounded to f32 on the way to a 16-bit type, as documented);
        // from the others, their exact widening.
        const double source = from == DType::f64 ? x.data<double>()[i] : double(widened[size_t(i)]);
        const uint64_t want = from == to ? bits_at(x, i) : expected_bits(source, to);
        // A same-dtype cast copies NaN payloads; a conversion writes the quiet NaN of the sign
        // (expected_bits), so NaN bits are compared exactly either way.
        if (bits_at(y, i) != want) ++wrong;
        if (std::isnan(widened[size_t(i)]) != std::isnan(y_widened[size_t(i)])) ++wrong;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(Cast, RoundsOnceToNearestEven) {
  Context ctx;
  Tensor x = Tensor::from_vector({4}, {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 65519.0f, 70000.0f});
  const Tensor b = cast_to(ctx, x, DType::bf16), h = cast_to(ctx, x, DType::f16);
  EXPECT_EQ(b.to_vector()[0], 1.0f);            // a tie, to the even 1.0
  EXPECT_EQ(b.to_vector()[1], 1.0f + 0x1p-6f);  // a tie, to the even 1 + 2^-6
  EXPECT_EQ(h.to_vector()[2], 65504.0f);        // below 65520: the largest finite f16
  EXPECT_TRUE(std::isinf(h.to_vector()[3]));    // beyond: infinity
  const Tensor back = cast_to(ctx, h, DType::f32);
  EXPECT_EQ(back.to_vector()[2], 65504.0f);
}

TEST(Cast, RefusesMismatchedShapes) {
  Context ctx;
  const Tensor x({2, 3}, DType::f32);
  Tensor y({3, 2}, DType::bf16);
  EXPECT_CONTAINS(crema::testing::error_of([&] { cast(ctx, x, y); }),
                  "cast: y is bf16[3, 2] on cpu, expected bf16[2, 3] on cpu");
}

}  // namespace
}  // namespace crema::kernels
