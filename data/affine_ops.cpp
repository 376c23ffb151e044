#include "data/affine_ops.h"

#include <cmath>

namespace crema::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
double radians(double degrees) {
  return degrees * kPi / 180.0;
}

// Rounds half to even, as nearbyint in the default rounding mode, without libm's call: adding
// and subtracting 1.5 x 2^23 leaves no fraction bits (no FP contraction in ISO C++ mode). Exact
// for |x| < 2^22; a point farther out is outside any image, and is sent to -1.
inline float round_half_even(float x) {
  constexpr float kShift = 12582912.0f;  // 1.5 x 2^23
  return std::fabs(x) < 4194304.0f ? (x + kShift) - kShift : -1.0f;
}

}  // namespace

std::array<double, 6> inverse_affine_matrix(const AffineParams& params, int64_t height,
                                            int64_t width) {
  double cx = 0.0, cy = 0.0;  // the centre, relative to the image's centre
  if (params.center) {
    cx = (*params.center)[0] - double(width) * 0.5;
    cy = (*params.center)[1] - double(height) * 0.5;
  }
  const double rot = radians(params.angle);
  const double sx = radians(params.shear_x), sy = radians(params.shear_y);
  const double tx = params.translate_x, ty = params.translate_y;
  // R(a) S(s) Sh_y(sy) Sh_x(sx) without s: [a b; c d].
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  // Its inverse [d -b; -c a] / s, then C(c) . C(-c) T(-t).
  std::array<double, 6> m = {d / params.scale,  -b / params.scale, 0.0,
                             -c / params.scale, a / params.scale,  0.0};
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

void affine(Image& image, const AffineParams& params, Interpolation interpolation,
            const std::optional<std::vector<float>>& fill) {
  const int64_t channels = image.channels(), height = image.height(), width = image.width();
  const std::array<double, 6> m = inverse_affine_matrix(params, height, width);
  // torchvision's grid, in float32: the matrix divided by the half sizes maps centred output
  // coordinates to grid_sample's [-1, 1], which unnormalizes to ((g + 1) W - 1) / 2.
  const float half_w = float(0.5 * double(width)), half_h = float(0.5 * double(height));
  const float gx[3] = {float(m[0]) / half_w, float(m[1]) / half_w, float(m[2]) / half_w};
  const float gy[3] = {float(m[3]) / half_h, float(m[4]) / half_h, float(m[5]) / half_h};
  const float w = float(width), h = float(height);

  Image out;
  out.reset(image.shape);
  const int64_t plane = height * width;
  for (int64_t i = 0; i < height; ++i) {
    const float y = float(i) - h * 0.5f + 0.5f;
    for (int64_t j = 0; j < width; ++j) {
      const float x = float(j) - w * 0.5f + 0.5f;
      // The source point, in pixel indices: (g + 1) W/2 - 1/2, as torch's CPU grid_sample.
      const float sx = ((x * gx[0] + y * gx[1] + gx[2]) + 1.0f) * half_w - 0.5f;
      const float sy = ((x * gy[0] + y * gy[1] + gy[2]) + 1.0f) * half_h - 0.5f;
      // (row, column, weight) of each source pixel that contributes; mask = sum of weights.
      int64_t rows[4], cols[4];
      float weights[4];
      int taps = 0;
      float mask = 0.0f;
      if (interpolation == Interpolation::nearest) {
        const int64_t r = int64_t(round_half_even(sy)), q = int64_t(round_half_even(sx));
        if (r >= 0 && r < height && q >= 0 && q < width) {
          rows[0] = r, cols[0] = q, weights[0] = 1.0f, taps = 1, mask = 1.0f;
        }
      } else {
        // grid_sample's weights: each corner by the area of the opposite sub-rectangle, with
        // the distances east = 1 - west and south = 1 - north.
        const float left = std::floor(sx), top = std::floor(sy);
        const float west = sx - left, east = 1.0f - west, north = sy - top, south = 1.0f - north;
        const float corner_weights[4] = {south * east, south * west, north * east, north * west};
        const float corner_rows[4] = {top, top, top + 1.0f, top + 1.0f};
        const float corner_cols[4] = {left, left + 1.0f, left, left + 1.0f};
        for (int k = 0; k < 4; ++k) {
          const int64_t r = int64_t(corner_rows[k]), q = int64_t(corner_cols[k]);
          if (corner_rows[k] < 0.0f || r >= height || corner_cols[k] < 0.0f || q >= width) continue;
          rows[taps] = r, cols[taps] = q, weights[taps] = corner_weights[k], ++taps;
          mask += corner_weights[k];
        }
      }
      for (int64_t c = 0; c < channels; ++c) {
        const float* source = image.pixels.data() + c * plane;  // [H, W]
        float value = 0.0f;
        for (int k = 0; k < taps; ++k) value += source[rows[k] * width + cols[k]] * weights[k];
        if (fill) {
          const float f = (*fill)[fill->size() == 1 ? 0 : size_t(c)];
          if (interpolation == Interpolation::nearest) {
            value = mask < 0.5f ? f : value;
          } else {
            value = value * mask + (1.0f - mask) * f;
          }
        }
        out.pixels[size_t(c * plane + i * width + j)] = value;
      }
    }
  }
  std::swap(image, out);
}

void rotate(Image& image, double angle, Interpolation interpolation,
            const std::optional<std::vector<float>>& fill) {
  AffineParams params;
  params.angle = -angle;
  affine(image, params, interpolation, fill);
}

}  // namespace crema::data
