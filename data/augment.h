// The augmentations people fine-tune with (issue 23), each torchvision's transform of the same
// name (torchvision.transforms, 0.14, whose definitions transforms.v2 keeps): the kinds below,
// built by make_transform (transform.h tables their options). The operations they apply are in
// color_ops.h (colour) and affine_ops.h (geometry); augment.cpp holds the transforms that draw
// their parameters, auto_augment.cpp the two policies.
//
//   color_jitter           ColorJitter: brightness, contrast, saturation and hue factors drawn
//                          uniformly, applied in a random order (a permutation of the four)
//   grayscale              Grayscale: 1 or 3 channels of 0.2989 R + 0.587 G + 0.114 B
//   random_grayscale       RandomGrayscale: with probability p, gray in every channel
//   random_rotation        RandomRotation: an angle ~ U(lo, hi) degrees, counter-clockwise
//   random_affine          RandomAffine: angle, translation, scale and shear drawn as
//                          RandomAffine.get_params draws them
//   random_erasing         RandomErasing: with probability p, a box of random area and aspect
//                          ratio set to a value (or to Normal(0, 1) noise)
//   trivial_augment_wide   TrivialAugmentWide: one op of 14 at a random magnitude bin
//   rand_augment           RandAugment: num_ops ops of 14 at a fixed magnitude bin
//
// Ranges. color_jitter, trivial_augment_wide and rand_augment need pixels in [0, 1] (after
// {scale: 0.00392157}, before normalize), as torchvision's float tensors; they check it on every
// image and name themselves in the error. The geometric ones and random_erasing work in any
// units (their fill and value are in the image's units); random_erasing belongs after
// normalize, as in torchvision's recipes. grayscale is linear and works in any units.
//
// Random streams. Each transform draws from the loader's per-sample Random in torchvision's
// order (ColorJitter: the permutation, then the four factors), but the numbers are crema's, not
// torch's: the same seed gives the same images in crema, not the same images as PyTorch.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/affine_ops.h"
#include "data/spec_reader.h"
#include "data/transform.h"

namespace crema::data {

// color_jitter, grayscale, random_grayscale, random_rotation, random_affine, random_erasing;
// nullptr for any other kind. Errors as make_transform's.
std::unique_ptr<Transform> make_augment_transform(const TransformSpec& spec);

// trivial_augment_wide and rand_augment (auto_augment.cpp).
std::unique_ptr<Transform> make_auto_augment_transform(const TransformSpec& spec);

// The magnitude of op `op` (0..13, the order of auto_augment.cpp's table) at `bin` of `bins`,
// for TrivialAugmentWide (`wide`) or RandAugment on an H x W image; 0 for the ops without
// magnitudes. For its test against torchvision's tables.
float auto_augment_magnitude(bool wide, int op, int bin, int bins, int64_t height, int64_t width);

// What the two files share.
// `interpolation`: nearest (the default, as torchvision's) or bilinear.
Interpolation read_interpolation(const SpecReader& reader);
// `fill`: one value or one per channel; `fallback` when absent (RandomRotation and RandomAffine
// fill 0, the auto-augment policies nothing: see affine_ops.h for the difference).
std::optional<std::vector<float>> read_fill(const SpecReader& reader,
                                            std::optional<std::vector<float>> fallback);
// Throws crema::Error naming `description` unless `shape` is C x H x W (with C = 1 or 3 when
// `color`) and `values` (a fill, an erasing value) has 1 or C entries.
void check_augment_input(const Shape& shape, const std::string& description, bool color,
                         const std::vector<float>& values = {});
// ", interpolation=bilinear, fill=[0.5]" for descriptions.
std::string warp_text(Interpolation interpolation, const std::optional<std::vector<float>>& fill);

}  // namespace crema::data
