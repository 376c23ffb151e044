// The geometry of a 2-D convolution: sizes, padding, strides, dilation and groups, and what
// follows from them (the output size, whether the filter is pointwise or depthwise).
#pragma once

#include <cstdint>
#include <string>

#include "core/shape.h"
#include "kernels/im2col/im2col.h"

namespace crema::kernels {

// Geometry of a 2-D convolution, NCHW activations and KCRS filters (C/groups per filter).
struct Conv2dGeometry {
  int64_t N, C, H, W;  // input
  int64_t K;           // output channels
  int64_t R, S;        // filter height, width
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;

  int64_t P() const { return (H + 2 * pad_h - dilation_h * (R - 1) - 1) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dilation_w * (S - 1) - 1) / stride_w + 1; }
  // The tensors' shapes: x [N, C, H, W], w [K, C/groups, R, S], y [N, K, P, Q].
  Shape x_shape() const { return {N, C, H, W}; }
  Shape w_shape() const { return {K, C / groups, R, S}; }
  Shape y_shape() const { return {N, K, P(), Q()}; }
  // Throws crema::Error naming `where` (the layer) when the geometry cannot work: non-positive
  // sizes, strides or dilations, negative padding, C or K not divisible by groups, or a
  // (dilated) filter larger than the padded input.
  void validate(const std::string& where) const;
  // The patches of one image within one group (C/groups channels), for im2col.
  Im2colGeometry group_patches() const;
  // A 1x1 filter, stride 1, no padding: patches are the input itself (P = H, Q = W).
  bool pointwise() const {
    return R == 1 && S == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
  // One input channel per group, several groups (MobileNet's depthwise convolution; K/groups
  // filters per channel).
  bool depthwise() const { return groups > 1 && C == groups; }
  // Every size equal (a layer keeps its algorithm choice while its input's geometry stays).
  bool operator==(const Conv2dGeometry& o) const {
    return N == o.N && C == o.C && H == o.H && W == o.W && K == o.K && R == o.R && S == o.S &&
           pad_h == o.pad_h && pad_w == o.pad_w && stride_h == o.stride_h &&
           stride_w == o.stride_w && dilation_h == o.dilation_h && dilation_w == o.dilation_w &&
           groups == o.groups;
  }
  bool operator!=(const Conv2dGeometry& o) const { return !(*this == o); }
};

}  // namespace crema::kernels
