#include "data/transform.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/image_ops.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::error_of;

// A 2 x 2 x 3 sample whose values differ everywhere: x[c, h, w] = 1 + 6c + 3h + w + 0.5.
Image sample_2x2x3() {
  Image x;
  x.reset({2, 2, 3});
  for (int i = 0; i < 12; ++i) x.pixels[size_t(i)] = 1.5f + float(i);
  return x;
}

// 1 x 3 x 4, x[h, w] = 10 h + w + 1.
Image sample_3x4() {
  Image x;
  x.shape = {1, 3, 4};
  x.pixels = {1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24};
  return x;
}

// Applies `spec` to `x` with a generator seeded by `seed`, checking output_shape on the way.
Image apply(const TransformSpec& spec, Image x, uint64_t seed = 1) {
  const auto transform = make_transform(spec);
  const Shape expected = transform->output_shape(x.shape);
  Random random(seed);
  transform->apply(x, random);
  EXPECT_EQ(x.shape, expected) << transform->description();
  EXPECT_EQ(x.pixels.size(), size_t(shape_numel(x.shape)));
  return x;
}

TEST(TransformScale, MultipliesEveryPixel) {
  const Image x = apply({"scale", {0.00390625f}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x.pixels[size_t(i)], (1.5f + float(i)) * 0.00390625f);
  EXPECT_EQ(make_transform({"scale", {0.00390625f}})->description(), "scale(0.00390625)");
  EXPECT_EQ(apply({"scale", {}, {{"factor", {2.0f}}}}, sample_2x2x3()).pixels[0], 3.0f);
}

TEST(TransformMean, ScalarAndPerChannel) {
  Image x = apply({"mean", {0.25f}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x.pixels[size_t(i)], 1.25f + float(i));
  x = apply({"mean", {1.0f, 10.0f}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(x.pixels[size_t(i)], 1.5f + float(i) - (i < 6 ? 1.0f : 10.0f));
  }
}

TEST(TransformStd, ScalarAndPerChannel) {
  Image x = apply({"std", {2.0f}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x.pixels[size_t(i)], (1.5f + float(i)) / 2.0f);
  x = apply({"std", {0.5f, 4.0f}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(x.pixels[size_t(i)], (1.5f + float(i)) / (i < 6 ? 0.5f : 4.0f));
  }
}

TEST(TransformNormalize, PerChannelMeanThenStd) {
  const Image x =
      apply({"normalize", {}, {{"mean", {1.0f, 2.0f}}, {"std", {0.5f, 4.0f}}}}, sample_2x2x3());
  for (int i = 0; i < 12; ++i) {
    const float expected =
        i < 6 ? (1.5f + float(i) - 1.0f) / 0.5f : (1.5f + float(i) - 2.0f) / 4.0f;
    EXPECT_EQ(x.pixels[size_t(i)], expected) << i;
  }
  EXPECT_CONTAINS(error_of([] {
                    make_transform({"normalize", {}, {{"mean", {0.5f}}}});
                  }),
                  "needs 'std'");
  EXPECT_CONTAINS(error_of([] { make_transform({"normalize", {0.5f}}); }), "options only");
}

TransformSpec preset(const std::string& kind, const std::string& name) {
  TransformSpec spec(kind);
  spec.preset = name;
  return spec;
}

// torchvision's ImageNet mean and std, on [0, 1] pixels (imagenet) or on 0..255 (imagenet_255).
TEST(TransformNormalize, ImageNetPresets) {
  Image rgb;
  rgb.reset({3, 1, 2});
  rgb.pixels = {0.0f, 1.0f, 0.5f, 0.25f, 0.75f, 0.125f};
  const Image x = apply(preset("normalize", "imagenet"), rgb);
  const float mean[] = {0.485f, 0.456f, 0.406f}, std[] = {0.229f, 0.224f, 0.225f};
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(x.pixels[size_t(i)], (rgb.pixels[size_t(i)] - mean[i / 2]) / std[i / 2]) << i;
  }
  for (float& v : rgb.pixels) v *= 255.0f;
  const Image y = apply(preset("normalize", "imagenet_255"), rgb);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y.pixels[size_t(i)], x.pixels[size_t(i)], 1e-5) << i;

  EXPECT_CONTAINS(error_of([] { make_transform(preset("normalize", "imagenett")); }),
                  "'imagenett' is not a value or a preset (normalize's presets: imagenet, "
                  "imagenet_255)");
  EXPECT_CONTAINS(error_of([] { make_transform(preset("scale", "imagenet")); }),
                  "only normalize takes a preset name");
  Image gray;
  gray.reset({1, 2, 2});
  EXPECT_CONTAINS(
      error_of([&] { make_transform(preset("normalize", "imagenet"))->output_shape(gray.shape); }),
      "has 3 values for samples of shape [1, 2, 2] with 1 channels");
}

TEST(TransformResize, ShorterSideAndExactSize) {
  Image wide;
  wide.reset({1, 30, 40});
  for (size_t i = 0; i < wide.pixels.size(); ++i) wide.pixels[i] = float(i % 7);
  EXPECT_EQ(apply({"resize", {15.0f}}, wide).shape, (Shape{1, 15, 20}));
  EXPECT_EQ(apply({"resize", {12.0f, 9.0f}}, wide).shape, (Shape{1, 12, 9}));
  EXPECT_EQ(make_transform({"resize", {15.0f}})->output_shape({3, 40, 30}), (Shape{3, 20, 15}));
  // Values: the triangle filter (tests/data/image_test.cpp works them out).
  Image ramp;
  ramp.shape = {1, 1, 4};
  ramp.pixels = {0, 10, 20, 30};
  const Image half = apply({"resize", {1.0f, 2.0f}}, ramp);
  EXPECT_NEAR(half.pixels[0], 50.0f / 7.0f, 1e-4);
  EXPECT_NEAR(half.pixels[1], 160.0f / 7.0f, 1e-4);
}

// interpolation and antialias are words ({resize: {size: 8, interpolation: bicubic}}); the
// values are data/resample.h's (tests/data/resample_test.cpp checks them against torchvision).
TEST(TransformResize, InterpolationAndAntialiasOptions) {
  Image wide;
  wide.reset({2, 30, 40});
  for (size_t i = 0; i < wide.pixels.size(); ++i) wide.pixels[i] = float((i * 37) % 251);
  for (const char* interpolation : {"nearest", "bilinear", "bicubic"}) {
    for (const char* antialias : {"true", "false"}) {
      TransformSpec spec("resize", {9.0f, 13.0f});
      spec.words = {{"interpolation", interpolation}, {"antialias", antialias}};
      const ResizeMode mode{parse_interpolation(interpolation), std::string(antialias) == "true"};
      Image expected;
      resize(wide, 9, 13, expected, mode);
      EXPECT_EQ(apply(spec, wide).pixels, expected.pixels) << interpolation << " " << antialias;
      spec.kind = "random_resized_crop";
      EXPECT_CONTAINS(make_transform(spec)->description(), interpolation);
    }
  }
  TransformSpec bad("resize", {9.0f});
  bad.words = {{"interpolation", "lanczos"}};
  EXPECT_CONTAINS(error_of([&] { make_transform(bad); }),
                  "transform resize: 'interpolation' must be one of nearest, bilinear, bicubic, "
                  "got 'lanczos'");
  bad.words = {{"antialias", "maybe"}};
  EXPECT_CONTAINS(error_of([&] { make_transform(bad); }), "'antialias' must be one of true, false");
  bad.words = {};
  bad.options = {{"interpolation", {2.0f}}};
  EXPECT_CONTAINS(error_of([&] { make_transform(bad); }), "'interpolation' takes a word");
  bad.options = {};
  bad.words = {{"size", "big"}};
  EXPECT_CONTAINS(error_of([&] { make_transform(bad); }), "'size' takes numbers, got 'big'");
}

TEST(TransformCenterCrop, TakesTheMiddle) {
  // 3 x 4 -> 1 x 2: top round(1) = 1, left round(1) = 1.
  EXPECT_EQ(apply({"center_crop", {1.0f, 2.0f}}, sample_3x4()).pixels,
            (std::vector<float>{12, 13}));
  // 3 x 4 -> 2 x 2: top round(0.5) = 0 (half to even), left 1.
  EXPECT_EQ(apply({"center_crop", {2.0f}}, sample_3x4()).pixels,
            (std::vector<float>{2, 3, 12, 13}));
  // Larger than the image: centred on zeros.
  EXPECT_EQ(
      apply({"center_crop", {5.0f, 4.0f}}, sample_3x4()).pixels,
      (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24, 0, 0, 0, 0}));
}

TEST(TransformRandomCrop, WindowOfThePaddedImage) {
  // With padding 1 the 3 x 4 image is 5 x 6; a 3 x 4 window starts at top in 0..2, left in
  // 0..2 of the padded image, drawn in that order from the sample's generator.
  std::set<std::pair<int, int>> seen;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Image x = apply({"random_crop", {}, {{"size", {3.0f, 4.0f}}, {"padding", {1.0f}}}},
                          sample_3x4(), seed);
    Random random(seed);
    const int top = int(random.below(3)) - 1, left = int(random.below(3)) - 1;
    seen.insert({top, left});
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 4; ++w) {
        const int y = top + h, z = left + w;
        const float expected = (y < 0 || y > 2 || z < 0 || z > 3) ? 0.0f : float(10 * y + z + 1);
        EXPECT_EQ(x.pixels[size_t(h * 4 + w)], expected) << seed << " " << h << " " << w;
      }
    }
  }
  EXPECT_EQ(seen.size(), 9u);  // every placement occurs
  EXPECT_CONTAINS(error_of([] {
                    make_transform({"random_crop", {5.0f}})->output_shape({1, 3, 4});
                  }),
                  "larger than");
}

TEST(TransformRandomResizedCrop, FallbackIsTheCentredCrop) {
  // Scale 1 at ratio 1 never fits a 2 x 5 image (a 3.16 square rounds to 3 rows): the centred
  // 2 x 2 (left (5 - 2) // 2 = 1), then resized to 2 x 2, a copy.
  Image x;
  x.shape = {1, 2, 5};
  x.pixels = {1, 2, 3, 4, 5, 11, 12, 13, 14, 15};
  x = apply({"random_resized_crop",
             {},
             {{"size", {2.0f}}, {"scale", {1.0f, 1.0f}}, {"ratio", {1.0f, 1.0f}}}},
            x);
  EXPECT_EQ(x.pixels, (std::vector<float>{2, 3, 12, 13}));
  // Random boxes always give the requested size.
  Image big;
  big.reset({3, 20, 30});
  for (size_t i = 0; i < big.pixels.size(); ++i) big.pixels[i] = float(i % 251);
  for (uint64_t seed = 1; seed < 20; ++seed) {
    EXPECT_EQ(apply({"random_resized_crop", {8.0f, 6.0f}}, big, seed).shape, (Shape{3, 8, 6}));
  }
  EXPECT_CONTAINS(
      error_of([] {
        make_transform({"random_resized_crop", {}, {{"size", {8.0f}}, {"scale", {0.5f, 2.0f}}}});
      }),
      "scale");
}

TEST(TransformHorizontalFlip, ByProbability) {
  const std::vector<float> mirrored = {4, 3, 2, 1, 14, 13, 12, 11, 24, 23, 22, 21};
  EXPECT_EQ(apply({"horizontal_flip", {1.0f}}, sample_3x4()).pixels, mirrored);
  EXPECT_EQ(apply({"horizontal_flip", {0.0f}}, sample_3x4()).pixels, sample_3x4().pixels);
  int flipped = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const Image x = apply({"horizontal_flip", {}}, sample_3x4(), seed);  // p = 0.5
    Random random(seed);
    const bool expected = random.uniform01() < 0.5;
    EXPECT_EQ(x.pixels == mirrored, expected) << seed;
    flipped += expected;
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
}

TEST(TransformSpecs, UnknownKindListsKnownOnes) {
  const std::string message = error_of([] { make_transform({"mirror", {}}); });
  EXPECT_CONTAINS(message, "'mirror'");
  EXPECT_CONTAINS(message, "scale, mean, std, normalize, resize, center_crop");
}

TEST(TransformSpecs, BadValuesAreErrors) {
  EXPECT_THROW(make_transform({"scale", {}}), Error);
  EXPECT_THROW(make_transform({"scale", {1.0f, 2.0f}}), Error);
  EXPECT_THROW(make_transform({"mean", {}}), Error);
  EXPECT_THROW(make_transform({"std", {1.0f, 0.0f}}), Error);
  EXPECT_THROW(make_transform({"std", {-1.0f}}), Error);
  EXPECT_THROW(make_transform({"resize", {0.0f}}), Error);
  EXPECT_THROW(make_transform({"resize", {2.5f}}), Error);
  EXPECT_THROW(make_transform({"center_crop", {1.0f, 2.0f, 3.0f}}), Error);
  EXPECT_THROW(make_transform({"random_crop", {}, {{"size", {4.0f}}, {"padding", {-1.0f}}}}),
               Error);
  EXPECT_THROW(make_transform({"horizontal_flip", {1.5f}}), Error);
  EXPECT_CONTAINS(error_of([] {
                    make_transform({"random_crop", {}, {{"pad", {4.0f}}}});
                  }),
                  "unknown option 'pad' (known: size, padding)");
  EXPECT_CONTAINS(error_of([] {
                    make_transform({"random_crop", {4.0f}, {{"size", {4.0f}}}});
                  }),
                  "given twice");
  // Three means for a one-channel image; a crop of a sample that is not C x H x W.
  auto three = make_transform({"mean", {0.1f, 0.2f, 0.3f}});
  EXPECT_THROW(three->output_shape({1, 28, 28}), Error);
  EXPECT_NO_THROW(three->output_shape({3, 28, 28}));
  EXPECT_CONTAINS(error_of([] {
                    make_transform({"center_crop", {2.0f}})->output_shape({28, 28});
                  }),
                  "C x H x W");
}

}  // namespace
}  // namespace crema::data
