// The random augmentations of data/augment.h as make_transform builds them: each wired to the
// operation tested against torchvision in augment_ops_test.cpp (a range of one value gives
// exactly that operation), parameter draws inside their ranges, the same seed giving the same
// image, probability 0 the identity, and bad options refused naming the option.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/affine_ops.h"
#include "data/augment.h"
#include "data/color_ops.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/support/error_text.h"

namespace crema::data {
namespace {

using crema::testing::error_of;

// C x H x W, values in [0.05, 0.95] that differ from pixel to pixel.
Image sample(int64_t channels, int64_t height, int64_t width) {
  Image x;
  x.reset({channels, height, width});
  for (size_t i = 0; i < x.pixels.size(); ++i) {
    x.pixels[i] = 0.05f + 0.9f * float((i * 37) % 101) / 100.0f;
  }
  return x;
}

Image apply(const TransformSpec& spec, Image x, uint64_t seed = 1) {
  const auto transform = make_transform(spec);
  const Shape expected = transform->output_shape(x.shape);
  Random random(seed);
  transform->apply(x, random);
  EXPECT_EQ(x.shape, expected) << transform->description();
  return x;
}

TransformSpec spec(const std::string& kind, std::map<std::string, std::vector<float>> options,
                   std::map<std::string, std::string> words = {}) {
  TransformSpec s(kind, {}, std::move(options));
  s.words = std::move(words);
  return s;
}

TEST(ColorJitter, OneValueRangesAreTheOperations) {
  // Brightness and contrast commute with nothing else here: one at a time.
  Image expected = sample(3, 5, 6);
  adjust_brightness(expected, 0.7f);
  EXPECT_EQ(apply(spec("color_jitter", {{"brightness", {0.7f, 0.7f}}}), sample(3, 5, 6)).pixels,
            expected.pixels);
  expected = sample(3, 5, 6);
  adjust_hue(expected, -0.2f);
  EXPECT_EQ(apply(spec("color_jitter", {{"hue", {-0.2f, -0.2f}}}), sample(3, 5, 6)).pixels,
            expected.pixels);
  // All four: some order of the four operations.
  const Image got = apply(spec("color_jitter", {{"brightness", {0.8f, 0.8f}},
                                                {"contrast", {1.3f, 1.3f}},
                                                {"saturation", {0.5f, 0.5f}},
                                                {"hue", {0.1f, 0.1f}}}),
                          sample(3, 5, 6), 7);
  bool found = false;
  std::vector<int> order = {0, 1, 2, 3};
  do {
    Image x = sample(3, 5, 6);
    for (int k : order) {
      if (k == 0) adjust_brightness(x, 0.8f);
      if (k == 1) adjust_contrast(x, 1.3f);
      if (k == 2) adjust_saturation(x, 0.5f);
      if (k == 3) adjust_hue(x, 0.1f);
    }
    found = found || x.pixels == got.pixels;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_TRUE(found);
}

TEST(ColorJitter, FactorsDrawnInRangeAndOrdersVary) {
  // brightness 0.3: a factor in [0.7, 1.3], the ratio out / in of an unclamped pixel.
  const Image x = sample(3, 4, 4);
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const Image y = apply(spec("color_jitter", {{"brightness", {0.3f}}}), x, seed);
    const float factor = y.pixels[0] / x.pixels[0];
    EXPECT_GE(factor, 0.7f - 1e-5f);
    EXPECT_LE(factor, 1.3f + 1e-5f);
    for (size_t i = 0; i < x.pixels.size(); ++i) {
      EXPECT_NEAR(y.pixels[i], std::min(1.0f, x.pixels[i] * factor), 1e-6f);
    }
  }
  // Brightness then contrast differs from contrast then brightness when pixels clamp; both occur.
  std::set<std::vector<float>> outputs;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    outputs.insert(
        apply(spec("color_jitter", {{"brightness", {1.9f, 1.9f}}, {"contrast", {0.2f, 0.2f}}}), x,
              seed)
            .pixels);
  }
  EXPECT_EQ(outputs.size(), 2u);
}

TEST(ColorJitter, IdentityAndSeeds) {
  const Image x = sample(3, 6, 5);
  EXPECT_EQ(apply(spec("color_jitter", {}), x).pixels, x.pixels);
  EXPECT_EQ(apply(spec("color_jitter", {{"brightness", {0.0f}}, {"hue", {0.0f}}}), x).pixels,
            x.pixels);
  const TransformSpec all =
      spec("color_jitter",
           {{"brightness", {0.4f}}, {"contrast", {0.4f}}, {"saturation", {0.4f}}, {"hue", {0.1f}}});
  EXPECT_EQ(apply(all, x, 5).pixels, apply(all, x, 5).pixels);
  EXPECT_NE(apply(all, x, 5).pixels, apply(all, x, 6).pixels);
  EXPECT_EQ(make_transform(all)->description(),
            "color_jitter(brightness=[0.6, 1.4], contrast=[0.6, 1.4], saturation=[0.6, 1.4], "
            "hue=[-0.1, 0.1])");
}

TEST(ColorJitter, NeedsUnitRangeAndColourChannels) {
  Image x = sample(3, 4, 4);
  x.pixels[5] = 200.0f;
  EXPECT_CONTAINS(error_of([&] {
                    apply(spec("color_jitter", {{"hue", {0.1f}}}), x);
                  }),
                  "after {scale: 0.00392157} and before normalize");
  EXPECT_CONTAINS(
      error_of([] {
        make_transform(spec("color_jitter", {{"hue", {0.1f}}}))->output_shape({2, 4, 4});
      }),
      "1- or 3-channel");
}

TEST(Grayscale, ChannelsAndProbability) {
  Image expected = sample(3, 4, 5);
  to_grayscale(expected, 1);
  EXPECT_EQ(apply({"grayscale", {}}, sample(3, 4, 5)).pixels, expected.pixels);
  to_grayscale(expected, 3);
  EXPECT_EQ(apply({"grayscale", {3.0f}}, sample(3, 4, 5)).pixels, expected.pixels);
  EXPECT_EQ(apply({"random_grayscale", {1.0f}}, sample(3, 4, 5)).pixels, expected.pixels);
  EXPECT_EQ(apply({"random_grayscale", {0.0f}}, sample(3, 4, 5)).pixels, sample(3, 4, 5).pixels);
  int gray = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    gray += apply({"random_grayscale", {}}, sample(3, 4, 5), seed).pixels == expected.pixels;
  }
  EXPECT_GT(gray, 20);  // p = 0.1: 40 expected
  EXPECT_LT(gray, 65);
}

TEST(RandomRotation, OneAngleIsRotate) {
  Image expected = sample(3, 7, 9);
  rotate(expected, 30.0, Interpolation::bilinear, std::vector<float>{0.0f});
  EXPECT_EQ(
      apply(spec("random_rotation", {{"degrees", {30.0f, 30.0f}}}, {{"interpolation", "bilinear"}}),
            sample(3, 7, 9))
          .pixels,
      expected.pixels);
  // Rotation by 0 with a fill: nearest keeps every pixel.
  EXPECT_EQ(apply({"random_rotation", {0.0f}}, sample(3, 7, 9)).pixels, sample(3, 7, 9).pixels);
}

TEST(RandomRotation, AnglesInRange) {
  // A single bright pixel off the centre moves along a circle by the drawn angle.
  Image x;
  x.reset({1, 21, 21});
  x.pixels[size_t(10 * 21 + 18)] = 1.0f;  // 8 pixels right of the centre
  std::set<std::vector<float>> outputs;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Image y = apply({"random_rotation", {20.0f}}, x, seed);
    outputs.insert(y.pixels);
    for (int64_t i = 0; i < 21 * 21; ++i) {
      if (y.pixels[size_t(i)] == 0.0f) continue;
      // Counter-clockwise on the screen: the pixel goes up for positive angles.
      const double angle = std::atan2(10.0 - double(i / 21), double(i % 21) - 10.0) * 180.0 / M_PI;
      EXPECT_LE(std::fabs(angle), 20.0 + 8.0) << seed;  // +- the width of one pixel at radius 8
    }
  }
  EXPECT_GE(outputs.size(), 5u);  // an arc of 2 x 8 x 20 degrees: about 6 pixels
}

TEST(RandomAffine, OneValueRangesAreAffine) {
  AffineParams params;
  params.angle = 12.0;
  params.scale = 0.8;
  params.shear_x = 10.0;
  params.shear_y = -5.0;
  Image expected = sample(3, 8, 9);
  affine(expected, params, Interpolation::nearest, std::vector<float>{0.5f});
  const TransformSpec s = spec("random_affine", {{"degrees", {12.0f, 12.0f}},
                                                 {"translate", {0.0f, 0.0f}},
                                                 {"scale", {0.8f, 0.8f}},
                                                 {"shear", {10.0f, 10.0f, -5.0f, -5.0f}},
                                                 {"fill", {0.5f}}});
  EXPECT_EQ(apply(s, sample(3, 8, 9)).pixels, expected.pixels);
}

TEST(RandomAffine, TranslationsAreWholePixelsInRange) {
  // translate [0.2, 0.1] of 20 x 30: |tx| <= 6, |ty| <= 2, whole pixels: the bright pixel moves
  // by exactly (tx, ty).
  Image x;
  x.reset({1, 20, 30});
  x.pixels[size_t(10 * 30 + 15)] = 1.0f;
  std::set<std::pair<int64_t, int64_t>> moves;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Image y =
        apply(spec("random_affine", {{"degrees", {0.0f}}, {"translate", {0.2f, 0.1f}}}), x, seed);
    int64_t found = -1;
    for (int64_t i = 0; i < 20 * 30; ++i) {
      if (y.pixels[size_t(i)] == 1.0f) found = i;
    }
    ASSERT_GE(found, 0) << seed;
    const int64_t dx = found % 30 - 15, dy = found / 30 - 10;
    EXPECT_LE(std::abs(dx), 6);
    EXPECT_LE(std::abs(dy), 2);
    moves.insert({dx, dy});
  }
  EXPECT_GT(moves.size(), 15u);
}

TEST(RandomErasing, BoxInRangeWithItsValue) {
  const Image x = sample(3, 20, 24);
  EXPECT_EQ(apply({"random_erasing", {0.0f}}, x).pixels, x.pixels);
  const TransformSpec s = spec("random_erasing", {{"p", {1.0f}}, {"value", {-1.0f, -2.0f, -3.0f}}});
  int erased_images = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Image y = apply(s, x, seed);
    // The erased pixels form one h x w box, channel c set to -(c + 1).
    int64_t top = 20, bottom = -1, left = 24, right = -1, count = 0;
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t i = 0; i < 20 * 24; ++i) {
        const float v = y.pixels[size_t(c * 480 + i)];
        if (v == x.pixels[size_t(c * 480 + i)]) continue;
        EXPECT_EQ(v, -float(c + 1));
        if (c > 0) continue;
        ++count;
        top = std::min(top, i / 24), bottom = std::max(bottom, i / 24);
        left = std::min(left, i % 24), right = std::max(right, i % 24);
      }
    }
    if (count == 0) continue;  // no try fitted: unchanged, as torchvision
    ++erased_images;
    const int64_t h = bottom - top + 1, w = right - left + 1;
    EXPECT_EQ(count, h * w) << seed;
    EXPECT_LT(h, 20);
    EXPECT_LT(w, 24);
    // area fraction in [0.02, 0.33] and ratio h / w in [0.3, 3.3], up to rounding h and w.
    const double area = double(h * w) / 480.0;
    EXPECT_GE(area, 0.02 * 0.5) << h << " x " << w;
    EXPECT_LE(area, 0.33 * 1.5) << h << " x " << w;
    EXPECT_GE(double(h + 1) / double(std::max<int64_t>(1, w - 1)), 0.3);
    EXPECT_LE(double(std::max<int64_t>(1, h - 1)) / double(w + 1), 3.3);
  }
  EXPECT_GT(erased_images, 45);
}

TEST(RandomErasing, RandomValueAndSeeds) {
  const Image x = sample(1, 16, 16);
  const TransformSpec s = spec("random_erasing", {{"p", {1.0f}}}, {{"value", "random"}});
  const Image a = apply(s, x, 3), b = apply(s, x, 3), c = apply(s, x, 4);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_NE(a.pixels, c.pixels);
  EXPECT_NE(a.pixels, x.pixels);
  EXPECT_EQ(make_transform(s)->description(),
            "random_erasing(1, scale=[0.02, 0.33], ratio=[0.3, 3.3], value=random)");
}

TEST(AutoAugment, SeedsRangeAndVariety) {
  const Image x = sample(3, 12, 14);
  for (const std::string kind : {"trivial_augment_wide", "rand_augment"}) {
    std::set<std::vector<float>> outputs;
    for (uint64_t seed = 1; seed <= 60; ++seed) {
      const Image y = apply({kind, {}}, x, seed);
      EXPECT_EQ(y.pixels, apply({kind, {}}, x, seed).pixels) << kind;
      for (float v : y.pixels) {
        ASSERT_GE(v, 0.0f) << kind;
        ASSERT_LE(v, 1.0f) << kind;
      }
      outputs.insert(y.pixels);
    }
    EXPECT_GT(outputs.size(), 30u) << kind;  // 14 ops, random bins and signs
  }
  // No op at all: the identity.
  EXPECT_EQ(apply(spec("rand_augment", {{"num_ops", {0.0f}}}), x).pixels, x.pixels);
  EXPECT_EQ(make_transform({"rand_augment", {}})->description(),
            "rand_augment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest)");
}

// The augmentations draw only from the loader's per-sample Random: the same batches for 0 or 3
// workers, other batches with another seed.
TEST(AugmentLoader, SameBatchesForAnyWorkerCount) {
  const int64_t n = 24;
  std::vector<uint8_t> pixels(size_t(n * 3 * 10 * 12));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 131) % 256);
  auto dataset = std::make_shared<InMemoryDataset>("pixels", Shape{3, 10, 12}, pixels,
                                                   std::vector<int32_t>(size_t(n), 0));
  auto batches = [&](int workers, uint64_t seed) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.shuffle = true;
    o.seed = seed;
    o.num_workers = workers;
    for (const TransformSpec& s :
         {TransformSpec("scale", {0.00392157f}), TransformSpec("trivial_augment_wide"),
          spec("color_jitter", {{"brightness", {0.4f}}, {"hue", {0.1f}}}),
          TransformSpec("random_affine", {10.0f}, {{"translate", {0.1f, 0.1f}}}),
          spec("random_erasing", {}, {{"value", "random"}})}) {
      o.transforms.push_back(make_transform(s));
    }
    DataLoader loader(dataset, o);
    std::vector<std::vector<float>> out;
    for (int b = 0; b < 12; ++b) out.push_back(loader.next().data.to_vector());  // 2 epochs
    return out;
  };
  const auto reference = batches(0, 5);
  EXPECT_EQ(batches(3, 5), reference);
  EXPECT_NE(batches(3, 6), reference);
}

TEST(AugmentSpecs, BadOptionsNameTheOption) {
  const auto error = [](const TransformSpec& s) { return error_of([&] { make_transform(s); }); };
  EXPECT_CONTAINS(error(spec("color_jitter", {{"hue", {0.7f}}})),
                  "transform color_jitter: 'hue' must be in [0, 0.5], got 0.7");
  EXPECT_CONTAINS(error(spec("color_jitter", {{"brightness", {-1.0f}}})),
                  "'brightness' must be non-negative");
  EXPECT_CONTAINS(error(spec("color_jitter", {{"contrast", {1.5f, 0.5f}}})),
                  "'contrast' must be [lo, hi]");
  EXPECT_CONTAINS(error(spec("color_jitter", {{"sharpness", {0.5f}}})),
                  "unknown option 'sharpness' (known: brightness, contrast, saturation, hue)");
  EXPECT_CONTAINS(error({"color_jitter", {0.4f}}), "takes options only");
  EXPECT_CONTAINS(error(spec("random_rotation", {})), "transform random_rotation: needs 'degrees'");
  EXPECT_CONTAINS(error(spec("random_rotation", {{"degrees", {-5.0f}}})),
                  "'degrees' must be non-negative");
  EXPECT_CONTAINS(
      error(spec("random_rotation", {{"degrees", {5.0f}}}, {{"interpolation", "bicubic"}})),
      "'interpolation' must be one of nearest, bilinear, got 'bicubic'");
  EXPECT_CONTAINS(error(spec("random_rotation", {{"degrees", {5.0f}}, {"interpolation", {1.0f}}})),
                  "'interpolation' takes a word");
  EXPECT_CONTAINS(error(spec("random_rotation", {{"degrees", {5.0f}}}, {{"fill", "white"}})),
                  "'fill' takes numbers, got 'white'");
  EXPECT_CONTAINS(error(spec("random_affine", {{"degrees", {0.0f}}, {"translate", {1.5f, 0.0f}}})),
                  "'translate' must be fractions");
  EXPECT_CONTAINS(
      error(spec("random_affine", {{"degrees", {0.0f}}, {"shear", {1.0f, 2.0f, 3.0f}}})),
      "'shear' has 3 values");
  EXPECT_CONTAINS(error(spec("random_affine", {{"degrees", {0.0f}}, {"scale", {0.0f, 1.0f}}})),
                  "'scale' must be [lo, hi] with 0 < lo <= hi");
  EXPECT_CONTAINS(error(spec("random_erasing", {{"scale", {0.5f, 0.1f}}})), "'scale'");
  EXPECT_CONTAINS(error(spec("random_erasing", {{"ratio", {0.0f, 1.0f}}})), "'ratio'");
  EXPECT_CONTAINS(error({"random_erasing", {1.5f}}), "p must lie in [0, 1]");
  EXPECT_CONTAINS(error(spec("random_erasing", {}, {{"value", "noise"}})),
                  "'value' must be one of random, got 'noise'");
  EXPECT_CONTAINS(error({"grayscale", {2.0f}}), "'channels' must be 1 or 3");
  EXPECT_CONTAINS(error({"random_grayscale", {-0.1f}}), "p must lie in [0, 1]");
  EXPECT_CONTAINS(error(spec("rand_augment", {{"magnitude", {31.0f}}})),
                  "transform rand_augment: 'magnitude' must be a whole number from 0 to 30");
  EXPECT_CONTAINS(error(spec("trivial_augment_wide", {{"num_magnitude_bins", {1.0f}}})),
                  "'num_magnitude_bins' must be a whole number from 2");
  EXPECT_CONTAINS(error(spec("trivial_augment_wide", {{"magnitude", {3.0f}}})),
                  "unknown option 'magnitude'");
  // Per-channel values that do not match the samples, when the loader chains the shapes.
  EXPECT_CONTAINS(error_of([] {
                    make_transform(spec("random_rotation", {{"degrees", {5.0f}}, {"fill", {1, 2}}}))
                        ->output_shape({3, 8, 8});
                  }),
                  "2 per-channel values for samples of shape");
  EXPECT_CONTAINS(
      error_of([] {
        make_transform(spec("random_erasing", {{"value", {1, 2, 3}}}))->output_shape({1, 8, 8});
      }),
      "3 per-channel values");
  // Words are refused by the kinds that take none.
  EXPECT_CONTAINS(error(spec("random_crop", {{"size", {4.0f}}}, {{"padding", "same"}})),
                  "'padding' takes numbers");
}

}  // namespace
}  // namespace crema::data
