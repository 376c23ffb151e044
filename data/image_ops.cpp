#include "data/image_ops.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace crema::data {
namespace {

// Python's round() for the crop arithmetic: halves go to the even neighbour (std::nearbyint in
// the default rounding mode).
int64_t round_half_even(double x) {
  return int64_t(std::nearbyint(x));
}

}  // namespace

Size2 shorter_side_size(int64_t height, int64_t width, int64_t size) {
  if (width <= height) return {int64_t(double(size) * double(height) / double(width)), size};
  return {size, int64_t(double(size) * double(width) / double(height))};
}

CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_height, int64_t crop_width) {
  auto offset = [](int64_t extent, int64_t crop) {
    return crop > extent ? -((crop - extent) / 2) : round_half_even(double(extent - crop) / 2.0);
  };
  return {offset(height, crop_height), offset(width, crop_width), crop_height, crop_width};
}

CropBox random_resized_crop_box(int64_t height, int64_t width, double scale_lo, double scale_hi,
                                double ratio_lo, double ratio_hi, Random& random) {
  const double area = double(height) * double(width);
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.uniform(scale_lo, scale_hi);
    const double aspect = std::exp(random.uniform(log_lo, log_hi));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t top = int64_t(random.below(uint64_t(height - h + 1)));
      const int64_t left = int64_t(random.below(uint64_t(width - w + 1)));
      return {top, left, h, w};
    }
  }
  const double in_ratio = double(width) / double(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio_lo) {
    h = round_half_even(double(w) / ratio_lo);
  } else if (in_ratio > ratio_hi) {
    w = round_half_even(double(h) * ratio_hi);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

void crop(const Image& in, const CropBox& box, Image& out) {
  const int64_t channels = in.channels(), height = in.height(), width = in.width();
  out.reset({channels, box.height, box.width});
  // The rows and columns of the box that lie inside the image: [y0, y1) x [x0, x1).
  const int64_t y0 = std::clamp<int64_t>(-box.top, 0, box.height);
  const int64_t y1 = std::clamp<int64_t>(height - box.top, y0, box.height);
  const int64_t x0 = std::clamp<int64_t>(-box.left, 0, box.width);
  const int64_t x1 = std::clamp<int64_t>(width - box.left, x0, box.width);
  std::fill(out.pixels.begin(), out.pixels.end(), 0.0f);
  for (int64_t c = 0; c < channels; ++c) {
    const float* src = in.pixels.data() + c * height * width;     // [H, W]
    float* dst = out.pixels.data() + c * box.height * box.width;  // [h, w]
    for (int64_t y = y0; y < y1; ++y) {
      const float* row = src + (box.top + y) * width + box.left;
      std::copy(row + x0, row + x1, dst + y * box.width + x0);
    }
  }
}

void flip_horizontal(Image& image) {
  const int64_t rows = image.channels() * image.height(), width = image.width();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = image.pixels.data() + r * width;
    std::reverse(row, row + width);
  }
}

void resize(const Image& in, int64_t height, int64_t width, Image& out, ResizeMode mode) {
  if (height == in.height() && width == in.width()) {
    out = in;
    return;
  }
  resize_box(in, {0, 0, in.height(), in.width()}, height, width, out, mode);
}

void resize_box(const Image& in, const CropBox& box, int64_t height, int64_t width, Image& out,
                ResizeMode mode) {
  CREMA_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 &&
                  box.top + box.height <= in.height() && box.left + box.width <= in.width(),
              "resize_box: the window is not inside the " + shape_str(in.shape) + " image");
  CREMA_CHECK(&in != &out, "resize_box: the output must be another image");
  out.reset({in.channels(), height, width});
  // The rows pass's result, kept per thread: loader workers resize thousands of images.
  thread_local std::vector<float> scratch;
  const int64_t plane = in.height() * in.width();
  resample_planes(in.pixels.data() + box.top * in.width() + box.left, in.channels(), plane,
                  in.width(), box.height, box.width, out.pixels.data(), height, width, mode,
                  scratch);
}

}  // namespace crema::data
