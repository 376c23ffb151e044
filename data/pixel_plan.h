// PixelPlan: what a sample's transforms will do to its pixels, drawn before any pixel exists, so
// that another executor (the GPU's, data/gpu/) can run them on a batch at once. The loader draws
// a plan per sample from the same Random, in the same order, as Transform::apply would (each
// transform's Transform::plan mirrors its apply), so the same seed gives the same crops, flips
// and jitter factors whichever executor runs them.
//
// A plan is a separable geometry followed by colour steps:
//
//   geometry   out[c, y, x] = sum_i rows.w[y, i] * sum_j cols.w[x, j] *
//                             src[c, rows.first[y] + i, cols.first[x] + j]
//              (rows pass, then columns); rows.first[y] = -1 (or cols.first[x]) is a padding
//              row (column): 0. One resampling (resize or random_resized_crop, first in the
//              list) sets the weights (data/resample.h: resample_axis, offset by the crop box);
//              crops (center_crop, random_crop) select and pad output rows and columns;
//              horizontal_flip reverses the columns. Crops and resizes come before every colour
//              step (a crop moves the image's mean, which contrast reads); flips go anywhere.
//   steps      in list order, on every pixel (see ColorStep); contrast blends with the mean
//              gray of the whole image as it is at that step.
//
// run_pixel_plan is the reference: the same arithmetic as the CPU transforms (image_ops,
// resample, color_ops), so its output equals theirs up to float rounding (the order of the two
// resampling passes; tests/data/pixel_plan_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/image_ops.h"
#include "data/resample.h"

namespace crema::data {

// One axis of the geometry: output i reads `taps` source samples from first[i] (-1: a padding
// sample, 0) with weights[i * taps ..].
struct PlanAxis {
  int64_t taps = 1;
  std::vector<int32_t> first;
  std::vector<float> weights;

  int64_t size() const { return int64_t(first.size()); }
};

// A colour step on every pixel p (all channels of one position):
//   affine      x[c] <- (x[c] * mul[c] - sub[c]) / div[c]   (scale: mul; mean: sub; std: div)
//   brightness  x <- clamp(f x, 0, 1)
//   contrast    x <- clamp(f x + (1 - f) mean(gray(image)), 0, 1)
//   saturation  x <- clamp(f x + (1 - f) gray(x), 0, 1), gray = 0.2989 R + 0.587 G + 0.114 B
//   hue         the hue of x turned by f (of a full turn) through HSV (color_ops.h adjust_hue)
// The blends are color_ops.h's, with the complement 1 - f rounded to float once.
struct ColorStep {
  enum Kind : int32_t { affine, brightness, contrast, saturation, hue };
  Kind kind = affine;
  float factor = 1.0f;
  float mul[3] = {1, 1, 1}, sub[3] = {0, 0, 0}, div[3] = {1, 1, 1};
};

struct PixelPlan {
  int64_t channels = 3;
  Size2 source;            // the decoded image's size
  PlanAxis rows;           // [output height]
  PlanAxis cols;           // [output width]
  bool resampled = false;  // a resize or random_resized_crop has set the weights
  std::vector<ColorStep> steps;

  int64_t height() const { return rows.size(); }
  int64_t width() const { return cols.size(); }
};

// The identity plan of a channels (1 or 3) x source image.
PixelPlan identity_plan(int64_t channels, Size2 source);

// The transforms' geometry helpers, for Transform::plan: resample the whole current image to
// `size` from the source window `box` (it must be the first geometry), crop (with padding) the
// current output, mirror it. Each throws crema::Error naming `what` when the plan cannot take it.
void plan_resample(PixelPlan& plan, const CropBox& box, Size2 size, ResizeMode mode,
                   const std::string& what);
void plan_crop(PixelPlan& plan, const CropBox& box, const std::string& what);
void plan_flip(PixelPlan& plan);

// Runs `plan` on `source` (channels x source.height x source.width) into `out`.
void run_pixel_plan(const PixelPlan& plan, const Image& source, Image& out);

}  // namespace crema::data
