#include "data/transform.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/error.h"
#include "data/augment.h"
#include "data/image_ops.h"
#include "data/pixel_plan.h"
#include "data/spec_reader.h"

namespace crema::data {
namespace {

std::string size_text(const Size2& size) {
  return std::to_string(size.height) + ", " + std::to_string(size.width);
}

// The sample must be C x H x W for the geometric transforms.
void require_chw(const Shape& shape, const std::string& what) {
  if (shape.size() != 3) {
    throw Error("transform " + what + " needs C x H x W samples; these are " + shape_str(shape));
  }
}

// `box`, drawn on the file's `full` size, on the file decoded at 1/r (ceil(full / r) per side):
// its edges divided by r and rounded (half up), at least one pixel, inside the reduced image.
CropBox reduced_box(const CropBox& box, Size2 full, int64_t r) {
  if (r == 1) return box;
  const int64_t height = (full.height + r - 1) / r, width = (full.width + r - 1) / r;
  auto scaled = [r](int64_t edge) { return (2 * edge + r) / (2 * r); };
  CropBox out;
  out.top = std::min(scaled(box.top), height - 1);
  out.left = std::min(scaled(box.left), width - 1);
  out.height = std::max<int64_t>(1, std::min(scaled(box.top + box.height), height) - out.top);
  out.width = std::max<int64_t>(1, std::min(scaled(box.left + box.width), width) - out.left);
  return out;
}

// Resizes the window `box` of `image` to `size`, in `image`. The result is written into a spare
// Image of this thread, which then trades places with `image`: the loader reuses one sample
// Image per worker, so both buffers keep their capacity and no sample allocates (and page-faults
// in) a fresh one.
void resize_in_place(Image& image, const CropBox& box, Size2 size, ResizeMode mode) {
  thread_local Image spare;
  resize_box(image, box, size.height, size.width, spare, mode);
  std::swap(image, spare);
}

std::string mode_text(ResizeMode mode) {
  return std::string(", ") + interpolation_name(mode.interpolation) +
         (mode.antialias ? "" : ", antialias=false");
}

// x <- x * factor over the whole sample.
class ScaleTransform : public Transform {
 public:
  explicit ScaleTransform(float factor) : factor_(factor) {}
  Shape output_shape(const Shape& input) const override { return input; }
  void apply(Image& image, Random&) const override {
    for (float& x : image.pixels) x *= factor_;
  }
  void plan(PixelPlan& plan, Random&) const override {
    ColorStep step;
    std::fill(std::begin(step.mul), std::end(step.mul), factor_);
    plan.steps.push_back(step);
  }
  std::string description() const override { return "scale(" + number_text(factor_) + ")"; }

 private:
  float factor_;
};

// x[c] <- (x[c] - mean_c) / std_c, the channel being the sample's first axis (C of C x H x W);
// `mean`, `std` and `normalize` are this with no std, no mean, or both. A list of one value
// applies to every channel.
class ChannelTransform : public Transform {
 public:
  ChannelTransform(std::string kind, std::vector<float> means, std::vector<float> stds)
      : kind_(std::move(kind)), means_(std::move(means)), stds_(std::move(stds)) {}

  Shape output_shape(const Shape& input) const override {
    const int64_t channels = input.empty() ? 1 : input[0];
    for (const std::vector<float>* values : {&means_, &stds_}) {
      if (values->size() > 1 && int64_t(values->size()) != channels) {
        throw Error("transform " + description() + " has " + std::to_string(values->size()) +
                    " values for samples of shape " + shape_str(input) + " with " +
                    std::to_string(channels) + " channels; give one value or one per channel");
      }
    }
    return input;
  }

  void apply(Image& image, Random&) const override {
    const Shape& shape = image.shape;
    const int64_t channels = shape.empty() ? 1 : shape[0];
    const int64_t plane = shape.empty() ? 1 : shape_count(shape, 1, int(shape.size()));
    for (int64_t c = 0; c < channels; ++c) {
      float* x = image.pixels.data() + c * plane;  // [plane]
      if (!means_.empty()) {
        const float mean = means_[means_.size() == 1 ? 0 : size_t(c)];
        for (int64_t i = 0; i < plane; ++i) x[i] -= mean;
      }
      if (!stds_.empty()) {
        const float stddev = stds_[stds_.size() == 1 ? 0 : size_t(c)];
        for (int64_t i = 0; i < plane; ++i) x[i] /= stddev;
      }
    }
  }

  void plan(PixelPlan& plan, Random&) const override {
    ColorStep step;
    for (int64_t c = 0; c < plan.channels; ++c) {
      if (!means_.empty()) step.sub[c] = means_[means_.size() == 1 ? 0 : size_t(c)];
      if (!stds_.empty()) step.div[c] = stds_[stds_.size() == 1 ? 0 : size_t(c)];
    }
    plan.steps.push_back(step);
  }

  std::string description() const override {
    if (stds_.empty()) return kind_ + "(" + list_text(means_) + ")";
    if (means_.empty()) return kind_ + "(" + list_text(stds_) + ")";
    return kind_ + "(mean=[" + list_text(means_) + "], std=[" + list_text(stds_) + "])";
  }

 private:
  std::string kind_;
  std::vector<float> means_, stds_;
};

class ResizeTransform : public Transform {
 public:
  // shorter_side: size.height is the new shorter side; otherwise size is exact.
  ResizeTransform(Size2 size, bool shorter_side, ResizeMode mode)
      : size_(size), shorter_side_(shorter_side), mode_(mode) {}
  Shape output_shape(const Shape& input) const override {
    require_chw(input, description());
    const Size2 out = target(input[1], input[2]);
    return {input[0], out.height, out.width};
  }
  DecodePlan decode_plan(Size2 full, Random) const override {
    DecodePlan plan;
    plan.reduction = decode_reduction_for(full, target(full.height, full.width));
    return plan;
  }
  void apply(Image& image, Random&) const override {
    const Size2 out = target(image.full_size());  // the target follows the file's own size
    if (!image.is_part() && out.height == image.height() && out.width == image.width()) return;
    resize_in_place(image, {0, 0, image.height(), image.width()}, out, mode_);
  }
  void plan(PixelPlan& plan, Random&) const override {
    const Size2 out = target(plan.height(), plan.width());
    plan_resample(plan, {0, 0, plan.height(), plan.width()}, out, mode_, description());
  }
  std::string description() const override {
    return "resize(" + (shorter_side_ ? std::to_string(size_.height) : size_text(size_)) +
           mode_text(mode_) + ")";
  }

 private:
  Size2 target(Size2 in) const { return target(in.height, in.width); }
  Size2 target(int64_t height, int64_t width) const {
    return shorter_side_ ? shorter_side_size(height, width, size_.height) : size_;
  }
  Size2 size_;
  bool shorter_side_;
  ResizeMode mode_;
};

class CenterCropTransform : public Transform {
 public:
  explicit CenterCropTransform(Size2 size) : size_(size) {}
  Shape output_shape(const Shape& input) const override {
    require_chw(input, description());
    return {input[0], size_.height, size_.width};
  }
  void apply(Image& image, Random&) const override {
    Image out;
    crop(image, center_crop_box(image.height(), image.width(), size_.height, size_.width), out);
    std::swap(image, out);
  }
  void plan(PixelPlan& plan, Random&) const override {
    plan_crop(plan, center_crop_box(plan.height(), plan.width(), size_.height, size_.width),
              description());
  }
  std::string description() const override { return "center_crop(" + size_text(size_) + ")"; }

 private:
  Size2 size_;
};

// torchvision's RandomCrop(size, padding): `padding` zero rows above and below and columns left
// and right, then a window placed uniformly: top ~ U{0..H + 2p - h}, then left likewise.
class RandomCropTransform : public Transform {
 public:
  RandomCropTransform(Size2 size, int64_t padding) : size_(size), padding_(padding) {}
  Shape output_shape(const Shape& input) const override {
    require_chw(input, description());
    check_fits(input[1], input[2]);
    return {input[0], size_.height, size_.width};
  }
  void apply(Image& image, Random& random) const override {
    check_fits(image.height(), image.width());
    const int64_t top =
        int64_t(random.below(uint64_t(image.height() + 2 * padding_ - size_.height + 1)));
    const int64_t left =
        int64_t(random.below(uint64_t(image.width() + 2 * padding_ - size_.width + 1)));
    Image out;
    crop(image, {top - padding_, left - padding_, size_.height, size_.width}, out);
    std::swap(image, out);
  }
  void plan(PixelPlan& plan, Random& random) const override {
    check_fits(plan.height(), plan.width());
    const int64_t top =
        int64_t(random.below(uint64_t(plan.height() + 2 * padding_ - size_.height + 1)));
    const int64_t left =
        int64_t(random.below(uint64_t(plan.width() + 2 * padding_ - size_.width + 1)));
    plan_crop(plan, {top - padding_, left - padding_, size_.height, size_.width}, description());
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    return "random_crop(" + size_text(size_) + ", padding=" + std::to_string(padding_) + ")";
  }

 private:
  void check_fits(int64_t height, int64_t width) const {
    if (height + 2 * padding_ < size_.height || width + 2 * padding_ < size_.width) {
      throw Error("transform " + description() + ": the window is larger than the " +
                  std::to_string(height) + " x " + std::to_string(width) +
                  " image with its padding; resize first or pad more");
    }
  }
  Size2 size_;
  int64_t padding_;
};

class RandomResizedCropTransform : public Transform {
 public:
  RandomResizedCropTransform(Size2 size, std::vector<float> scale, std::vector<float> ratio,
                             ResizeMode mode)
      : size_(size), scale_(std::move(scale)), ratio_(std::move(ratio)), mode_(mode) {}
  Shape output_shape(const Shape& input) const override {
    require_chw(input, description());
    return {input[0], size_.height, size_.width};
  }
  // Only the box is decoded, at the reduction it allows.
  DecodePlan decode_plan(Size2 full, Random random) const override {
    const CropBox box = draw(full, random);
    DecodePlan plan;
    plan.reduction = decode_reduction_for({box.height, box.width}, size_);
    const CropBox window = reduced_box(box, full, plan.reduction);
    plan.top = window.top;
    plan.left = window.left;
    plan.height = window.height;
    plan.width = window.width;
    return plan;
  }
  // The box, drawn on the file's size, mapped onto the decoded part (the whole of it when it
  // was decoded for this box).
  void apply(Image& image, Random& random) const override {
    const Size2 full = image.full_size();
    CropBox box = reduced_box(draw(full, random), full, image.reduction);
    box.top -= image.top;
    box.left -= image.left;
    resize_in_place(image, box, size_, mode_);
  }
  // The box on the source, which decode: gpu decodes whole.
  void plan(PixelPlan& plan, Random& random) const override {
    plan_resample(plan, draw(plan.source, random), size_, mode_, description());
  }
  bool is_random() const override { return true; }
  std::string description() const override {
    return "random_resized_crop(" + size_text(size_) + ", scale=[" + list_text(scale_) +
           "], ratio=[" + list_text(ratio_) + "]" + mode_text(mode_) + ")";
  }

 private:
  CropBox draw(Size2 full, Random& random) const {
    return random_resized_crop_box(full.height, full.width, scale_[0], scale_[1], ratio_[0],
                                   ratio_[1], random);
  }
  Size2 size_;
  std::vector<float> scale_, ratio_;  // [lo, hi] each
  ResizeMode mode_;
};

class HorizontalFlipTransform : public Transform {
 public:
  explicit HorizontalFlipTransform(float p) : p_(p) {}
  Shape output_shape(const Shape& input) const override {
    require_chw(input, description());
    return input;
  }
  void apply(Image& image, Random& random) const override {
    if (random.uniform01() < double(p_)) flip_horizontal(image);
  }
  void plan(PixelPlan& plan, Random& random) const override {
    if (random.uniform01() < double(p_)) plan_flip(plan);
  }
  bool is_random() const override { return true; }
  std::string description() const override { return "horizontal_flip(" + number_text(p_) + ")"; }

 private:
  float p_;
};

// resize's and random_resized_crop's interpolation (bilinear) and antialias (true) words.
ResizeMode resize_mode(const SpecReader& reader) {
  ResizeMode mode;
  mode.interpolation = parse_interpolation(
      reader.word("interpolation", {"nearest", "bilinear", "bicubic"}, "bilinear"));
  mode.antialias = reader.word("antialias", {"true", "false"}, "true") == "true";
  return mode;
}

std::string known_kinds_text() {
  std::string text;
  for (const std::string& kind : transform_kinds()) text += (text.empty() ? "" : ", ") + kind;
  return text;
}

std::unique_ptr<Transform> make_channel_transform(const TransformSpec& spec) {
  const bool normalize = spec.kind == "normalize";
  if (!spec.preset.empty()) {
    const auto& presets = normalize_presets();
    const auto found = presets.find(spec.preset);
    if (!normalize || found == presets.end() || !spec.values.empty() || !spec.options.empty()) {
      std::string known;
      for (const auto& entry : presets) known += (known.empty() ? "" : ", ") + entry.first;
      throw Error("transform " + spec.kind + ": '" + spec.preset +
                  "' is not a value or a preset (normalize's presets: " + known + ")");
    }
    return std::make_unique<ChannelTransform>(spec.kind, found->second.first, found->second.second);
  }
  SpecReader reader(
      spec, normalize ? "" : "values",
      normalize ? std::vector<std::string>{"mean", "std"} : std::vector<std::string>{"values"});
  std::vector<float> means, stds;
  if (spec.kind != "std") means = reader.get(normalize ? "mean" : "values", 1, 4096);
  if (spec.kind != "mean") stds = reader.get(normalize ? "std" : "values", 1, 4096);
  for (float s : stds) {
    if (s <= 0.0f) reader.fail("every std must be positive, got [" + list_text(stds) + "]");
  }
  return std::make_unique<ChannelTransform>(spec.kind, std::move(means), std::move(stds));
}

}  // namespace

const std::map<std::string, std::pair<std::vector<float>, std::vector<float>>>&
normalize_presets() {
  static const auto presets = [] {
    const std::vector<float> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};
    std::vector<float> mean_255, std_255;
    for (float m : mean) mean_255.push_back(m * 255.0f);
    for (float s : std) std_255.push_back(s * 255.0f);
    return std::map<std::string, std::pair<std::vector<float>, std::vector<float>>>{
        {"imagenet", {mean, std}}, {"imagenet_255", {mean_255, std_255}}};
  }();
  return presets;
}

void Transform::plan(PixelPlan&, Random&) const {
  throw Error("transform " + description() + " has no GPU form; decode: gpu runs " +
              pixel_plan_kinds() + " (or decode: cpu runs every transform)");
}

const char* pixel_plan_kinds() {
  return "resize, center_crop, random_crop, random_resized_crop, horizontal_flip, scale, mean, "
         "std, normalize and color_jitter";
}

int decode_reduction_for(Size2 region, Size2 output) {
  for (int r : {8, 4, 2}) {
    if (region.height >= r * output.height && region.width >= r * output.width) return r;
  }
  return 1;
}

const std::vector<std::string>& transform_kinds() {
  static const std::vector<std::string> kinds = {"scale",
                                                 "mean",
                                                 "std",
                                                 "normalize",
                                                 "resize",
                                                 "center_crop",
                                                 "random_crop",
                                                 "random_resized_crop",
                                                 "horizontal_flip",
                                                 "color_jitter",
                                                 "grayscale",
                                                 "random_grayscale",
                                                 "random_rotation",
                                                 "random_affine",
                                                 "random_erasing",
                                                 "trivial_augment_wide",
                                                 "rand_augment"};
  return kinds;
}

std::unique_ptr<Transform> make_transform(const TransformSpec& spec) {
  const std::string& kind = spec.kind;
  const std::vector<std::string>& kinds = transform_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    throw Error("unknown transform '" + kind + "' (known: " + known_kinds_text() + ")");
  }
  if (kind == "mean" || kind == "std" || kind == "normalize") return make_channel_transform(spec);
  if (!spec.preset.empty()) {
    throw Error("transform " + kind + ": '" + spec.preset +
                "' is not a value (only normalize "
                "takes a preset name)");
  }
  if (kind == "trivial_augment_wide" || kind == "rand_augment") {
    return make_auto_augment_transform(spec);
  }
  if (std::unique_ptr<Transform> augment = make_augment_transform(spec)) return augment;
  if (kind == "scale") {
    const SpecReader reader(spec, "factor", {"factor"});
    return std::make_unique<ScaleTransform>(reader.get("factor", 1, 1)[0]);
  }
  if (kind == "horizontal_flip") {
    const SpecReader reader(spec, "p", {"p"});
    const float p = reader.has("p") ? reader.get("p", 1, 1)[0] : 0.5f;
    if (p < 0.0f || p > 1.0f) reader.fail("p must lie in [0, 1], got " + number_text(p));
    return std::make_unique<HorizontalFlipTransform>(p);
  }
  bool single = false;
  if (kind == "resize") {
    const SpecReader reader(spec, "size", {"size"}, {"interpolation", "antialias"});
    const Size2 size = reader.size("size", single);
    return std::make_unique<ResizeTransform>(size, single, resize_mode(reader));
  }
  if (kind == "center_crop") {
    const SpecReader reader(spec, "size", {"size"});
    return std::make_unique<CenterCropTransform>(reader.size("size", single));
  }
  if (kind == "random_crop") {
    const SpecReader reader(spec, "size", {"size", "padding"});
    const Size2 size = reader.size("size", single);
    const float padding = reader.has("padding") ? reader.get("padding", 1, 1)[0] : 0.0f;
    if (padding < 0.0f || padding != std::floor(padding) || padding > 65536.0f) {
      reader.fail("padding must be a whole number of pixels from 0, got " + number_text(padding));
    }
    return std::make_unique<RandomCropTransform>(size, int64_t(padding));
  }
  const SpecReader reader(spec, "size", {"size", "scale", "ratio"}, {"interpolation", "antialias"});
  const Size2 size = reader.size("size", single);
  return std::make_unique<RandomResizedCropTransform>(
      size, reader.range("scale", {0.08f, 1.0f}, 1.0f),
      reader.range("ratio", {3.0f / 4.0f, 4.0f / 3.0f}, 0.0f), resize_mode(reader));
}

}  // namespace crema::data
