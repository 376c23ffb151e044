#include "data/color_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "core/error.h"

namespace crema::data {
namespace {

// The planes of a C x H x W image: [plane] each.
int64_t plane_size(const Image& image) {
  return image.height() * image.width();
}

// x <- clamp(r x + (1 - r) y, 0, 1), in float32 as torchvision's _blend (the factor and its
// complement rounded to float first).
inline float blend(float x, float y, float ratio, float complement) {
  return std::clamp(ratio * x + complement * y, 0.0f, 1.0f);
}

// gray = 0.2989 R + 0.587 G + 0.114 B of a 3-channel image: [H * W].
std::vector<float> luma(const Image& image) {
  const int64_t n = plane_size(image);
  const float* r = image.pixels.data();
  const float* g = r + n;
  const float* b = g + n;
  std::vector<float> gray(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) gray[size_t(i)] = 0.2989f * r[i] + 0.587f * g[i] + 0.114f * b[i];
  return gray;
}

// The uint8 value torchvision's convert_image_dtype gives a float pixel: trunc(x (256 - 1e-3)),
// kept in 0..255 for pixels slightly outside [0, 1].
inline int quantize(float x) {
  return std::clamp(int(x * (255.0f + 1.0f - 1e-3f)), 0, 255);
}

}  // namespace

void check_unit_range(const Image& image, const std::string& transform) {
  // Branch-free min and max (about 3x faster than std::minmax_element here).
  float lo = INFINITY, hi = -INFINITY;
  for (float x : image.pixels) {
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
  if (lo < -1e-3f || hi > 1.001f) {
    char range[64];
    std::snprintf(range, sizeof(range), "[%g, %g]", double(lo), double(hi));
    throw Error("transform " + transform + " needs pixels in [0, 1], got values in " + range +
                "; put it after {scale: 0.00392157} and before normalize");
  }
}

void to_grayscale(Image& image, int64_t output_channels) {
  const int64_t n = plane_size(image);
  std::vector<float> gray =
      image.channels() == 3 ? luma(image)
                            : std::vector<float>(image.pixels.begin(), image.pixels.begin() + n);
  image.reset({output_channels, image.height(), image.width()});
  for (int64_t c = 0; c < output_channels; ++c) {
    std::copy(gray.begin(), gray.end(), image.pixels.begin() + c * n);
  }
}

void adjust_brightness(Image& image, float factor) {
  const float complement = float(1.0 - double(factor));
  for (float& x : image.pixels) x = blend(x, 0.0f, factor, complement);
}

void adjust_contrast(Image& image, float factor) {
  const std::vector<float> gray =
      image.channels() == 3 ? luma(image) : std::vector<float>(image.pixels);
  double sum = 0.0;
  for (float g : gray) sum += g;
  const float mean = float(sum / double(gray.size()));
  const float complement = float(1.0 - double(factor));
  for (float& x : image.pixels) x = blend(x, mean, factor, complement);
}

void adjust_saturation(Image& image, float factor) {
  if (image.channels() == 1) return;
  const std::vector<float> gray = luma(image);
  const float complement = float(1.0 - double(factor));
  const int64_t n = plane_size(image);
  for (int64_t c = 0; c < 3; ++c) {
    float* x = image.pixels.data() + c * n;  // [H * W]
    for (int64_t i = 0; i < n; ++i) x[i] = blend(x[i], gray[size_t(i)], factor, complement);
  }
}

// RGB -> HSV -> RGB as torchvision's _rgb2hsv / _hsv2rgb (PIL's formulas), in float32:
//   v = max, s = (max - min) / max, h = one sixth of the sector's offset, in [0, 1);
//   back: i = floor(6h) mod 6, f = 6h - floor(6h), p = v(1 - s), q = v(1 - sf), t = v(1 - s(1 -
//   f)), (r, g, b) = (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q) for i = 0..5.
void adjust_hue(Image& image, float hue_factor) {
  if (image.channels() == 1) return;
  const int64_t n = plane_size(image);
  float* red = image.pixels.data();
  float* green = red + n;
  float* blue = green + n;
  for (int64_t i = 0; i < n; ++i) {
    const float r = red[i], g = green[i], b = blue[i];
    const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
    const bool flat = maxc == minc;
    const float chroma = maxc - minc;
    const float s = chroma / (flat ? 1.0f : maxc);
    const float divisor = flat ? 1.0f : chroma;
    const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
    float h = maxc == r ? bc - gc : maxc == g ? 2.0f + rc - bc : 4.0f + gc - rc;
    // fmod(h / 6 + 1, 1), then (h + f) mod 1 with the sign of the divisor (torch's remainder);
    // both arguments lie in (-1, 2), where these subtractions are exact.
    h = h / 6.0f + 1.0f;
    h = h >= 1.0f ? h - 1.0f : h;
    h = h + hue_factor;
    h = h >= 1.0f ? h - 1.0f : h < 0.0f ? h + 1.0f : h;

    const float sector = std::floor(h * 6.0f);
    const float f = h * 6.0f - sector;
    const int k = int(sector) % 6;
    const float p = std::clamp(maxc * (1.0f - s), 0.0f, 1.0f);
    const float q = std::clamp(maxc * (1.0f - s * f), 0.0f, 1.0f);
    const float t = std::clamp(maxc * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
    const float v = maxc;
    const std::array<std::array<float, 3>, 6> rgb = {
        {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}}};
    red[i] = rgb[size_t(k)][0];
    green[i] = rgb[size_t(k)][1];
    blue[i] = rgb[size_t(k)][2];
  }
}

void adjust_sharpness(Image& image, float factor) {
  const int64_t height = image.height(), width = image.width();
  if (height <= 2 || width <= 2) return;
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  const float complement = float(1.0 - double(factor));
  std::vector<float> smooth(size_t(height * width));  // [H, W], one channel at a time
  for (int64_t c = 0; c < image.channels(); ++c) {
    float* x = image.pixels.data() + c * height * width;  // [H, W]
    std::copy(x, x + height * width, smooth.begin());     // the border rows and columns
    for (int64_t y = 1; y + 1 < height; ++y) {
      for (int64_t xo = 1; xo + 1 < width; ++xo) {
        float sum = 0.0f;
        for (int64_t dy = -1; dy <= 1; ++dy) {
          for (int64_t dx = -1; dx <= 1; ++dx) {
            sum += (dy == 0 && dx == 0 ? centre : side) * x[(y + dy) * width + xo + dx];
          }
        }
        smooth[size_t(y * width + xo)] = sum;
      }
    }
    // Every pixel is blended, the border with itself (as torchvision, which rounds there too).
    for (int64_t i = 0; i < height * width; ++i) {
      x[i] = blend(x[i], smooth[size_t(i)], factor, complement);
    }
  }
}

void autocontrast(Image& image) {
  const int64_t n = plane_size(image);
  for (int64_t c = 0; c < image.channels(); ++c) {
    float* x = image.pixels.data() + c * n;  // [H * W]
    const auto [lo, hi] = std::minmax_element(x, x + n);
    float minimum = *lo, scale = 1.0f / (*hi - *lo);
    if (!std::isfinite(scale)) minimum = 0.0f, scale = 1.0f;  // a flat channel stays
    for (int64_t i = 0; i < n; ++i) x[i] = std::clamp((x[i] - minimum) * scale, 0.0f, 1.0f);
  }
}

void invert(Image& image) {
  for (float& x : image.pixels) x = 1.0f - x;
}

void solarize(Image& image, float threshold) {
  for (float& x : image.pixels) x = x >= threshold ? 1.0f - x : x;
}

void posterize(Image& image, int bits) {
  const int mask = ~((1 << (8 - bits)) - 1) & 0xff;
  for (float& x : image.pixels) x = float(quantize(x) & mask) / 255.0f;
}

// Per channel, on q = quantize(x): the histogram h[0..255]; step = floor((sum of the nonzero
// bins but the last nonzero one) / 255); a channel with step 0 (one or two levels) stays;
// otherwise lut[0] = 0, lut[k] = min(255, floor((h[0] + ... + h[k-1] + floor(step / 2)) / step)).
void equalize(Image& image) {
  const int64_t n = plane_size(image);
  for (int64_t c = 0; c < image.channels(); ++c) {
    float* x = image.pixels.data() + c * n;  // [H * W]
    std::array<int64_t, 256> histogram{};
    for (int64_t i = 0; i < n; ++i) ++histogram[size_t(quantize(x[i]))];
    int64_t total = 0, last_nonzero = 0;
    for (int64_t count : histogram) {
      if (count != 0) last_nonzero = count;
      total += count;
    }
    const int64_t step = (total - last_nonzero) / 255;
    if (step == 0) {
      for (int64_t i = 0; i < n; ++i) x[i] = float(quantize(x[i])) / 255.0f;
      continue;
    }
    std::array<float, 256> lut{};
    int64_t below = 0;  // h[0] + ... + h[k - 1]
    for (size_t k = 0; k < 256; ++k) {
      lut[k] = float(std::min<int64_t>(255, (below + step / 2) / step)) / 255.0f;
      below += histogram[k];
    }
    for (int64_t i = 0; i < n; ++i) x[i] = lut[size_t(quantize(x[i]))];
  }
}

}  // namespace crema::data
