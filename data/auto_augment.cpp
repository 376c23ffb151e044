// trivial_augment_wide and rand_augment: torchvision's TrivialAugmentWide and RandAugment
// (torchvision/transforms/autoaugment.py, 0.14), on float images in [0, 1].
//
// Both choose among the same 14 ops, in torchvision's order, each with a magnitude table of
// `num_magnitude_bins` (B) entries, linspace(lo, hi, B) unless said otherwise:
//
//   op            TrivialAugmentWide   RandAugment              applied as (m the magnitude)
//   Identity      -                    -                        nothing
//   ShearX        0 .. 0.99, signed    0 .. 0.3, signed         affine, shear [deg(atan m), 0],
//                                                               centre (0, 0): the top-left corner
//   ShearY        0 .. 0.99, signed    0 .. 0.3, signed         affine, shear [0, deg(atan m)], the
//   same TranslateX    0 .. 32, signed      0 .. 150/331 W, signed   affine, translate [trunc(m),
//   0] TranslateY    0 .. 32, signed      0 .. 150/331 H, signed   affine, translate [0, trunc(m)]
//   Rotate        0 .. 135, signed     0 .. 30, signed          rotate by m degrees
//   Brightness    0 .. 0.99, signed    0 .. 0.9, signed         adjust_brightness(1 + m)
//   Color         0 .. 0.99, signed    0 .. 0.9, signed         adjust_saturation(1 + m)
//   Contrast      0 .. 0.99, signed    0 .. 0.9, signed         adjust_contrast(1 + m)
//   Sharpness     0 .. 0.99, signed    0 .. 0.9, signed         adjust_sharpness(1 + m)
//   Posterize     8 - round(i / ((B-1)/6))  8 - round(i / ((B-1)/4))   posterize(trunc(m) bits)
//   Solarize      255 .. 0             255 .. 0                 solarize(threshold m / 255)
//   AutoContrast  -                    -                        autocontrast
//   Equalize      -                    -                        equalize
//
// TrivialAugmentWide: one op, uniformly; a bin, uniformly; for a signed op, the sign + or -
// with probability 1/2. RandAugment: `num_ops` times, an op uniformly, magnitude bin
// `magnitude`, the random sign. The magnitudes are torchvision's uint8 ones; on a [0, 1] image
// Solarize's threshold is m / 255, and Posterize and Equalize quantize as color_ops.h says.
// The geometric ops fill with nothing by default (`fill` gives a value, as torchvision's).
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/augment.h"
#include "data/color_ops.h"

namespace crema::data {
namespace {

enum class Op {
  identity,
  shear_x,
  shear_y,
  translate_x,
  translate_y,
  rotate,
  brightness,
  color,
  contrast,
  sharpness,
  posterize,
  solarize,
  autocontrast,
  equalize
};
constexpr int kOps = 14;

// torch.linspace(start, end, steps) in float32, as torch computes it: the first half from the
// start, the second half back from the end.
float linspace(float start, float end, int steps, int i) {
  if (steps == 1) return start;
  const float step = (end - start) / float(steps - 1);
  return i < steps / 2 ? start + step * float(i) : end - step * float(steps - i - 1);
}

// The magnitude of `op` at bin `bin` of `bins` (the header's table); `wide`: TrivialAugmentWide's.
float magnitude_of(Op op, int bin, int bins, bool wide, int64_t height, int64_t width) {
  const float extent = wide ? 0.99f : 0.9f;
  switch (op) {
    case Op::shear_x:
    case Op::shear_y:
      return linspace(0.0f, wide ? 0.99f : 0.3f, bins, bin);
    case Op::translate_x:
      return linspace(0.0f, wide ? 32.0f : float(150.0 / 331.0 * double(width)), bins, bin);
    case Op::translate_y:
      return linspace(0.0f, wide ? 32.0f : float(150.0 / 331.0 * double(height)), bins, bin);
    case Op::rotate:
      return linspace(0.0f, wide ? 135.0f : 30.0f, bins, bin);
    case Op::brightness:
    case Op::color:
    case Op::contrast:
    case Op::sharpness:
      return linspace(0.0f, extent, bins, bin);
    case Op::posterize:
      return float(8 - int(std::nearbyint(float(bin) / float((bins - 1) / (wide ? 6.0 : 4.0)))));
    case Op::solarize:
      return linspace(255.0f, 0.0f, bins, bin);
    default:
      return 0.0f;
  }
}

bool is_signed(Op op) {
  return op >= Op::shear_x && op <= Op::sharpness;
}
bool has_magnitudes(Op op) {
  return op >= Op::shear_x && op <= Op::solarize;
}

// torchvision's _apply_op.
void apply_op(Image& image, Op op, float magnitude, Interpolation interpolation,
              const std::optional<std::vector<float>>& fill) {
  constexpr double kDegreesPerRadian = 180.0 / 3.14159265358979323846;
  AffineParams params;
  switch (op) {
    case Op::identity:
      return;
    case Op::shear_x:
    case Op::shear_y:
      (op == Op::shear_x ? params.shear_x : params.shear_y) =
          std::atan(double(magnitude)) * kDegreesPerRadian;
      params.center = std::array<double, 2>{0.0, 0.0};
      return affine(image, params, interpolation, fill);
    case Op::translate_x:
    case Op::translate_y:
      (op == Op::translate_x ? params.translate_x : params.translate_y) =
          std::trunc(double(magnitude));
      return affine(image, params, interpolation, fill);
    case Op::rotate:
      return rotate(image, magnitude, interpolation, fill);
    case Op::brightness:
      return adjust_brightness(image, 1.0f + magnitude);
    case Op::color:
      return adjust_saturation(image, 1.0f + magnitude);
    case Op::contrast:
      return adjust_contrast(image, 1.0f + magnitude);
    case Op::sharpness:
      return adjust_sharpness(image, 1.0f + magnitude);
    case Op::posterize:
      return posterize(image, int(magnitude));
    case Op::solarize:
      return solarize(image, float(double(magnitude) / 255.0));
    case Op::autocontrast:
      return autocontrast(image);
    case Op::equalize:
      return equalize(image);
  }
}

class AutoAugmentTransform : public Transform {
 public:
  // wide: TrivialAugmentWide (one op, a random bin); else RandAugment (num_ops ops at bin
  // `magnitude`).
  AutoAugmentTransform(bool wide, int num_ops, int magnitude, int bins, Interpolation interpolation,
                       std::optional<std::vector<float>> fill)
      : wide_(wide),
        num_ops_(num_ops),
        magnitude_(magnitude),
        bins_(bins),
        interpolation_(interpolation),
        fill_(std::move(fill)) {}
  Shape output_shape(const Shape& input) const override {
    check_augment_input(input, description(), true, fill_ ? *fill_ : std::vector<float>{});
    return input;
  }
  void apply(Image& image, Random& random) const override {
    check_unit_range(image, wide_ ? "trivial_augment_wide" : "rand_augment");
    for (int k = 0; k < (wide_ ? 1 : num_ops_); ++k) {
      const Op op = Op(random.below(kOps));
      float magnitude = 0.0f;
      if (has_magnitudes(op)) {
        const int bin = wide_ ? int(random.below(uint64_t(bins_))) : magnitude_;
        magnitude = magnitude_of(op, bin, bins_, wide_, image.height(), image.width());
      }
      if (is_signed(op) && random.below(2) == 1) magnitude = -magnitude;
      apply_op(image, op, magnitude, interpolation_, fill_);
    }
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    const std::string bins = "num_magnitude_bins=" + std::to_string(bins_);
    return (wide_ ? "trivial_augment_wide(" + bins
                  : "rand_augment(num_ops=" + std::to_string(num_ops_) +
                        ", magnitude=" + std::to_string(magnitude_) + ", " + bins) +
           warp_text(interpolation_, fill_) + ")";
  }

 private:
  bool wide_;
  int num_ops_, magnitude_, bins_;
  Interpolation interpolation_;
  std::optional<std::vector<float>> fill_;
};

}  // namespace

float auto_augment_magnitude(bool wide, int op, int bin, int bins, int64_t height, int64_t width) {
  return magnitude_of(Op(op), bin, bins, wide, height, width);
}

std::unique_ptr<Transform> make_auto_augment_transform(const TransformSpec& spec) {
  const bool wide = spec.kind == "trivial_augment_wide";
  const SpecReader reader =
      wide ? SpecReader(spec, "", {"num_magnitude_bins", "fill"}, {"interpolation"})
           : SpecReader(spec, "", {"num_ops", "magnitude", "num_magnitude_bins", "fill"},
                        {"interpolation"});
  const int bins = reader.whole("num_magnitude_bins", 2, 1024, 31);
  const int num_ops = wide ? 1 : reader.whole("num_ops", 0, 64, 2);
  const int magnitude = wide ? 0 : reader.whole("magnitude", 0, bins - 1, 9);
  return std::make_unique<AutoAugmentTransform>(
      wide, num_ops, magnitude, bins, read_interpolation(reader), read_fill(reader, std::nullopt));
}

}  // namespace crema::data
