#include "data/pixel_plan.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "data/color_ops.h"

namespace crema::data {
namespace {

PlanAxis identity_axis(int64_t size, int64_t offset) {
  PlanAxis axis;
  axis.first.resize(size_t(size));
  axis.weights.assign(size_t(size), 1.0f);
  for (int64_t i = 0; i < size; ++i) axis.first[size_t(i)] = int32_t(offset + i);
  return axis;
}

bool is_identity(const PlanAxis& axis) {
  if (axis.taps != 1) return false;
  for (int64_t i = 0; i < axis.size(); ++i) {
    if (axis.first[size_t(i)] != i || axis.weights[size_t(i)] != 1.0f) return false;
  }
  return true;
}

// in_size source samples from `offset` resampled to out_size (resample.h; the same size is the
// identity, as resample_planes skips that pass).
PlanAxis resampled_axis(int64_t offset, int64_t in_size, int64_t out_size, ResizeMode mode) {
  if (in_size == out_size) return identity_axis(out_size, offset);
  const ResampleAxis weights = resample_axis(in_size, out_size, mode);
  PlanAxis axis;
  axis.taps = weights.taps;
  axis.weights = weights.weights;
  axis.first.resize(size_t(out_size));
  for (int64_t i = 0; i < out_size; ++i) {
    axis.first[size_t(i)] = int32_t(offset + weights.first[size_t(i)]);
  }
  return axis;
}

// Outputs [start, start + size) of `axis`; those outside it become padding (first -1, weight 0).
PlanAxis cropped_axis(const PlanAxis& axis, int64_t start, int64_t size) {
  PlanAxis out;
  out.taps = axis.taps;
  out.first.assign(size_t(size), -1);
  out.weights.assign(size_t(size * axis.taps), 0.0f);
  for (int64_t i = 0; i < size; ++i) {
    const int64_t from = start + i;
    if (from < 0 || from >= axis.size()) continue;
    out.first[size_t(i)] = axis.first[size_t(from)];
    std::copy_n(axis.weights.begin() + from * axis.taps, axis.taps,
                out.weights.begin() + i * axis.taps);
  }
  return out;
}

void require_no_steps(const PixelPlan& plan, const std::string& what) {
  if (!plan.steps.empty()) {
    throw Error("transform " + what +
                " comes after a colour transform; decode: gpu runs the crops and resizes first, "
                "so put it before scale, normalize and color_jitter");
  }
}

float gray_of(const float* x, int64_t plane, int64_t channels) {
  return channels == 3 ? 0.2989f * x[0] + 0.587f * x[plane] + 0.114f * x[2 * plane] : x[0];
}

inline float blend(float x, float y, float ratio, float complement) {
  return std::clamp(ratio * x + complement * y, 0.0f, 1.0f);
}

void run_step(const ColorStep& step, Image& image) {
  const int64_t channels = image.channels(), plane = image.height() * image.width();
  float* x = image.pixels.data();  // [C, plane]
  const float complement = float(1.0 - double(step.factor));
  switch (step.kind) {
    case ColorStep::affine:
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t i = 0; i < plane; ++i) {
          float& v = x[c * plane + i];
          v = (v * step.mul[c] - step.sub[c]) / step.div[c];
        }
      }
      return;
    case ColorStep::brightness:
      for (float& v : image.pixels) v = blend(v, 0.0f, step.factor, complement);
      return;
    case ColorStep::contrast: {
      double sum = 0.0;
      for (int64_t i = 0; i < plane; ++i) sum += gray_of(x + i, plane, channels);
      const float mean = float(sum / double(plane));
      for (float& v : image.pixels) v = blend(v, mean, step.factor, complement);
      return;
    }
    case ColorStep::saturation:
      if (channels == 1) return;
      for (int64_t i = 0; i < plane; ++i) {
        const float gray = gray_of(x + i, plane, channels);
        for (int64_t c = 0; c < 3; ++c) {
          x[c * plane + i] = blend(x[c * plane + i], gray, step.factor, complement);
        }
      }
      return;
    case ColorStep::hue:
      adjust_hue(image, step.factor);
      return;
  }
}

}  // namespace

PixelPlan identity_plan(int64_t channels, Size2 source) {
  CREMA_CHECK(channels == 1 || channels == 3, "a PixelPlan is for 1- or 3-channel images");
  PixelPlan plan;
  plan.channels = channels;
  plan.source = source;
  plan.rows = identity_axis(source.height, 0);
  plan.cols = identity_axis(source.width, 0);
  return plan;
}

void plan_resample(PixelPlan& plan, const CropBox& box, Size2 size, ResizeMode mode,
                   const std::string& what) {
  require_no_steps(plan, what);
  if (plan.resampled || !is_identity(plan.rows) || !is_identity(plan.cols)) {
    throw Error("transform " + what +
                " follows another crop, resize or flip; decode: gpu resamples once, so a resize "
                "or random_resized_crop must be the first transform");
  }
  CREMA_CHECK(box.top >= 0 && box.left >= 0 && box.top + box.height <= plan.source.height &&
                  box.left + box.width <= plan.source.width,
              "plan_resample: the box is not inside the source");
  plan.rows = resampled_axis(box.top, box.height, size.height, mode);
  plan.cols = resampled_axis(box.left, box.width, size.width, mode);
  plan.resampled = true;
}

void plan_crop(PixelPlan& plan, const CropBox& box, const std::string& what) {
  require_no_steps(plan, what);
  plan.rows = cropped_axis(plan.rows, box.top, box.height);
  plan.cols = cropped_axis(plan.cols, box.left, box.width);
}

void plan_flip(PixelPlan& plan) {
  PlanAxis& cols = plan.cols;
  const int64_t n = cols.size(), taps = cols.taps;
  for (int64_t i = 0; i < n / 2; ++i) {
    const int64_t j = n - 1 - i;
    std::swap(cols.first[size_t(i)], cols.first[size_t(j)]);
    std::swap_ranges(cols.weights.begin() + i * taps, cols.weights.begin() + (i + 1) * taps,
                     cols.weights.begin() + j * taps);
  }
}

void run_pixel_plan(const PixelPlan& plan, const Image& source, Image& out) {
  CREMA_CHECK(source.channels() == plan.channels && source.height() == plan.source.height &&
                  source.width() == plan.source.width,
              "run_pixel_plan: the source is " + shape_str(source.shape) + ", the plan's " +
                  std::to_string(plan.source.height) + " x " + std::to_string(plan.source.width));
  const int64_t H = plan.height(), W = plan.width(), in_w = source.width();
  const int64_t in_plane = source.height() * in_w;
  out.reset({plan.channels, H, W});
  for (int64_t c = 0; c < plan.channels; ++c) {
    const float* in = source.pixels.data() + c * in_plane;  // [in_h, in_w]
    for (int64_t y = 0; y < H; ++y) {
      const int32_t row0 = plan.rows.first[size_t(y)];
      const float* wy = plan.rows.weights.data() + y * plan.rows.taps;
      for (int64_t x = 0; x < W; ++x) {
        const int32_t col0 = plan.cols.first[size_t(x)];
        const float* wx = plan.cols.weights.data() + x * plan.cols.taps;
        float sum = 0.0f;
        if (row0 >= 0 && col0 >= 0) {
          for (int64_t i = 0; i < plan.rows.taps; ++i) {
            const float* row = in + (row0 + i) * in_w + col0;
            float across = 0.0f;
            for (int64_t j = 0; j < plan.cols.taps; ++j) across += wx[j] * row[j];
            sum += wy[i] * across;
          }
        }
        out.pixels[size_t((c * H + y) * W + x)] = sum;
      }
    }
  }
  for (const ColorStep& step : plan.steps) run_step(step, out);
}

}  // namespace crema::data
