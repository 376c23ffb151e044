// The geometry behind the image transforms: crop boxes (torchvision's rules, so a recipe ported
// from PyTorch crops the same way), cropping with zero padding, mirroring and resizing.
// Images are planar C x H x W (data/image.h); every function keeps the channel count.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "data/image.h"
#include "data/resample.h"

namespace crema::data {

// A window of an image; it may reach outside the image (negative top/left, or past the edge),
// where it reads zeros (padding).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// The size that brings the shorter side to `size` and keeps the aspect ratio, the longer side
// truncated: 30 x 40 with size 15 -> 15 x 20; 40 x 30 -> 20 x 15; 28 x 28 -> size x size.
Size2 shorter_side_size(int64_t height, int64_t width, int64_t size);

// The centred h x w window: top = round((H - h) / 2), halves to even as Python's round. A window
// larger than the image is centred on zero padding, the extra row or column going to the bottom
// and right: top = -((h - H) / 2).
CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_height, int64_t crop_width);

// torchvision's RandomResizedCrop.get_params: up to 10 tries of an area fraction
// s ~ U(scale_lo, scale_hi) and an aspect ratio r = exp(U(log ratio_lo, log ratio_hi)), giving
// w = round(sqrt(s H W r)), h = round(sqrt(s H W / r)); the first that fits is placed uniformly
// (top ~ U{0..H-h}, then left ~ U{0..W-w}). When none fits, the centred crop of the whole image
// with its ratio clamped into [ratio_lo, ratio_hi].
CropBox random_resized_crop_box(int64_t height, int64_t width, double scale_lo, double scale_hi,
                                double ratio_lo, double ratio_hi, Random& random);

// out[c, y, x] = in[c, box.top + y, box.left + x], or 0 where that lies outside `in`.
// out = [C, box.height, box.width].
void crop(const Image& in, const CropBox& box, Image& out);

// x[c, h, w] <-> x[c, h, W - 1 - w].
void flip_horizontal(Image& image);

// Resizes every channel to height x width (data/resample.h: torchvision's nearest, bilinear or
// bicubic, antialiased or not; the default is bilinear with antialias, PIL's and torchvision's
// for photos). Same size: a copy.
void resize(const Image& in, int64_t height, int64_t width, Image& out, ResizeMode mode = {});
// Resizes the window `box` of `in` (which must lie inside it) to height x width: crop then
// resize, without the cropped copy.
void resize_box(const Image& in, const CropBox& box, int64_t height, int64_t width, Image& out,
                ResizeMode mode = {});

}  // namespace crema::data
