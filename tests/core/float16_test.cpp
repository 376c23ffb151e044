// core/float16.h: bf16 and f16 conversions. Every 16-bit pattern widens and narrows back to
// itself; float32 values at the rounding boundaries round exactly as PyTorch 1.13 rounds them
// (tests/fixtures/float16_golden.txt, written by make_float16_fixtures.py), bit for bit.
#include "core/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace crema {
namespace {

bool is_bf16_nan(uint16_t b) {
  return (b & 0x7fff) > 0x7f80;
}
bool is_f16_nan(uint16_t h) {
  return (h & 0x7fff) > 0x7c00;
}

TEST(Float16, EveryBf16PatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float wide = bf16_to_f32(uint16_t(b));
    const uint16_t back = f32_to_bf16_bits(wide);
    if (is_bf16_nan(uint16_t(b))) {
      ASSERT_TRUE(std::isnan(wide)) << std::hex << b;
      ASSERT_EQ(back, (b & 0x8000) | 0x7fc0) << std::hex << b;  // quiet, sign kept
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(Float16, EveryF16PatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float wide = f16_to_f32(uint16_t(h));
    const uint16_t back = f32_to_f16_bits(wide);
    if (is_f16_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(wide)) << std::hex << h;
      ASSERT_EQ(back, (h & 0x8000) | 0x7e00) << std::hex << h;  // quiet, sign kept
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// Every f16 between two neighbours: the midpoint rounds to the even one, a float32 ulp either
// side of it to the nearer one (exhaustive over the positive finite f16 values).
TEST(Float16, F16MidpointsRoundToEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const double lo = f16_to_f32(h), hi = f16_to_f32(uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);  // exact: a float32 has 13 more mantissa bits
    ASSERT_EQ(double(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) == 0 ? h : uint16_t(h + 1);
    ASSERT_EQ(f32_to_f16_bits(mid), even) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(-mid), 0x8000 | even) << std::hex << h;
  }
}

// The same for bf16, whose neighbours' midpoint is a float32 with bit 15 set.
TEST(Float16, Bf16MidpointsRoundToEven) {
  for (uint16_t b = 0; b < 0x7f7f; ++b) {
    const float mid = f32_from_bits((uint32_t(b) << 16) | 0x8000u);
    const uint16_t even = (b & 1) == 0 ? b : uint16_t(b + 1);
    ASSERT_EQ(f32_to_bf16_bits(mid), even) << std::hex << b;
    ASSERT_EQ(f32_to_bf16_bits(std::nextafter(mid, 0.0f)), b) << std::hex << b;
    ASSERT_EQ(f32_to_bf16_bits(std::nextafter(mid, std::numeric_limits<float>::infinity())), b + 1)
        << std::hex << b;
    ASSERT_EQ(f32_to_bf16_bits(-mid), 0x8000 | even) << std::hex << b;
  }
}

struct Golden {
  uint32_t f32;
  uint16_t bf16, f16;
};

std::vector<Golden> read_golden() {
  const std::string path = std::string(CREMA_SOURCE_DIR) + "/tests/fixtures/float16_golden.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Golden> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    uint32_t f32 = 0, bf16 = 0, f16 = 0;
    words >> std::hex >> f32 >> bf16 >> f16;
    EXPECT_FALSE(words.fail()) << line;
    rows.push_back({f32, uint16_t(bf16), uint16_t(f16)});
  }
  return rows;
}

// Bit for bit, except a NaN's bits: crema writes the quiet NaN of the input's sign, PyTorch 1.13's
// vectorized CPU path writes 0xffff for every bf16 NaN (its scalar path 0x7fc0).
TEST(Float16, RoundsAsPyTorch) {
  const std::vector<Golden> rows = read_golden();
  ASSERT_GT(rows.size(), 300u);
  int nans = 0;
  for (const Golden& g : rows) {
    const float x = f32_from_bits(g.f32);
    const uint16_t bf16 = f32_to_bf16_bits(x), f16 = f32_to_f16_bits(x);
    if (std::isnan(x)) {
      ++nans;
      EXPECT_TRUE(is_bf16_nan(g.bf16) && is_f16_nan(g.f16)) << std::hex << g.f32;
      EXPECT_EQ(bf16, ((g.f32 >> 16) & 0x8000) | 0x7fc0) << std::hex << g.f32;
      EXPECT_EQ(f16, g.f16) << std::hex << g.f32;  // torch keeps the sign here too
      continue;
    }
    EXPECT_EQ(bf16, g.bf16) << "bf16 of " << std::hex << g.f32;
    EXPECT_EQ(f16, g.f16) << "f16 of " << std::hex << g.f32;
  }
  EXPECT_GE(nans, 8);
}

TEST(Float16, NamedValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-inf), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(3.4028235e38f), 0x7f80);  // float32's max rounds up to infinity
  EXPECT_EQ(f32_to_bf16_bits(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(to_f32(to_bf16(0.5f)), 0.5f);
  EXPECT_EQ(to_f32(to_f16(-2.0f)), -2.0f);
}

TEST(Float16, TensorsOfBf16AndF16) {
  Tensor b({3}, DType::bf16), h({3}, DType::f16);
  EXPECT_EQ(b.nbytes(), 6u);
  b.fill(1.0f / 3.0f);
  h.fill(70000.0f);
  EXPECT_EQ(b.data<bf16_t>()[2].bits, 0x3eab);
  EXPECT_EQ(h.data<f16_t>()[0].bits, 0x7c00);
  EXPECT_EQ(b.to_vector()[1], bf16_to_f32(0x3eab));
  EXPECT_TRUE(std::isinf(h.to_vector()[0]));
  EXPECT_EQ(b.description(), "bf16[3] on cpu");
  EXPECT_THROW(b.data<f16_t>(), std::exception);
  EXPECT_THROW(h.data<float>(), std::exception);
}

}  // namespace
}  // namespace crema
