#include "data/augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "data/color_ops.h"
#include "data/pixel_plan.h"

namespace crema::data {
namespace {

// A factor range [lo, hi] drawn uniformly, or none (the identity, no draw).
using FactorRange = std::optional<std::array<float, 2>>;

std::string range_text(const std::array<float, 2>& range) {
  return "[" + number_text(range[0]) + ", " + number_text(range[1]) + "]";
}

// torchvision's ColorJitter: brightness, contrast, saturation and hue, each as a factor range;
// get_params draws a permutation of the four, then each factor in that fixed order, and the
// adjustments run in the permutation's order.
class ColorJitterTransform : public Transform {
 public:
  explicit ColorJitterTransform(std::array<FactorRange, 4> ranges) : ranges_(ranges) {}
  Shape output_shape(const Shape& input) const override {
    check_augment_input(input, description(), true);
    return input;
  }
  void apply(Image& image, Random& random) const override {
    check_unit_range(image, "color_jitter");
    std::array<int, 4> order = {0, 1, 2, 3};  // torch.randperm(4), by Fisher-Yates
    for (int i = 3; i > 0; --i) std::swap(order[size_t(i)], order[random.below(uint64_t(i + 1))]);
    std::array<float, 4> factors{};
    for (size_t k = 0; k < 4; ++k) {
      if (ranges_[k]) factors[k] = float(random.uniform((*ranges_[k])[0], (*ranges_[k])[1]));
    }
    for (int k : order) {
      if (!ranges_[size_t(k)]) continue;
      const float f = factors[size_t(k)];
      if (k == 0) adjust_brightness(image, f);
      if (k == 1) adjust_contrast(image, f);
      if (k == 2) adjust_saturation(image, f);
      if (k == 3) adjust_hue(image, f);
    }
  }
  // The same draws as apply().
  void plan(PixelPlan& plan, Random& random) const override {
    std::array<int, 4> order = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) std::swap(order[size_t(i)], order[random.below(uint64_t(i + 1))]);
    std::array<float, 4> factors{};
    for (size_t k = 0; k < 4; ++k) {
      if (ranges_[k]) factors[k] = float(random.uniform((*ranges_[k])[0], (*ranges_[k])[1]));
    }
    static constexpr ColorStep::Kind kinds[4] = {ColorStep::brightness, ColorStep::contrast,
                                                 ColorStep::saturation, ColorStep::hue};
    for (int k : order) {
      if (!ranges_[size_t(k)]) continue;
      ColorStep step;
      step.kind = kinds[k];
      step.factor = factors[size_t(k)];
      plan.steps.push_back(step);
    }
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    static const char* names[4] = {"brightness", "contrast", "saturation", "hue"};
    std::string text;
    for (size_t k = 0; k < 4; ++k) {
      if (ranges_[k])
        text += (text.empty() ? "" : ", ") + std::string(names[k]) + "=" + range_text(*ranges_[k]);
    }
    return "color_jitter(" + text + ")";
  }

 private:
  std::array<FactorRange, 4> ranges_;  // brightness, contrast, saturation, hue
};

// torchvision's Grayscale(channels) and RandomGrayscale(p) (which keeps the channel count).
class GrayscaleTransform : public Transform {
 public:
  GrayscaleTransform(int64_t channels, float p) : channels_(channels), p_(p) {}
  Shape output_shape(const Shape& input) const override {
    check_augment_input(input, description(), true);
    return {channels_ > 0 ? channels_ : input[0], input[1], input[2]};
  }
  void apply(Image& image, Random& random) const override {
    if (channels_ > 0) return to_grayscale(image, channels_);
    if (random.uniform01() < double(p_)) to_grayscale(image, image.channels());
  }
  bool is_random() const override { return channels_ == 0; }
  std::string description() const override {
    return channels_ > 0 ? "grayscale(" + std::to_string(channels_) + ")"
                         : "random_grayscale(" + number_text(p_) + ")";
  }

 private:
  int64_t channels_;  // 0: random_grayscale
  float p_;
};

// torchvision's RandomRotation (angle ~ U(lo, hi), counter-clockwise) and RandomAffine
// (get_params: angle ~ U(degrees), then t = round(U(-a W, a W)), round(U(-b H, b H)) for
// translate [a, b], then s ~ U(scale), then shear_x ~ U(shear[0..1]), shear_y ~ U(shear[2..3]);
// rounding half to even as Python's round).
class RandomAffineTransform : public Transform {
 public:
  struct Ranges {
    std::array<float, 2> degrees{};
    std::optional<std::array<float, 2>> translate, scale;
    std::vector<float> shear;  // none, [x_lo, x_hi] or [x_lo, x_hi, y_lo, y_hi]
    std::optional<std::array<double, 2>> center;
  };
  RandomAffineTransform(bool rotation_only, Ranges ranges, Interpolation interpolation,
                        std::optional<std::vector<float>> fill)
      : rotation_only_(rotation_only),
        ranges_(std::move(ranges)),
        interpolation_(interpolation),
        fill_(std::move(fill)) {}
  Shape output_shape(const Shape& input) const override {
    check_augment_input(input, description(), false, fill_ ? *fill_ : std::vector<float>{});
    return input;
  }
  void apply(Image& image, Random& random) const override {
    AffineParams params;
    params.center = ranges_.center;
    params.angle = random.uniform(ranges_.degrees[0], ranges_.degrees[1]);
    if (rotation_only_) params.angle = -params.angle;  // F.rotate: counter-clockwise
    if (ranges_.translate) {
      const double max_dx = double((*ranges_.translate)[0]) * double(image.width());
      const double max_dy = double((*ranges_.translate)[1]) * double(image.height());
      params.translate_x = std::nearbyint(random.uniform(-max_dx, max_dx));
      params.translate_y = std::nearbyint(random.uniform(-max_dy, max_dy));
    }
    if (ranges_.scale) params.scale = random.uniform((*ranges_.scale)[0], (*ranges_.scale)[1]);
    if (!ranges_.shear.empty()) params.shear_x = random.uniform(ranges_.shear[0], ranges_.shear[1]);
    if (ranges_.shear.size() == 4) {
      params.shear_y = random.uniform(ranges_.shear[2], ranges_.shear[3]);
    }
    affine(image, params, interpolation_, fill_);
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    std::string text =
        (rotation_only_ ? "random_rotation(" : "random_affine(") + range_text(ranges_.degrees);
    if (ranges_.translate) text += ", translate=" + range_text(*ranges_.translate);
    if (ranges_.scale) text += ", scale=" + range_text(*ranges_.scale);
    if (!ranges_.shear.empty()) text += ", shear=[" + list_text(ranges_.shear) + "]";
    if (ranges_.center) {
      text += ", center=[" + number_text((*ranges_.center)[0]) + ", " +
              number_text((*ranges_.center)[1]) + "]";
    }
    return text + warp_text(interpolation_, fill_) + ")";
  }

 private:
  bool rotation_only_;
  Ranges ranges_;
  Interpolation interpolation_;
  std::optional<std::vector<float>> fill_;
};

// torchvision's RandomErasing: with probability p, up to 10 tries of an area fraction
// s ~ U(scale) and a ratio r = exp(U(log ratio)), h = round(sqrt(s H W r)),
// w = round(sqrt(s H W / r)); the first with h < H and w < W is placed at top ~ U{0..H-h},
// left ~ U{0..W-w} and set to `value` (one, or one per channel) or, for value: random, to
// Normal(0, 1) draws; when no try fits the image stays.
class RandomErasingTransform : public Transform {
 public:
  RandomErasingTransform(float p, std::array<float, 2> scale, std::array<float, 2> ratio,
                         std::vector<float> value)
      : p_(p), scale_(scale), ratio_(ratio), value_(std::move(value)) {}
  Shape output_shape(const Shape& input) const override {
    check_augment_input(input, description(), false, value_);
    return input;
  }
  void apply(Image& image, Random& random) const override {
    if (!(random.uniform01() < double(p_))) return;
    const int64_t height = image.height(), width = image.width();
    const double area = double(height * width);
    const double log_lo = std::log(double(ratio_[0])), log_hi = std::log(double(ratio_[1]));
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double erase_area = area * random.uniform(scale_[0], scale_[1]);
      const double aspect = std::exp(random.uniform(log_lo, log_hi));
      const int64_t h = int64_t(std::nearbyint(std::sqrt(erase_area * aspect)));
      const int64_t w = int64_t(std::nearbyint(std::sqrt(erase_area / aspect)));
      if (!(h < height && w < width)) continue;
      const int64_t top = int64_t(random.below(uint64_t(height - h + 1)));
      const int64_t left = int64_t(random.below(uint64_t(width - w + 1)));
      for (int64_t c = 0; c < image.channels(); ++c) {
        float* plane = image.pixels.data() + c * height * width;  // [H, W]
        for (int64_t y = top; y < top + h; ++y) {
          for (int64_t x = left; x < left + w; ++x) {
            plane[y * width + x] = value_.empty()       ? float(random.gaussian(0.0, 1.0))
                                   : value_.size() == 1 ? value_[0]
                                                        : value_[size_t(c)];
          }
        }
      }
      return;
    }
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    return "random_erasing(" + number_text(p_) + ", scale=" + range_text(scale_) +
           ", ratio=" + range_text(ratio_) +
           ", value=" + (value_.empty() ? "random" : "[" + list_text(value_) + "]") + ")";
  }

 private:
  float p_;
  std::array<float, 2> scale_, ratio_;
  std::vector<float> value_;  // empty: Normal(0, 1) noise
};

// A jitter option: v -> [max(0, 1 - v), 1 + v] (hue: [-v, v], v <= 0.5), or [lo, hi] inside
// [0, inf) (hue: [-0.5, 0.5]); none when absent or when it is the identity [1, 1] ([0, 0]).
FactorRange jitter_range(const SpecReader& reader, const std::string& name) {
  if (!reader.has(name)) return std::nullopt;
  const bool hue = name == "hue";
  const float center = hue ? 0.0f : 1.0f;
  const float lo_bound = hue ? -0.5f : 0.0f, hi_bound = hue ? 0.5f : INFINITY;
  const std::vector<float> values = reader.get(name, 1, 2);
  std::array<float, 2> range{};
  if (values.size() == 1) {
    if (values[0] < 0.0f || (hue && values[0] > 0.5f)) {
      reader.fail("'" + name + "' must be " + (hue ? "in [0, 0.5]" : "non-negative") + ", got " +
                  number_text(values[0]));
    }
    range = {std::max(lo_bound, center - values[0]), center + values[0]};
  } else {
    range = {values[0], values[1]};
    if (!(lo_bound <= range[0] && range[0] <= range[1] && range[1] <= hi_bound)) {
      reader.fail("'" + name + "' must be [lo, hi] with " + number_text(lo_bound) + " <= lo <= hi" +
                  (hue ? " <= 0.5" : "") + ", got " + range_text(range));
    }
  }
  if (range[0] == center && range[1] == center) return std::nullopt;
  return range;
}

// degrees: d -> [-d, d] (d >= 0), or [lo, hi].
std::array<float, 2> symmetric_range(const SpecReader& reader, const std::string& name,
                                     std::vector<float> values) {
  if (values.size() == 1) {
    if (values[0] < 0.0f) {
      reader.fail("'" + name + "' must be non-negative when one value, got " +
                  number_text(values[0]));
    }
    return {-values[0], values[0]};
  }
  if (values[0] > values[1]) {
    reader.fail("'" + name + "' must be [lo, hi] with lo <= hi, got [" + list_text(values) + "]");
  }
  return {values[0], values[1]};
}

std::unique_ptr<Transform> make_random_affine(const TransformSpec& spec) {
  const bool rotation = spec.kind == "random_rotation";
  const SpecReader reader =
      rotation ? SpecReader(spec, "degrees", {"degrees", "center", "fill"}, {"interpolation"})
               : SpecReader(spec, "degrees",
                            {"degrees", "translate", "scale", "shear", "center", "fill"},
                            {"interpolation"});
  RandomAffineTransform::Ranges ranges;
  ranges.degrees = symmetric_range(reader, "degrees", reader.get("degrees", 1, 2));
  if (reader.has("center")) {
    const std::vector<float> center = reader.get("center", 2, 2);
    ranges.center = std::array<double, 2>{center[0], center[1]};
  }
  if (!rotation && reader.has("translate")) {
    const std::vector<float> t = reader.get("translate", 2, 2);
    if (t[0] < 0.0f || t[0] > 1.0f || t[1] < 0.0f || t[1] > 1.0f) {
      reader.fail("'translate' must be fractions [a, b] in [0, 1], got [" + list_text(t) + "]");
    }
    ranges.translate = std::array<float, 2>{t[0], t[1]};
  }
  if (!rotation && reader.has("scale")) {
    const std::vector<float> s = reader.range("scale", {}, 0.0f);
    ranges.scale = std::array<float, 2>{s[0], s[1]};
  }
  if (!rotation && reader.has("shear")) {
    const std::vector<float> s = reader.get("shear", 1, 4);
    if (s.size() == 3) reader.fail("'shear' has 3 values, expected 1, 2 or 4");
    const std::array<float, 2> x =
        symmetric_range(reader, "shear", s.size() == 1 ? s : std::vector<float>{s[0], s[1]});
    ranges.shear = {x[0], x[1]};
    if (s.size() == 4) {
      const std::array<float, 2> y = symmetric_range(reader, "shear", {s[2], s[3]});
      ranges.shear.insert(ranges.shear.end(), {y[0], y[1]});
    }
  }
  return std::make_unique<RandomAffineTransform>(rotation, std::move(ranges),
                                                 read_interpolation(reader),
                                                 read_fill(reader, std::vector<float>{0.0f}));
}

std::unique_ptr<Transform> make_random_erasing(const TransformSpec& spec) {
  const SpecReader reader(spec, "p", {"p", "scale", "ratio", "value"}, {"value"});
  const float p = reader.probability("p", 0.5f);
  const std::vector<float> scale = reader.range("scale", {0.02f, 0.33f}, 1.0f);
  const std::vector<float> ratio = reader.range("ratio", {0.3f, 3.3f}, 0.0f);
  std::vector<float> value = {0.0f};
  if (reader.has_word("value")) {
    reader.word("value", {"random"}, "");
    value.clear();
  } else if (reader.has("value")) {
    value = reader.get("value", 1, 4096);
  }
  return std::make_unique<RandomErasingTransform>(p, std::array<float, 2>{scale[0], scale[1]},
                                                  std::array<float, 2>{ratio[0], ratio[1]},
                                                  std::move(value));
}

}  // namespace

Interpolation read_interpolation(const SpecReader& reader) {
  return reader.word("interpolation", {"nearest", "bilinear"}, "nearest") == "bilinear"
             ? Interpolation::bilinear
             : Interpolation::nearest;
}

std::optional<std::vector<float>> read_fill(const SpecReader& reader,
                                            std::optional<std::vector<float>> fallback) {
  return reader.has("fill") ? reader.get("fill", 1, 4096) : std::move(fallback);
}

void check_augment_input(const Shape& shape, const std::string& description, bool color,
                         const std::vector<float>& values) {
  if (shape.size() != 3 || (color && shape[0] != 1 && shape[0] != 3)) {
    throw Error("transform " + description + " needs " + (color ? "1- or 3-channel " : "") +
                "C x H x W samples; these are " + shape_str(shape));
  }
  if (values.size() > 1 && int64_t(values.size()) != shape[0]) {
    throw Error("transform " + description + " has " + std::to_string(values.size()) +
                " per-channel values for samples of shape " + shape_str(shape) +
                "; give one value or one per channel");
  }
}

std::string warp_text(Interpolation interpolation, const std::optional<std::vector<float>>& fill) {
  return std::string(", interpolation=") +
         (interpolation == Interpolation::nearest ? "nearest" : "bilinear") +
         (fill ? ", fill=[" + list_text(*fill) + "]" : std::string());
}

std::unique_ptr<Transform> make_augment_transform(const TransformSpec& spec) {
  const std::string& kind = spec.kind;
  if (kind == "color_jitter") {
    const SpecReader reader(spec, "", {"brightness", "contrast", "saturation", "hue"});
    return std::make_unique<ColorJitterTransform>(std::array<FactorRange, 4>{
        jitter_range(reader, "brightness"), jitter_range(reader, "contrast"),
        jitter_range(reader, "saturation"), jitter_range(reader, "hue")});
  }
  if (kind == "grayscale") {
    const SpecReader reader(spec, "channels", {"channels"});
    const int channels = reader.whole("channels", 1, 3, 1);
    if (channels == 2) reader.fail("'channels' must be 1 or 3, got 2");
    return std::make_unique<GrayscaleTransform>(channels, 1.0f);
  }
  if (kind == "random_grayscale") {
    const SpecReader reader(spec, "p", {"p"});
    return std::make_unique<GrayscaleTransform>(0, reader.probability("p", 0.1f));
  }
  if (kind == "random_rotation" || kind == "random_affine") return make_random_affine(spec);
  if (kind == "random_erasing") return make_random_erasing(spec);
  return nullptr;
}

}  // namespace crema::data
