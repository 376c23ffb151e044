// data/resample.h against torchvision: every interpolation and antialias setting against the
// tensor path (tests/fixtures/make_resize_fixtures.py), and bilinear against PIL's uint8 path,
// which RandomResizedCrop runs on the PIL images of torchvision's ImageFolder.
//
// Tolerances, values 0..255: the tensor path within 2e-3 (float32 sums of up to ~16 products
// in another order, and weights computed in double here, in float there); PIL within 1 level
// (PIL rounds the rows pass to uint8 (<= 0.5, carried through weights summing to 1) and the
// result (<= 0.5)).
#include "data/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/image_ops.h"
#include "tests/fixtures/safetensors_fixture.h"

namespace crema::data {
namespace {

struct ResizeFixture : crema::testing::SafetensorsFixture {
  ResizeFixture() : SafetensorsFixture("resize_fixtures.safetensors") {}
  Image image(const std::string& name) const {
    Image out;
    out.reset(shape(name));
    out.pixels = floats(name);
    return out;
  }
};

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double largest = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    largest = std::max(largest, double(std::fabs(a[i] - b[i])));
  }
  return largest;
}

TEST(Resample, MatchesTorchvisionTensorResize) {
  const ResizeFixture f;
  const struct {
    const char* name;
    const char* source;
  } cases[] = {{"shrink", "large"},
               {"mild", "large"},
               {"grow", "small"},
               {"mixed", "large"},
               {"same", "small"}};
  for (Interpolation interpolation :
       {Interpolation::nearest, Interpolation::bilinear, Interpolation::bicubic}) {
    for (bool antialias : {true, false}) {
      // torchvision refuses antialias for nearest; crema ignores it (the same output).
      const bool nearest = interpolation == Interpolation::nearest;
      const std::string mode = std::string(interpolation_name(interpolation)) +
                               (antialias && !nearest ? "_aa_" : "_noaa_");
      for (const auto& c : cases) {
        const std::string key = mode + c.name;
        const Shape& want = f.shape(key);
        Image out;
        resize(f.image(c.source), want[1], want[2], out, {interpolation, antialias});
        ASSERT_EQ(out.shape, want) << key;
        EXPECT_LT(largest_difference(out.pixels, f.floats(key)), 2e-3)
            << key << (antialias ? " (antialias)" : "");
      }
    }
  }
}

// RandomResizedCrop's crop then resize, as PIL computes it on uint8 pixels: the 25 x 33 window
// at (3, 4) to 12 x 12.
TEST(Resample, BilinearWindowMatchesPil) {
  const ResizeFixture f;
  Image out;
  resize_box(f.image("pil_input"), {3, 4, 25, 33}, 12, 12, out);
  EXPECT_LE(largest_difference(out.pixels, f.floats("pil_bilinear")), 1.0);
}

// Every antialiased window lies inside the input and its weights sum to 1; the window widens
// with the shrink factor (support 1 x s each side for bilinear: at most 2 s + 1 taps).
TEST(Resample, AntialiasedWeightsAreNormalizedWindows) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{500, 224}, {375, 224}, {7, 3}, {3, 7}}) {
    for (Interpolation interpolation : {Interpolation::bilinear, Interpolation::bicubic}) {
      const ResampleAxis axis = resample_axis(in, out, {interpolation, true});
      const double s = std::max(1.0, double(in) / double(out));
      const double support = (interpolation == Interpolation::bicubic ? 2.0 : 1.0) * s;
      EXPECT_LE(axis.taps, int64_t(std::ceil(2 * support)) + 1) << in << " -> " << out;
      for (int64_t i = 0; i < out; ++i) {
        ASSERT_GE(axis.first[size_t(i)], 0);
        ASSERT_LE(axis.first[size_t(i)] + axis.taps, in);
        double total = 0.0;
        for (int64_t k = 0; k < axis.taps; ++k) total += axis.weights[size_t(i * axis.taps + k)];
        EXPECT_NEAR(total, 1.0, 1e-6) << in << " -> " << out << " output " << i;
      }
    }
  }
}

// The window is read in place: resize_box equals crop then resize, bit for bit.
TEST(Resample, WindowEqualsCropThenResize) {
  const ResizeFixture f;
  const Image in = f.image("pil_input");
  const CropBox box{3, 4, 25, 33};
  Image cropped, whole, window;
  crop(in, box, cropped);
  for (ResizeMode mode : {ResizeMode{}, ResizeMode{Interpolation::bicubic, false}}) {
    resize(cropped, 12, 17, whole, mode);
    resize_box(in, box, 12, 17, window, mode);
    EXPECT_EQ(window.pixels, whole.pixels);
  }
}

TEST(Resample, InterpolationNames) {
  EXPECT_EQ(parse_interpolation("bicubic"), Interpolation::bicubic);
  EXPECT_STREQ(interpolation_name(Interpolation::nearest), "nearest");
  EXPECT_THROW(parse_interpolation("lanczos"), Error);
}

}  // namespace
}  // namespace crema::data
