#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace crema::data {
namespace {

// Keys' cubic convolution kernel (resample.h); a = -0.75 is PyTorch's bicubic, -0.5 PIL's.
double cubic(double d, double a) {
  d = std::fabs(d);
  if (d <= 1.0) return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
  if (d < 2.0) return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
  return 0.0;
}

double triangle(double d) {
  return std::max(0.0, 1.0 - std::fabs(d));
}

// The (input index, weight) pairs of one output, indices already inside [0, in_size).
using Taps = std::vector<std::pair<int64_t, double>>;

// PyTorch's index arithmetic is in float (area_pixel_compute_scale and the source index):
// rounding it the same way keeps floor() on the same side at exact halves.
Taps taps_of(int64_t i, int64_t in_size, int64_t out_size, ResizeMode mode) {
  const float scale = float(in_size) / float(out_size);
  const int64_t last = in_size - 1;
  Taps taps;
  if (mode.interpolation == Interpolation::nearest) {
    int64_t j = std::min(int64_t(std::floor(float(i) * scale)), last);
    if (in_size == out_size) j = i;
    if (out_size == 2 * in_size) j = i >> 1;
    taps.push_back({j, 1.0});
    return taps;
  }
  const bool bicubic = mode.interpolation == Interpolation::bicubic;
  if (!mode.antialias) {
    float x = scale * (float(i) + 0.5f) - 0.5f;
    if (!bicubic) x = std::max(x, 0.0f);
    const int64_t j = std::min(int64_t(std::floor(x)), last);
    const double t = std::clamp(double(x) - double(j), 0.0, 1.0);
    if (!bicubic) {
      taps.push_back({j, 1.0 - t});
      taps.push_back({std::min(j + 1, last), t});
      return taps;
    }
    for (int64_t k = -1; k <= 2; ++k) {
      taps.push_back({std::clamp<int64_t>(j + k, 0, last), cubic(double(k) - t, -0.75)});
    }
    return taps;
  }
  // Antialiased: the filter stretched by the shrink factor (never narrowed when growing).
  const double stretch = std::max(1.0, double(scale));
  const double support = (bicubic ? 2.0 : 1.0) * stretch;
  const double centre = double(scale) * (double(i) + 0.5);
  const int64_t lo = std::max<int64_t>(int64_t(centre - support + 0.5), 0);
  const int64_t hi = std::min<int64_t>(int64_t(centre + support + 0.5), in_size);
  double total = 0.0;
  for (int64_t j = lo; j < hi; ++j) {
    const double d = (double(j) - centre + 0.5) / stretch;
    const double w = bicubic ? cubic(d, -0.5) : triangle(d);
    taps.push_back({j, w});
    total += w;
  }
  if (total != 0.0) {
    for (auto& tap : taps) tap.second /= total;
  }
  return taps;
}

// out[x] = sum_k weights[x, k] in[first[x] + k], for each of `rows` rows. kTaps > 0 fixes the
// window's length at compile time (the inner loop unrolled); 0 reads it from the axis.
template <int kTaps>
void resample_rows_with(const float* in, int64_t in_stride, int64_t rows, const ResampleAxis& axis,
                        float* out, int64_t out_width) {
  const int64_t taps = kTaps > 0 ? kTaps : axis.taps;
  for (int64_t y = 0; y < rows; ++y) {
    const float* row = in + y * in_stride;
    float* dst = out + y * out_width;
    for (int64_t x = 0; x < out_width; ++x) {
      const float* src = row + axis.first[size_t(x)];
      const float* w = axis.weights.data() + x * taps;
      float sum = 0.0f;
      for (int64_t k = 0; k < taps; ++k) sum += w[k] * src[k];
      dst[x] = sum;
    }
  }
}

// The windows of shrinking a photo's crop to 224 pixels are 2 to 8 taps long (bilinear with
// antialias: 2 s + 1 for a shrink by s).
void resample_rows(const float* in, int64_t in_stride, int64_t rows, const ResampleAxis& axis,
                   float* out, int64_t out_width) {
  switch (axis.taps) {
    case 2:
      return resample_rows_with<2>(in, in_stride, rows, axis, out, out_width);
    case 3:
      return resample_rows_with<3>(in, in_stride, rows, axis, out, out_width);
    case 4:
      return resample_rows_with<4>(in, in_stride, rows, axis, out, out_width);
    case 5:
      return resample_rows_with<5>(in, in_stride, rows, axis, out, out_width);
    case 6:
      return resample_rows_with<6>(in, in_stride, rows, axis, out, out_width);
    case 7:
      return resample_rows_with<7>(in, in_stride, rows, axis, out, out_width);
    case 8:
      return resample_rows_with<8>(in, in_stride, rows, axis, out, out_width);
    default:
      return resample_rows_with<0>(in, in_stride, rows, axis, out, out_width);
  }
}

// Row y of out = sum_k weights[y, k] row first[y] + k of in: whole rows at a time, which the
// compiler vectorizes along x.
void resample_columns(const float* in, int64_t in_stride, const ResampleAxis& axis, float* out,
                      int64_t out_height, int64_t width) {
  const int64_t taps = axis.taps;
  for (int64_t y = 0; y < out_height; ++y) {
    float* dst = out + y * width;
    const float* w = axis.weights.data() + y * taps;
    const float* row = in + axis.first[size_t(y)] * in_stride;
    for (int64_t x = 0; x < width; ++x) dst[x] = w[0] * row[x];
    for (int64_t k = 1; k < taps; ++k) {
      if (w[k] == 0.0f) continue;  // the padding of a short window
      const float* src = row + k * in_stride;
      const float weight = w[k];
      for (int64_t x = 0; x < width; ++x) dst[x] += weight * src[x];
    }
  }
}

}  // namespace

Interpolation parse_interpolation(const std::string& name) {
  if (name == "nearest") return Interpolation::nearest;
  if (name == "bilinear") return Interpolation::bilinear;
  if (name == "bicubic") return Interpolation::bicubic;
  throw Error("unknown interpolation '" + name + "' (known: nearest, bilinear, bicubic)");
}

const char* interpolation_name(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::nearest:
      return "nearest";
    case Interpolation::bilinear:
      return "bilinear";
    case Interpolation::bicubic:
      return "bicubic";
  }
  return "?";
}

ResampleAxis resample_axis(int64_t in_size, int64_t out_size, ResizeMode mode) {
  CREMA_CHECK(in_size > 0 && out_size > 0, "resample_axis: sizes must be positive, got " +
                                               std::to_string(in_size) + " -> " +
                                               std::to_string(out_size));
  // Each output's taps folded onto one window of distinct indices (clamped indices repeat).
  std::vector<Taps> all(static_cast<size_t>(out_size));
  ResampleAxis axis;
  for (int64_t i = 0; i < out_size; ++i) {
    all[size_t(i)] = taps_of(i, in_size, out_size, mode);
    int64_t lo = in_size, hi = 0;
    for (const auto& [j, w] : all[size_t(i)]) {
      lo = std::min(lo, j);
      hi = std::max(hi, j);
    }
    axis.taps = std::max(axis.taps, hi - lo + 1);
  }
  axis.first.resize(size_t(out_size));
  axis.weights.assign(size_t(out_size * axis.taps), 0.0f);
  for (int64_t i = 0; i < out_size; ++i) {
    int64_t lo = in_size;
    for (const auto& tap : all[size_t(i)]) lo = std::min(lo, tap.first);
    // Keep the whole window inside the input (the taps past a short window weigh 0).
    const int64_t first = std::min(lo, in_size - axis.taps);
    axis.first[size_t(i)] = int32_t(first);
    for (const auto& [j, w] : all[size_t(i)]) {
      axis.weights[size_t(i * axis.taps + j - first)] += float(w);
    }
  }
  return axis;
}

void resample_planes(const float* in, int64_t planes, int64_t in_plane, int64_t in_stride,
                     int64_t in_height, int64_t in_width, float* out, int64_t out_height,
                     int64_t out_width, ResizeMode mode, std::vector<float>& scratch) {
  // The same size along an axis is the identity in every mode (resample.h): that pass is skipped.
  const bool rows_pass = in_width != out_width, columns_pass = in_height != out_height;
  ResampleAxis across, down;
  if (rows_pass) across = resample_axis(in_width, out_width, mode);
  if (columns_pass) down = resample_axis(in_height, out_height, mode);
  // With both passes, the cheaper order: the columns pass runs whole rows (vectorized, about 4x
  // the multiply-adds per second of the rows pass), so shrinking many rows goes first.
  const double rows_first = double(in_height * out_width * across.taps) +
                            double(out_height * out_width * down.taps) / 4.0;
  const double columns_first = double(out_height * in_width * down.taps) / 4.0 +
                               double(out_height * out_width * across.taps);
  const bool columns_go_first = rows_pass && columns_pass && columns_first < rows_first;
  if (rows_pass && columns_pass) {
    scratch.resize(size_t(columns_go_first ? out_height * in_width : in_height * out_width));
  }
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = in + p * in_plane;
    float* dst = out + p * out_height * out_width;
    if (columns_go_first) {
      resample_columns(src, in_stride, down, scratch.data(), out_height, in_width);
      resample_rows(scratch.data(), in_width, out_height, across, dst, out_width);
      continue;
    }
    int64_t stride = in_stride;
    if (rows_pass) {
      float* rows = columns_pass ? scratch.data() : dst;
      resample_rows(src, stride, in_height, across, rows, out_width);
      src = rows;
      stride = out_width;
    }
    if (columns_pass) {
      resample_columns(src, stride, down, dst, out_height, out_width);
    } else if (!rows_pass) {
      for (int64_t y = 0; y < out_height; ++y) {
        std::copy(src + y * stride, src + y * stride + out_width, dst + y * out_width);
      }
    }
  }
}

}  // namespace crema::data
