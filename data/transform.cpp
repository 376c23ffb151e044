#include "data/transform.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "core/error.h"

namespace crema::data {
namespace {

std::string format_values(const std::string& kind, const std::vector<float>& values) {
  std::string text = kind + "(";
  for (size_t i = 0; i < values.size(); ++i) {
    char number[32];
    std::snprintf(number, sizeof(number), "%.7g", double(values[i]));
    text += (i > 0 ? ", " : "") + std::string(number);
  }
  return text + ")";
}

// x <- x * factor over the whole sample.
class ScaleTransform : public Transform {
 public:
  explicit ScaleTransform(float factor) : factor_(factor) {}
  void apply(float* sample, const Shape& sample_shape) const override {
    const int64_t n = shape_numel(sample_shape);
    for (int64_t i = 0; i < n; ++i) sample[i] *= factor_;
  }
  std::string description() const override { return format_values("scale", {factor_}); }

 private:
  float factor_;
};

// The common part of mean and std: one value for the whole sample, or one per channel, where
// the channel is the sample's first axis (C of C x H x W) and the rest is one plane.
class ChannelTransform : public Transform {
 public:
  ChannelTransform(std::string kind, std::vector<float> values)
      : kind_(std::move(kind)), values_(std::move(values)) {}

  void check(const Shape& sample_shape) const override {
    const int64_t channels = sample_shape.empty() ? 1 : sample_shape[0];
    if (values_.size() != 1 && int64_t(values_.size()) != channels) {
      throw Error("transform " + description() + " has " + std::to_string(values_.size()) +
                  " values for samples of shape " + shape_str(sample_shape) + " with " +
                  std::to_string(channels) + " channels; give one value or one per channel");
    }
  }

  void apply(float* sample, const Shape& sample_shape) const override {
    const int64_t channels = sample_shape.empty() ? 1 : sample_shape[0];
    const int64_t plane =
        sample_shape.empty() ? 1 : shape_count(sample_shape, 1, int(sample_shape.size()));
    for (int64_t c = 0; c < channels; ++c) {
      const float value = values_.size() == 1 ? values_[0] : values_[size_t(c)];
      apply_plane(sample + c * plane, plane, value);
    }
  }

  std::string description() const override { return format_values(kind_, values_); }

 private:
  virtual void apply_plane(float* plane, int64_t count, float value) const = 0;

  std::string kind_;
  std::vector<float> values_;
};

// x <- x - mean
class MeanTransform : public ChannelTransform {
 public:
  explicit MeanTransform(std::vector<float> means) : ChannelTransform("mean", std::move(means)) {}

 private:
  void apply_plane(float* plane, int64_t count, float mean) const override {
    for (int64_t i = 0; i < count; ++i) plane[i] -= mean;
  }
};

// x <- x / std
class StdTransform : public ChannelTransform {
 public:
  explicit StdTransform(std::vector<float> stds) : ChannelTransform("std", std::move(stds)) {}

 private:
  void apply_plane(float* plane, int64_t count, float stddev) const override {
    for (int64_t i = 0; i < count; ++i) plane[i] /= stddev;
  }
};

std::string known_kinds_text() {
  std::string text;
  for (const std::string& kind : transform_kinds()) text += (text.empty() ? "" : ", ") + kind;
  return text;
}

}  // namespace

const std::vector<std::string>& transform_kinds() {
  static const std::vector<std::string> kinds = {"scale", "mean", "std"};
  return kinds;
}

std::unique_ptr<Transform> make_transform(const TransformSpec& spec) {
  const std::string& kind = spec.kind;
  const std::vector<float>& values = spec.values;
  const std::vector<std::string>& kinds = transform_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    throw Error("unknown transform '" + kind + "' (known: " + known_kinds_text() + ")");
  }
  if (values.empty() || (kind == "scale" && values.size() != 1)) {
    throw Error(format_values("transform " + kind, values) + " needs " +
                (kind == "scale" ? "exactly one value" : "one value or one per channel"));
  }
  for (float value : values) {
    if (!std::isfinite(value) || (kind == "std" && value <= 0.0f)) {
      throw Error(format_values("transform " + kind, values) + ": every value must be " +
                  (kind == "std" ? "positive and finite" : "finite"));
    }
  }
  if (kind == "scale") return std::make_unique<ScaleTransform>(values[0]);
  if (kind == "mean") return std::make_unique<MeanTransform>(values);
  return std::make_unique<StdTransform>(values);
}

}  // namespace crema::data
