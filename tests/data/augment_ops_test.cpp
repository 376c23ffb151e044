// The colour and affine operations of data/color_ops.h and data/affine_ops.h, and the
// auto-augment magnitude tables, against torchvision 0.14 (tests/fixtures/
// make_augment_fixtures.py writes the golden values; the ops run in float32 in both).
//
// Tolerances (absolute, on pixels in [0, 1]):
//   blends (brightness, contrast, saturation, sharpness, grayscale, invert, solarize): 2e-6,
//     float32 rounding of r x + (1 - r) y and of the mean and 3 x 3 sums, summed in another order;
//   hue: 1e-5 (the HSV round trip divides by max - min);
//   autocontrast: 2e-6; posterize and equalize: exact (both are multiples of 1/255);
//   affine and rotate, bilinear: 1e-5 (the grid is float32 in both, the 2 x 3 product summed in
//     another order); nearest: exact, the source pixel indices agreeing.
//   magnitudes: 1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "data/affine_ops.h"
#include "data/augment.h"
#include "data/color_ops.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/support/error_text.h"

namespace crema::data {
namespace {

struct AugmentFixture : crema::testing::SafetensorsFixture {
  AugmentFixture() : SafetensorsFixture("augment_fixtures.safetensors") {}
  Image image(const std::string& name) const {
    Image x;
    x.reset(shape(name));
    x.pixels = floats(name);
    return x;
  }
};

const AugmentFixture& fixture() {
  static const AugmentFixture f;
  return f;
}

void expect_near(const Image& got, const std::string& expected_name, float tolerance) {
  const Image expected = fixture().image(expected_name);
  ASSERT_EQ(got.shape, expected.shape) << expected_name;
  int bad = 0;
  for (size_t i = 0; i < got.pixels.size(); ++i) {
    if (!(std::fabs(got.pixels[i] - expected.pixels[i]) <= tolerance) && ++bad <= 5) {
      ADD_FAILURE() << expected_name << "[" << i << "]: " << got.pixels[i] << " vs torchvision "
                    << expected.pixels[i];
    }
  }
  EXPECT_EQ(bad, 0) << expected_name << ": pixels off by more than " << tolerance;
}

struct ColorCase {
  const char* name;
  const char* input;
  std::function<void(Image&, float)> op;
  float tolerance;
};

TEST(ColorOps, MatchTorchvision) {
  const std::vector<ColorCase> cases = {
      {"brightness", "rgb", adjust_brightness, 2e-6f},
      {"brightness_up", "rgb", adjust_brightness, 2e-6f},
      {"contrast", "rgb", adjust_contrast, 2e-6f},
      {"contrast_gray", "gray", adjust_contrast, 2e-6f},
      {"saturation", "rgb", adjust_saturation, 2e-6f},
      {"saturation_up", "rgb", adjust_saturation, 2e-6f},
      {"hue", "rgb", adjust_hue, 1e-5f},
      {"hue_negative", "rgb", adjust_hue, 1e-5f},
      {"hue_half", "rgb", adjust_hue, 1e-5f},
      {"sharpness", "rgb", adjust_sharpness, 2e-6f},
      {"sharpness_down", "gray", adjust_sharpness, 2e-6f},
      {"autocontrast", "low", [](Image& x, float) { autocontrast(x); }, 2e-6f},
      {"invert", "rgb", [](Image& x, float) { invert(x); }, 0.0f},
      {"solarize", "rgb", solarize, 0.0f},
      {"posterize", "rgb", [](Image& x, float bits) { posterize(x, int(bits)); }, 0.0f},
      {"posterize_1", "gray", [](Image& x, float bits) { posterize(x, int(bits)); }, 0.0f},
      {"equalize", "levels", [](Image& x, float) { equalize(x); }, 0.0f},
      {"equalize_few", "rgb", [](Image& x, float) { equalize(x); }, 0.0f},
      {"grayscale", "rgb", [](Image& x, float c) { to_grayscale(x, int64_t(c)); }, 2e-6f},
      {"grayscale_3", "rgb", [](Image& x, float c) { to_grayscale(x, int64_t(c)); }, 2e-6f},
  };
  for (const ColorCase& c : cases) {
    const std::string name = std::string("color.") + c.name;
    Image x = fixture().image(c.input);
    c.op(x, fixture().floats(name + ".factor")[0]);
    expect_near(x, name, c.tolerance);
  }
}

TEST(ColorOps, EqualizeChangesTheSkewedImage) {
  // Guards the fixture: equalize must do something on `levels` for the comparison to count.
  Image x = fixture().image("levels");
  const std::vector<float> before = x.pixels;
  equalize(x);
  EXPECT_NE(x.pixels, before);
}

TEST(ColorOps, OneChannelKeepsHueAndSaturation) {
  Image x = fixture().image("gray");
  const std::vector<float> before = x.pixels;
  adjust_hue(x, 0.3f);
  adjust_saturation(x, 0.2f);
  EXPECT_EQ(x.pixels, before);
}

TEST(ColorOps, RangeCheckNamesTheTransform) {
  Image x = fixture().image("rgb");
  EXPECT_NO_THROW(check_unit_range(x, "color_jitter"));
  x.pixels[3] = 255.0f;
  EXPECT_CONTAINS(crema::testing::error_of([&] { check_unit_range(x, "color_jitter"); }),
                  "transform color_jitter needs pixels in [0, 1], got values in [");
}

// Runs the affine (or, with `rotation`, rotate) case k with its stored parameters.
void check_warp(const std::string& kind, int k) {
  const std::string name = kind + "." + std::to_string(k);
  const std::vector<float> p = fixture().floats(name + ".params");
  Image x = fixture().image(p[0] == 0.0f ? "rgb" : "gray");
  const Interpolation interpolation =
      p[10] != 0.0f ? Interpolation::bilinear : Interpolation::nearest;
  std::optional<std::vector<float>> fill;
  if (p[11] != 0.0f) fill = fixture().floats(name + ".fill");
  if (kind == "rotate") {
    rotate(x, p[1], interpolation, fill);
  } else {
    AffineParams params;
    params.angle = p[1];
    params.translate_x = p[2], params.translate_y = p[3];
    params.scale = p[4];
    params.shear_x = p[5], params.shear_y = p[6];
    if (p[7] != 0.0f) params.center = std::array<double, 2>{p[8], p[9]};
    affine(x, params, interpolation, fill);
  }
  SCOPED_TRACE(name);
  expect_near(x, name, interpolation == Interpolation::bilinear ? 1e-5f : 0.0f);
}

TEST(AffineOps, AffineMatchesTorchvision) {
  for (int k = 0; fixture().has("affine." + std::to_string(k)); ++k) check_warp("affine", k);
}

TEST(AffineOps, RotateMatchesTorchvision) {
  for (int k = 0; fixture().has("rotate." + std::to_string(k)); ++k) check_warp("rotate", k);
}

TEST(AffineOps, IdentityKeepsTheImage) {
  // Nearest reads each pixel itself; bilinear weighs it by 1 up to float32 rounding of the grid.
  for (Interpolation interpolation : {Interpolation::nearest, Interpolation::bilinear}) {
    Image x = fixture().image("rgb");
    affine(x, AffineParams{}, interpolation, std::nullopt);
    const std::vector<float> expected = fixture().floats("rgb");
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(x.pixels[i], expected[i], interpolation == Interpolation::nearest ? 0.0f : 1e-6f)
          << i;
    }
  }
}

TEST(AutoAugmentMagnitudes, MatchTorchvisionTables) {
  for (const bool wide : {true, false}) {
    for (const int bins : {31, 7}) {
      const std::string name =
          std::string("magnitudes.") + (wide ? "wide" : "rand") + "." + std::to_string(bins);
      const std::vector<float> table = fixture().floats(name);
      ASSERT_EQ(table.size(), size_t(14 * bins)) << name;
      for (int op = 0; op < 14; ++op) {
        for (int bin = 0; bin < bins; ++bin) {
          const float expected = table[size_t(op * bins + bin)];
          EXPECT_NEAR(auto_augment_magnitude(wide, op, bin, bins, 20, 24), expected,
                      1e-5f * std::max(1.0f, std::fabs(expected)))
              << name << " op " << op << " bin " << bin;
        }
      }
    }
  }
}

}  // namespace
}  // namespace crema::data
