#include "data/transform.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace crema::data {
namespace {

// A 2 x 2 x 3 sample whose values differ everywhere: x[c, h, w] = 1 + 6c + 3h + w + 0.5.
std::vector<float> sample_2x2x3() {
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[size_t(i)] = 1.5f + float(i);
  return x;
}

TEST(TransformScale, MultipliesEveryPixel) {
  const Shape shape = {2, 2, 3};
  std::vector<float> x = sample_2x2x3();
  make_transform({"scale", {0.00390625f}})->apply(x.data(), shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x[size_t(i)], (1.5f + float(i)) * 0.00390625f);
  EXPECT_EQ(make_transform({"scale", {0.00390625f}})->description(), "scale(0.00390625)");
}

TEST(TransformMean, ScalarAndPerChannel) {
  const Shape shape = {2, 2, 3};
  std::vector<float> x = sample_2x2x3();
  make_transform({"mean", {0.25f}})->apply(x.data(), shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x[size_t(i)], 1.25f + float(i));

  x = sample_2x2x3();
  auto per_channel = make_transform({"mean", {1.0f, 10.0f}});
  per_channel->check(shape);
  per_channel->apply(x.data(), shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x[size_t(i)], 1.5f + float(i) - (i < 6 ? 1.0f : 10.0f));
}

TEST(TransformStd, ScalarAndPerChannel) {
  const Shape shape = {2, 2, 3};
  std::vector<float> x = sample_2x2x3();
  make_transform({"std", {2.0f}})->apply(x.data(), shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x[size_t(i)], (1.5f + float(i)) / 2.0f);

  x = sample_2x2x3();
  make_transform({"std", {0.5f, 4.0f}})->apply(x.data(), shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x[size_t(i)], (1.5f + float(i)) / (i < 6 ? 0.5f : 4.0f));
}

TEST(TransformSpecs, UnknownKindListsKnownOnes) {
  try {
    make_transform({"mirror", {}});
    FAIL() << "no error for an unknown kind";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'mirror'"), std::string::npos) << message;
    EXPECT_NE(message.find("scale, mean, std"), std::string::npos) << message;
  }
}

TEST(TransformSpecs, BadValuesAreErrors) {
  EXPECT_THROW(make_transform({"scale", {}}), Error);
  EXPECT_THROW(make_transform({"scale", {1.0f, 2.0f}}), Error);
  EXPECT_THROW(make_transform({"mean", {}}), Error);
  EXPECT_THROW(make_transform({"std", {1.0f, 0.0f}}), Error);
  EXPECT_THROW(make_transform({"std", {-1.0f}}), Error);
  // Three means for a one-channel image.
  auto three = make_transform({"mean", {0.1f, 0.2f, 0.3f}});
  EXPECT_THROW(three->check({1, 28, 28}), Error);
  EXPECT_NO_THROW(three->check({3, 28, 28}));
}

}  // namespace
}  // namespace crema::data
