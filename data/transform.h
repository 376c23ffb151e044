// Per-sample transforms, applied in list order by the loader's worker as it assembles a batch.
// Images are C x H x W (data/image.h); sizes are `s` (a square, or for resize the shorter side)
// or `[h, w]`.
//
//   kind                 main value        options (torchvision's names and defaults)
//   scale                a                 x <- a x (Caffe's MNIST: 0.00390625 = 1/256)
//   mean                 m or [m_c...]     x[c] <- x[c] - m_c
//   std                  s or [s_c...]     x[c] <- x[c] / s_c, every s_c > 0
//   normalize            a preset name     mean: [m_c...], std: [s_c...]: x[c] <- (x[c] - m_c) /
//   s_c;
//                                          or a preset: imagenet (torchvision's mean [0.485,
//                                          0.456, 0.406], std [0.229, 0.224, 0.225], for pixels
//                                          in [0, 1], after {scale: 0.00392157}), imagenet_255
//                                          (the same for 0..255 pixels: both times 255)
//   resize               s or [h, w]       s: the shorter side becomes s, the other keeps the
//                                          aspect ratio (truncated); [h, w]: exactly h x w.
//                                          interpolation: bilinear (default), bicubic or
//                                          nearest; antialias: true (default) or false, as
//                                          torchvision v2 defines them (data/resample.h)
//   center_crop          s or [h, w]       the centred window (zero padding where larger)
//   random_crop          s or [h, w]       padding: p (0): p zero rows/columns on every side,
//                                          then a uniformly placed window
//   random_resized_crop  s or [h, w]       scale: [0.08, 1], ratio: [3/4, 4/3]: a random area
//                                          fraction and aspect ratio (data/image_ops.h), resized
//                                          to h x w; interpolation, antialias as resize's
//   horizontal_flip      p (0.5)           mirrors the image with probability p
//
// The augmentations (data/augment.h; torchvision's transforms of the same names; the colour ones
// need pixels in [0, 1], after {scale: 0.00392157} and before normalize, and check it):
//   color_jitter         options only      brightness, contrast, saturation: v -> factor ~
//                                          U(max(0, 1 - v), 1 + v), or [lo, hi]; hue: v <= 0.5
//                                          -> U(-v, v), or [lo, hi] in [-0.5, 0.5]; applied in
//                                          a random order (data/color_ops.h has the formulas)
//   grayscale            channels (1)      1 or 3 channels of 0.2989 R + 0.587 G + 0.114 B
//   random_grayscale     p (0.1)           gray in every channel with probability p
//   random_rotation      degrees           d -> angle ~ U(-d, d), or [lo, hi], counter-clockwise
//                                          about the centre; interpolation: nearest | bilinear
//                                          (nearest), fill: f or [f_c...] (0), center: [x, y]
//   random_affine        degrees           as random_rotation (clockwise, as torchvision's), and
//                                          translate: [a, b] (fractions of W and H), scale:
//                                          [lo, hi], shear: s, [lo, hi] or [xlo, xhi, ylo, yhi]
//                                          degrees (data/affine_ops.h has the matrix)
//   random_erasing       p (0.5)           scale: [0.02, 0.33], ratio: [0.3, 3.3], value: v,
//                                          [v_c...] or random (0): a box set to the value;
//                                          in the image's units (after normalize, as torchvision)
//   trivial_augment_wide options only      num_magnitude_bins (31), interpolation (nearest),
//                                          fill (none): one of 14 ops at a random magnitude
//   rand_augment         options only      num_ops (2), magnitude (9), num_magnitude_bins (31),
//                                          interpolation, fill: num_ops ops at one magnitude
//
// The main value may also be written as the option of the same role: {random_crop: {size: 28,
// padding: 4}} equals {random_crop: 28} with padding 4; {horizontal_flip: {p: 0.5}}.
// The usual normalization of 8-bit images is [{scale: 0.00392157}, {normalize: {mean, std}}]
// (1/255 first, as torchvision's ToTensor), e.g. [{scale: 0.00392157}, {normalize: imagenet}].
//
// Decoding less: the first transform may let the decoder shrink a JPEG by 2, 4 or 8 and decode
// only a window of it (decode_plan below). resize and random_resized_crop shrink when their
// output is that much smaller than the region they resample (decode_reduction_for);
// random_resized_crop decodes only its crop box. Both map their geometry onto what was decoded.
//
// Randomness: a random transform draws from the Random it is handed; the loader seeds one per
// sample from (seed, epoch, sample index), so augmentation does not depend on the thread that
// runs it. A transform is immutable once made, so one object serves every worker thread.
//
// Parsing stays out of data/: the config layer turns YAML into TransformSpec values (numbers, or
// a word such as {interpolation: bilinear}) and calls make_transform. To add a kind: a Transform
// subclass (in transform.cpp, or augment.cpp for an augmentation), read with SpecReader
// (data/spec_reader.h), a branch in make_transform, its name in transform_kinds(), a line in the
// table above, and a test.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/shape.h"
#include "data/image.h"

namespace crema::data {

struct PixelPlan;  // data/pixel_plan.h

// A transform as a config describes it: {kind: values} ({scale: 0.5}, {mean: [0.1, 0.2]}),
// {kind: {option: values, ...}} ({random_crop: {size: 28, padding: 4}}) or {kind: preset}
// ({normalize: imagenet}).
struct TransformSpec {
  TransformSpec() = default;
  TransformSpec(std::string kind_, std::vector<float> values_ = {},
                std::map<std::string, std::vector<float>> options_ = {})
      : kind(std::move(kind_)), values(std::move(values_)), options(std::move(options_)) {}

  std::string kind;
  std::vector<float> values;                          // the main value
  std::map<std::string, std::vector<float>> options;  // named values
  std::string preset;                                 // a named set of values instead
  std::map<std::string, std::string> words;           // options given as a word:
                                                      // {interpolation: bilinear}
};

// The presets of `normalize`, by name: {mean, std} per channel.
const std::map<std::string, std::pair<std::vector<float>, std::vector<float>>>& normalize_presets();

class Transform {
 public:
  virtual ~Transform() = default;
  // The shape a sample of `input` shape has after this transform. Throws crema::Error when the
  // transform cannot apply (a per-channel list whose length is not the channel count, a crop of
  // a sample that is not C x H x W). The loader chains it once over the dataset's sample shape.
  virtual Shape output_shape(const Shape& input) const = 0;
  // Transforms one sample (its shape may change); random transforms draw from `random`.
  virtual void apply(Image& image, Random& random) const = 0;
  // Whether apply() draws from its Random (the loader seeds one per sample only if some does).
  virtual bool is_random() const { return false; }
  // Asked before decoding when this transform comes first: how much of a JPEG of `full` size
  // the decoder must produce (data/image.h DecodePlan: a reduction of 1, 2, 4 or 8 and a window),
  // given a copy of the Random apply() will draw from (so it sees the same draws). apply() then
  // gets that part of the file (Image::reduction, top, left, full) and must give what it gives
  // on the whole image, up to resampling. The default: all of it at full size. resize asks for
  // decode_reduction_for(file, output); random_resized_crop for its box at
  // decode_reduction_for(box, output).
  virtual DecodePlan decode_plan(Size2 full, Random random) const { return {}; }
  // apply() as a step of a PixelPlan (data/pixel_plan.h), for decode: gpu: adds this transform's
  // geometry or colour step, drawing from `random` exactly what apply() would draw on an image
  // of the plan's current size. The default throws crema::Error: the transform has no such
  // form (pixel_plan_kinds() lists those that have).
  virtual void plan(PixelPlan& plan, Random& random) const;
  // "scale(0.00390625)", "random_crop(28, 28, padding=4)", for logs.
  virtual std::string description() const = 0;
};

// The decoder's reduction for a transform that resamples `region` (source pixels) to `output`:
// the largest r of 8, 4, 2, 1 with region.height >= r x output.height and region.width >= r x
// output.width. The reduced region is then still at least the output's size, so the resize that
// follows still shrinks (antialiased) and sees every output pixel's detail; FFCV and PIL's
// draft() decide the same way. Decoding at 1/r costs roughly 1/r^2 of the IDCT and colour work.
int decode_reduction_for(Size2 region, Size2 output);

// The kinds whose Transform::plan works (decode: gpu runs them): "resize, center_crop, ...".
const char* pixel_plan_kinds();

// The kinds make_transform knows, in the order the header lists them.
const std::vector<std::string>& transform_kinds();

// Builds the transform `spec` describes. Throws crema::Error for an unknown kind (listing the
// known ones), an unknown option (listing the kind's options), a wrong number of values, or a
// value out of range (a non-positive std or size, a probability outside [0, 1]).
std::unique_ptr<Transform> make_transform(const TransformSpec& spec);

}  // namespace crema::data
