// The colour operations behind color_jitter, grayscale and the auto-augment policies, each
// torchvision's tensor function (torchvision/transforms/functional_tensor.py, 0.14; the same
// formulas as transforms.v2) on a float image.
//
// Range: pixels in [0, 1], as torchvision's float tensors (after {scale: 0.00392157}, before
// normalize). The blends clamp their result to [0, 1] as torchvision does, so an image in 0..255
// units would come out nearly white; the transforms that call these check the range first
// (check_unit_range). Images are planar C x H x W with C = 1 or 3 (RGB); on one channel the
// hue and saturation changes do nothing, as torchvision's (and PIL's).
//
//   blend(x, y, r)             = clamp(r x + (1 - r) y, 0, 1)
//   gray(x)                    = 0.2989 R + 0.587 G + 0.114 B          (torchvision's luma)
//   adjust_brightness(x, f)    = blend(x, 0, f)
//   adjust_contrast(x, f)      = blend(x, mean(gray(x)) over the whole image, f)
//   adjust_saturation(x, f)    = blend(x, gray(x), f)
//   adjust_hue(x, f)           = hsv_to_rgb(h + f mod 1, s, v) of rgb_to_hsv(x), f in [-0.5, 0.5]
//   adjust_sharpness(x, f)     = blend(x, smooth(x), f), smooth = the 3 x 3 kernel [1 1 1; 1 5 1;
//                                1 1 1] / 13 inside, the border rows and columns kept as they are
//   autocontrast(x)            = clamp((x - min_c) / (max_c - min_c), 0, 1) per channel (a flat
//                                channel is kept)
//   invert(x)                  = 1 - x
//   solarize(x, t)             = x >= t ? 1 - x : x
//
// posterize and equalize are defined by torchvision on uint8 only; here they quantize the float
// image as torchvision's convert_image_dtype(x, uint8) does, q = trunc(x (256 - 1e-3)), apply the
// uint8 operation to q and give back q' / 255 (the results are multiples of 1/255):
//   posterize(x, bits)         q' = q & ~(2^(8 - bits) - 1)          (keeps the top `bits` bits)
//   equalize(x)                q' = lut_c[q] per channel, lut from the channel's histogram (PIL's
//                                ImageOps.equalize, as torchvision's _scale_channel)
#pragma once

#include "data/image.h"

namespace crema::data {

// Throws crema::Error naming `transform` when a pixel lies outside [-0.001, 1.001] (pixels in
// 0..255, or after normalize), saying where the transform belongs in the list.
void check_unit_range(const Image& image, const std::string& transform);

// 3 channels -> `output_channels` (1, or 3 copies) of gray(x); 1 channel -> `output_channels`
// copies of it.
void to_grayscale(Image& image, int64_t output_channels);

void adjust_brightness(Image& image, float factor);  // factor >= 0
void adjust_contrast(Image& image, float factor);    // factor >= 0
void adjust_saturation(Image& image, float factor);  // factor >= 0
void adjust_hue(Image& image, float hue_factor);     // hue_factor in [-0.5, 0.5]
void adjust_sharpness(Image& image, float factor);   // factor >= 0
void autocontrast(Image& image);
void invert(Image& image);
void solarize(Image& image, float threshold);
void posterize(Image& image, int bits);  // bits in 0..8
void equalize(Image& image);

}  // namespace crema::data
