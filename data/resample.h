// Separable image resampling as torchvision defines it (v2's `resize` on tensors, which is
// torch.nn.functional.interpolate; with antialias, the same weights as PIL's ImagingResample).
//
// A resize is two 1-D passes: rows (each row to the new width) and columns (each column to the
// new height), in the order that costs fewer multiply-adds (PIL and torch go rows first; the
// order changes float rounding only). Each pass gives output i the weighted sum of a short
// window of input samples, its weights computed once per axis (ResampleAxis). Source pixel j
// covers [j, j + 1), so output i of an axis shrunk by s = in / out is centred at s (i + 0.5).
//
//   interpolation  antialias  weights of output i (support in input pixels)
//   nearest        (ignored)  1 at floor(i s), clamped to in - 1 (interpolate's "nearest";
//                             i itself when in = out, i / 2 when out = 2 in, as PyTorch does)
//   bilinear       false      x = max(s (i + 0.5) - 0.5, 0): 1 - t at floor(x), t at floor(x) + 1
//                             (t = x - floor(x); the last pixel repeats): 2 taps whatever s is
//   bicubic        false      x = s (i + 0.5) - 0.5: Keys' cubic with a = -0.75 at floor(x) - 1
//                             .. floor(x) + 2, indices clamped into the image (PyTorch's bicubic)
//   bilinear       true       f(d) = max(0, 1 - |d|), the triangle
//   bicubic        true       f(d) = Keys' cubic with a = -0.5 (PIL's and PyTorch's aa choice)
//     (antialias) for s > 1 the filter widens to the shrink factor: w_j = f((j + 0.5 - c) / s)
//     over the pixels j of [c - R, c + R) (R = support x s), c = s (i + 0.5), the window clipped
//     to the image and the weights divided by their sum (so edges renormalize instead of
//     repeating pixels); for s <= 1 (growing) the same with s = 1, support 1 (bilinear) or 2.
//   Keys' cubic: f(d) = (a + 2)|d|^3 - (a + 3)|d|^2 + 1 for |d| <= 1,
//                a|d|^3 - 5a|d|^2 + 8a|d| - 4a for 1 < |d| < 2, 0 beyond.
//
// Values are float throughout: no rounding between the passes and no clamping (bicubic may
// overshoot 0..255), as torch's float tensors; PIL's uint8 path rounds each pass to 0..255 and so
// differs by up to about one level of 255. Why antialias matters: without it a 500 -> 224 shrink
// reads two of every ~2.2 pixels and aliases fine texture; with it every source pixel counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crema::data {

enum class Interpolation { nearest, bilinear, bicubic };

struct ResizeMode {
  Interpolation interpolation = Interpolation::bilinear;
  bool antialias = true;
};

// "nearest", "bilinear", "bicubic"; throws crema::Error listing them otherwise.
Interpolation parse_interpolation(const std::string& name);
const char* interpolation_name(Interpolation interpolation);

// The weights of one axis: output i reads inputs first[i] .. first[i] + taps - 1 with weights
// weights[i * taps ..] (zeros pad the shorter windows; a window always lies inside the input).
struct ResampleAxis {
  int64_t taps = 0;
  std::vector<int32_t> first;  // [out]
  std::vector<float> weights;  // [out * taps]
};

ResampleAxis resample_axis(int64_t in_size, int64_t out_size, ResizeMode mode);

// Resizes `planes` planes of in_height x in_width floats, each read at in + p * in_plane with
// rows in_stride apart (a window of a larger image: in_stride its width), to out_height x
// out_width planes stored one after another at `out`. `scratch` holds the rows pass's result.
void resample_planes(const float* in, int64_t planes, int64_t in_plane, int64_t in_stride,
                     int64_t in_height, int64_t in_width, float* out, int64_t out_height,
                     int64_t out_width, ResizeMode mode, std::vector<float>& scratch);

}  // namespace crema::data
