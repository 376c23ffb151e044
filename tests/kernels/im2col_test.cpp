#include "kernels/im2col/im2col.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/random.h"
#include "tests/kernels/im2col_test_util.h"

namespace crema::kernels {
namespace {

std::vector<double> random_values(size_t count, Random& random) {
  std::vector<double> values(count);
  for (double& v : values) v = random.uniform(-1.0, 1.0);
  return values;
}

std::vector<float> to_float(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

using testing::geometries;

TEST(Im2colRef, HandComputed) {
  // im [1, 3, 3] = 1..9, a 2x2 window, padding 1, stride 2: P = Q = 2. Row (r, s) holds the
  // pixel at (2p - 1 + r, 2q - 1 + s), 0 outside.
  const Im2colGeometry g{1, 3, 3, 2, 2, /*pad*/ 1, 1, /*stride*/ 2, 2};
  ASSERT_EQ(g.P(), 2);
  ASSERT_EQ(g.Q(), 2);
  const std::vector<double> im = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<double> col(16, std::nan(""));
  ref::im2col(g, im.data(), col.data());
  const std::vector<double> expected = {0, 0, 0, 5,   // (r, s) = (0, 0)
                                        0, 0, 4, 6,   // (0, 1)
                                        0, 2, 0, 8,   // (1, 0)
                                        1, 3, 7, 9};  // (1, 1)
  EXPECT_EQ(col, expected);

  // col2im of all ones counts how often each pixel was read: a 2x2 window at stride 2 reads
  // every pixel exactly once.
  std::vector<double> ones(16, 1.0), counts(9, 0.0);
  ref::col2im(g, ones.data(), counts.data());
  EXPECT_EQ(counts, (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1}));
}

// col2im is the transpose of im2col: <im2col(x), c> == <x, col2im(c)>.
TEST(Im2colRef, Col2imIsTheAdjoint) {
  Random random(3);
  for (const Im2colGeometry& g : geometries()) {
    const std::vector<double> im = random_values(g.C * g.H * g.W, random);
    const std::vector<double> c = random_values(g.col_rows() * g.col_cols(), random);
    std::vector<double> col(c.size()), back(im.size(), 0.0);
    ref::im2col(g, im.data(), col.data());
    ref::col2im(g, c.data(), back.data());
    EXPECT_NEAR(dot(col, c), dot(im, back), 1e-12 * std::sqrt(double(c.size())))
        << "C=" << g.C << " H=" << g.H << " W=" << g.W;
  }
}

TEST(Im2colCpu, MatchesReferenceExactly) {
  Random random(5);
  for (const Im2colGeometry& g : geometries()) {
    const std::vector<float> im = to_float(random_values(g.C * g.H * g.W, random));
    const int64_t rows = g.col_rows(), cols = g.col_cols();
    std::vector<float> expected(rows * cols);
    ref::im2col(g, im.data(), expected.data());

    // Written into the middle of a wider matrix: columns outside [offset, offset + P*Q) keep
    // their poison, the others are all written.
    const int64_t ldcol = cols + 5, offset = 2;
    const float poison = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> col(rows * ldcol, poison);
    cpu::im2col(g, im.data(), col.data() + offset, ldcol);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < ldcol; ++j) {
        const float got = col[i * ldcol + j];
        if (j < offset || j >= offset + cols) {
          ASSERT_TRUE(std::isnan(got)) << "row " << i << " column " << j << " was touched";
        } else {
          ASSERT_EQ(got, expected[i * cols + j - offset]) << "row " << i << " column " << j;
        }
      }
    }
  }
}

TEST(Im2colCpu, Col2imMatchesReference) {
  Random random(7);
  for (const Im2colGeometry& g : geometries()) {
    const int64_t rows = g.col_rows(), cols = g.col_cols(), ldcol = cols + 3;
    const std::vector<double> col_d = random_values(rows * cols, random);
    const std::vector<double> start = random_values(g.C * g.H * g.W, random);
    std::vector<double> expected = start;
    ref::col2im(g, col_d.data(), expected.data());

    std::vector<float> col(rows * ldcol, std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) col[i * ldcol + j] = float(col_d[i * cols + j]);
    }
    std::vector<float> im = to_float(start);  // accumulates onto a non-zero image
    cpu::col2im(g, col.data(), ldcol, im.data());
    for (size_t i = 0; i < im.size(); ++i) {
      ASSERT_NEAR(im[i], expected[i], 1e-5) << "pixel " << i << " C=" << g.C << " H=" << g.H;
    }
  }
}

// Channels are independent: running channel by channel with C = 1 on pointer offsets (how the
// convolution splits work among threads) gives the whole-image result.
TEST(Im2colCpu, ChannelByChannelEqualsWholeImage) {
  Random random(9);
  const Im2colGeometry g = geometries()[2];
  Im2colGeometry one = g;
  one.C = 1;
  const int64_t cols = g.col_cols(), rows_per_channel = g.R * g.S;
  const std::vector<float> im = to_float(random_values(g.C * g.H * g.W, random));
  std::vector<float> whole(g.col_rows() * cols), split(g.col_rows() * cols);
  cpu::im2col(g, im.data(), whole.data(), cols);
  for (int64_t c = 0; c < g.C; ++c) {
    cpu::im2col(one, im.data() + c * g.H * g.W, split.data() + c * rows_per_channel * cols, cols);
  }
  EXPECT_EQ(whole, split);
}

}  // namespace
}  // namespace crema::kernels
