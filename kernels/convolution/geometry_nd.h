// The geometry of an N-d convolution with 1, 2 or 3 spatial axes (PyTorch's Conv1d, Conv2d,
// Conv3d; cuDNN's N-d descriptors): per spatial axis an input extent, filter extent, padding,
// stride and dilation, listed outermost first (L; H, W; D, H, W).
//
// Two forms of it run the code:
//   as_2d()   rank 1 and 2 as the 2-D geometry they equal (rank 1: H = R = 1, no padding, stride
//             or dilation on that axis), so both run the tuned 2-D paths of convolution.h; rank 3:
//             the in-plane axes (H, W) with N and C, which depth_col re-batches;
//   padded()  any rank as 3 axes, leading axes of extent 1 (filter 1, stride 1, padding 0): the
//             form the N-d reference and the 3-D paths loop over.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/shape.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels {

struct ConvNdGeometry {
  int rank = 2;                     // spatial axes: 1 [N,C,L], 2 [N,C,H,W] or 3 [N,C,D,H,W]
  int64_t N = 1, C = 1, K = 1;      // images, input channels, output channels
  std::array<int64_t, 3> in{};      // input extent per spatial axis (first `rank` entries used)
  std::array<int64_t, 3> kernel{};  // filter extent
  std::array<int64_t, 3> pad{}, stride{1, 1, 1}, dilation{1, 1, 1};
  int64_t groups = 1;

  // Output extent along spatial axis a: (in + 2*pad - dilation*(kernel-1) - 1) / stride + 1.
  int64_t out(int a) const {
    return (in[a] + 2 * pad[a] - dilation[a] * (kernel[a] - 1) - 1) / stride[a] + 1;
  }
  // Products over the spatial axes: input, output and filter volumes.
  int64_t in_volume() const;
  int64_t out_volume() const;
  int64_t kernel_volume() const;
  // x [N, C, in...], w [K, C/groups, kernel...], y [N, K, out...].
  Shape x_shape() const;
  Shape w_shape() const;
  Shape y_shape() const;
  // Throws crema::Error naming `where` for a rank outside 1..3, non-positive sizes, strides or
  // dilations, negative padding, C or K not divisible by groups, or a (dilated) filter larger
  // than the padded input along some axis.
  void validate(const std::string& where) const;
  // Rank 1 or 2: the equal 2-D geometry; rank 3: the in-plane axes (H, W) with N and C.
  Conv2dGeometry as_2d() const;
  // The same convolution over 3 spatial axes, the missing leading axes of extent 1.
  ConvNdGeometry padded() const;
};

}  // namespace crema::kernels
