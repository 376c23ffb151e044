// Affine warps of an image (rotation, translation, scale, shear about a centre) as torchvision's
// tensor F.affine and F.rotate (torchvision/transforms/functional.py and functional_tensor.py,
// 0.14; transforms.v2 keeps the definition), behind random_rotation, random_affine and the
// geometric ops of trivial_augment_wide / rand_augment. Images are planar C x H x W; the output
// has the input's size; values are in the image's own units (fill too).
//
// The forward map, about the centre c = (cx, cy) (default: the image's centre (W/2, H/2)), in
// pixel coordinates x right and y down:
//   M = T(t) C(c) R(a) S(s) Sh_y(sy) Sh_x(sx) C(-c),   Sh_x(sx) = [1 -tan sx; 0 1],
//   Sh_y(sy) = [1 0; -tan sy 1], R(a) the rotation by a degrees (clockwise on the screen),
// and each output pixel reads the source at M^-1 (its centre), as torchvision's
// _get_inverse_affine_matrix gives it:
//   [a b; c d] = [cos(a - sy) / cos sy, -cos(a - sy) tan sx / cos sy - sin a;
//                 sin(a - sy) / cos sy, -sin(a - sy) tan sx / cos sy + cos a]   (determinant 1)
//   M^-1 = C(c) [d -b; -c a] / s C(-c) T(-t).
// Sampling is torch's grid_sample (align_corners = false, zero padding) on the grid torchvision
// builds in float32: output pixel (i, j) has centred coordinates (j + 0.5 - W/2, i + 0.5 - H/2),
// maps through M^-1 to a source point (u, v) and reads pixel (u + W/2 - 0.5, v + H/2 - 0.5):
//   nearest:  the pixel at round-half-to-even of that point, 0 outside the image;
//   bilinear: the four neighbours weighted by their overlap, those outside the image as 0.
// With a fill value f_c (torchvision's RandomRotation and RandomAffine always give one, 0 by
// default; F.affine and the auto-augment ops by default none), a mask m, the same warp of an
// all-ones plane, decides the outside: nearest takes f_c where m < 0.5; bilinear gives
// out m + (1 - m) f_c (the zero-padded value times m: torchvision's formula, which darkens
// a border pixel that is half outside twice).
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "data/image.h"
#include "data/resample.h"  // Interpolation: the warps take nearest or bilinear

namespace crema::data {

struct AffineParams {
  double angle = 0.0;                           // degrees, clockwise
  double translate_x = 0.0, translate_y = 0.0;  // pixels, right and down
  double scale = 1.0;                           // > 0
  double shear_x = 0.0, shear_y = 0.0;          // degrees
  // The fixed point of rotation, scale and shear, in pixels from the top-left corner of the
  // top-left pixel; empty: the image's centre (W/2, H/2).
  std::optional<std::array<double, 2>> center;
};

// M^-1 as the row-major 2 x 3 matrix [m0 m1 m2; m3 m4 m5] in centred coordinates (the origin at
// the image's centre): torchvision's _get_inverse_affine_matrix with the centre (cx - W/2,
// cy - H/2).
std::array<double, 6> inverse_affine_matrix(const AffineParams& params, int64_t height,
                                            int64_t width);

// Warps `image` by `params` (the header's formulas). `fill`: none, one value, or one per channel.
void affine(Image& image, const AffineParams& params, Interpolation interpolation,
            const std::optional<std::vector<float>>& fill);

// torchvision's F.rotate: `angle` degrees counter-clockwise about the centre (affine with
// -angle), the output the input's size.
void rotate(Image& image, double angle, Interpolation interpolation,
            const std::optional<std::vector<float>>& fill);

}  // namespace crema::data
