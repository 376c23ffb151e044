// PixelPlan (data/pixel_plan.h): a plan drawn by Transform::plan and run by run_pixel_plan gives
// the transforms' own output, and draws exactly what apply() draws, so decode: gpu crops, flips
// and jitters as the CPU path does. Tolerances: the two resampling passes may run in the other
// order (resample_planes picks the cheaper one), a float rounding of each sum: 2e-3 on 0..255
// pixels, 1e-5 on [0, 1] ones and after normalize (about 4 ulp of the largest value).
#include "data/pixel_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

using testing::error_of;
using testing::pattern_image;

std::vector<std::shared_ptr<const Transform>> make_all(const std::vector<TransformSpec>& specs) {
  std::vector<std::shared_ptr<const Transform>> out;
  for (const TransformSpec& spec : specs) out.push_back(make_transform(spec));
  return out;
}

// Runs `transforms` on `source` with Random(seed) both ways; checks the pixels agree within
// `tolerance` (reporting the first that does not) and that both drew the same amount.
void expect_plan_matches(const std::vector<std::shared_ptr<const Transform>>& transforms,
                         const Image& source, uint64_t seed, float tolerance) {
  Image cpu = source;
  Random cpu_random(seed), plan_random(seed);
  for (const auto& t : transforms) t->apply(cpu, cpu_random);
  PixelPlan plan = identity_plan(source.channels(), {source.height(), source.width()});
  for (const auto& t : transforms) t->plan(plan, plan_random);
  Image out;
  run_pixel_plan(plan, source, out);
  ASSERT_EQ(out.shape, cpu.shape) << "seed " << seed;
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    ASSERT_NEAR(out.pixels[i], cpu.pixels[i], tolerance)
        << "seed " << seed << ", first mismatch at flat index " << i << " of "
        << shape_str(out.shape);
  }
  EXPECT_EQ(cpu_random.next(), plan_random.next()) << "the plan drew otherwise, seed " << seed;
}

TEST(PixelPlan, RandomResizedCropFlipNormalizeMatchTheTransforms) {
  const auto transforms = make_all(
      {{"random_resized_crop", {24}},
       {"horizontal_flip"},
       {"scale", {0.00392157f}},
       {"normalize", {}, {{"mean", {0.485f, 0.456f, 0.406f}}, {"std", {0.229f, 0.224f, 0.225f}}}}});
  const Image source = pattern_image(3, 61, 47, 3);
  for (uint64_t seed = 0; seed < 40; ++seed) expect_plan_matches(transforms, source, seed, 1e-5f);
}

TEST(PixelPlan, ResizeCropsAndPaddingMatchTheTransforms) {
  TransformSpec bicubic("resize", {19, 23});
  bicubic.words = {{"interpolation", "bicubic"}, {"antialias", "false"}};
  TransformSpec nearest("random_resized_crop", {9, 13});
  nearest.words = {{"interpolation", "nearest"}};
  const std::vector<std::vector<TransformSpec>> pipelines = {
      {{"resize", {20}}, {"center_crop", {18}}},
      {{"resize", {20}}, {"center_crop", {26, 30}}},  // larger than the image: zero padding
      {{"random_crop", {20}, {{"padding", {4}}}}, {"horizontal_flip"}},
      {{"horizontal_flip"}, {"center_crop", {15, 40}}, {"random_crop", {11, 17}}},
      {bicubic, {"horizontal_flip"}},
      {nearest, {"mean", {100}}},
      {{"resize", {37, 29}}},  // the source's own size: the identity
  };
  const Image source = pattern_image(3, 37, 29, 5);
  for (const auto& specs : pipelines) {
    const auto transforms = make_all(specs);
    for (uint64_t seed = 0; seed < 12; ++seed) {
      SCOPED_TRACE(transforms.front()->description());
      expect_plan_matches(transforms, source, seed, 2e-3f);
    }
  }
  const Image gray = pattern_image(1, 30, 44, 7);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    expect_plan_matches(make_all({{"random_resized_crop", {16, 20}}, {"horizontal_flip"}}), gray,
                        seed, 2e-3f);
  }
}

TEST(PixelPlan, ColorJitterMatchesTheTransform) {
  TransformSpec jitter(
      "color_jitter", {},
      {{"brightness", {0.4f}}, {"contrast", {0.4f}}, {"saturation", {0.4f}}, {"hue", {0.1f}}});
  TransformSpec contrast_only("color_jitter", {}, {{"contrast", {0.1f, 1.9f}}});
  const Image source = pattern_image(3, 33, 41, 9);
  for (uint64_t seed = 0; seed < 30; ++seed) {
    expect_plan_matches(make_all({{"random_resized_crop", {20}},
                                  {"scale", {0.00392157f}},
                                  jitter,
                                  {"normalize", {}, {{"mean", {0.5f}}, {"std", {0.25f}}}}}),
                        source, seed, 1e-5f);
    expect_plan_matches(make_all({{"scale", {0.00392157f}}, jitter, contrast_only}), source, seed,
                        1e-5f);
  }
  expect_plan_matches(make_all({{"scale", {0.00392157f}}, jitter}), pattern_image(1, 9, 7), 3,
                      1e-5f);
}

TEST(PixelPlan, TransformsWithoutAGpuFormAreNamed) {
  PixelPlan plan = identity_plan(3, {32, 32});
  Random random(1);
  EXPECT_CONTAINS(error_of([&] {
                    make_transform({"random_rotation", {10}})->plan(plan, random);
                  }),
                  "random_rotation([-10, 10]");
  EXPECT_CONTAINS(error_of([&] {
                    make_transform({"random_rotation", {10}})->plan(plan, random);
                  }),
                  "has no GPU form; decode: gpu runs resize, center_crop");

  make_transform({"scale", {0.5f}})->plan(plan, random);
  EXPECT_CONTAINS(error_of([&] {
                    make_transform({"center_crop", {8}})->plan(plan, random);
                  }),
                  "center_crop(8, 8) comes after a colour transform");

  PixelPlan flipped = identity_plan(3, {32, 32});
  plan_flip(flipped);
  EXPECT_CONTAINS(error_of([&] {
                    make_transform({"resize", {8}})->plan(flipped, random);
                  }),
                  "must be the first transform");
}

// decode: gpu's checks that need no GPU: each names what is wrong.
TEST(PixelPlan, GpuDecodeOptionsAreChecked) {
  std::vector<uint8_t> pixels(4 * 3 * 8 * 8, 7);
  auto dataset = std::make_shared<InMemoryDataset>("pixels", Shape{3, 8, 8}, pixels,
                                                   std::vector<int32_t>{0, 1, 0, 1});
  DataLoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 0;
  options.gpu_decode = 0;
  const std::string message = error_of([&] { DataLoader loader(dataset, options); });
  if (!gpu_decoding_built()) {
    EXPECT_CONTAINS(message, "decode: gpu needs nvJPEG, which this build of crema lacks");
    return;
  }
  EXPECT_CONTAINS(message, "decode: gpu decodes image files");
  options.transforms = make_all({{"random_affine", {5}}});
  EXPECT_CONTAINS(error_of([&] { DataLoader loader(dataset, options); }), "has no GPU form");
  options.transforms.clear();
  options.target_classes = 2;
  options.batch_mix = BatchMixOptions{};
  options.batch_mix->mixup_alpha = 0.2;
  EXPECT_CONTAINS(error_of([&] { DataLoader loader(dataset, options); }),
                  "batch_mix mixes batches on the CPU");
}

}  // namespace
}  // namespace crema::data
