// CUDA convolution on 16-bit NHWC tensors (convolution_tc.h): the three passes in bf16 and fp16
// against the double reference (ref::*_nhwc) computed on the same rounded inputs, on awkward
// geometries (N = 1, odd H and W, C = 3 and 5 (element path), C = 64 and 200 (16-byte path,
// many slabs), K not a tile multiple, stride 2, pad 0/1/2/3, dilation 2, 1x1, 3x3, 7x7 stems,
// backward data's output phases at strides 2 and 3 (dilation sharing a factor with the stride or
// not, padding beyond the stride, phases without taps, groups),
// groups with both paths, a filter gradient cut into many slices); outputs poisoned with NaN,
// dw accumulated onto random values; the forward epilogue (bias, residual, ReLU, residual in
// place, the per-channel sums of y and y^2 against sums of the stored y); misaligned pointers (the
// element path); bit-identical repeats. The geometries that the wgmma kernels take on an H100 or
// H200 (convolution_tc_wgmma*_sm90a.cu) on their own shapes: 1x1 with C and K in {8, 64, 72, 256,
// 1024}, rows not a multiple of the 128-row tile, N = 1, a ring lapped several times, the filter
// gradient in one and in many slices with either tensor as the GEMM's rows, stride 2 with the
// images stacked and not, an asymmetric stride; 3x3 and 5x3 at stride 1 (padding, dilation, C =
// 72), 3x3, 4x4 and 5x5 at strides 2, 3 and (2, 1) (odd sizes, dilation, phases of 1 to 4 taps
// and phases without any), the filter gradient of all these and of the strided 1x1s (im2col slabs
// wrapping rows of Q = 1 to 150 positions, several slices a tap, stride 5), whole images a tile
// (7 x 7 and 6 x 6, a partial last tile) and the fallbacks (Q > 128, a single 7 x 7 image, two
// 6 x 6 phases, phases without taps, stride 5 (forward and data), stride 9 (all three),
// misaligned pointers); on an H100 or H200 each must
// take the kernels it fits (a silent fallback fails); the wgmma epilogue's edges (a partial row
// tile, a partial column tile of 72 or 8 columns, clipped strided pixel blocks) and y, residual and
// dx 4-byte but not 16-byte aligned (mma.sync's pair stores).
// The helpers and the tolerance: convolution_tc_test_util.h; the wgmma kernels' rarer launches
// (the 256-column tile, persistent blocks, data phases in one launch, halo tiles):
// convolution_tc_wgmma_cuda_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "tests/kernels/convolution_tc_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

TEST(ConvolutionTcCuda, EveryPassAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 64, 9, 11, 72, 3, 3, 1, 1},                // C = 64, N = 1, odd H, W, K = 72 (wide)
      {2, 3, 19, 17, 10, 7, 7, 3, 3, 2, 2},          // a stem in small: 7x7, stride 2, C = 3
      {2, 16, 13, 11, 24, 3, 3, 0, 0, 2, 2},         // stride 2, pad 0 (strided data gather)
      {2, 24, 11, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2},    // dilation 2, pad 2
      {2, 64, 7, 9, 136, 1, 1},                      // 1x1 stride 1 (a GEMM), 2 column tiles
      {2, 32, 9, 9, 40, 1, 1, 0, 0, 2, 2},           // strided 1x1 (ResNet's downsampling)
      {2, 16, 8, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2: Cg = 8, Kg = 12 (data: element)
      {1, 12, 9, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2: Cg = 6, every pass element-wise
      {3, 200, 6, 5, 8, 3, 3, 1, 1},                 // inner 1800 (57 slabs); data: 2 wide tiles
      {8, 8, 32, 32, 16, 3, 3, 1, 1},                // N*P*Q = 8192: filter slices
      {1, 5, 4, 4, 3, 3, 3, 3, 3, 3, 2},             // outputs that read only padding
      {2, 8, 5, 6, 3, 3, 3, 1, 1},                   // K = 3
      {1, 3, 29, 31, 16, 7, 7, 3, 3, 2, 2},          // the 7x7 stem, pad 3, odd sizes
      // Backward data by output phase at stride > 1 (taps per phase in rows x columns):
      {2, 136, 9, 9, 136, 3, 3, 1, 1, 2, 2},         // ResNet's 3x3 s2: 1x1..2x2; wide
      {2, 16, 11, 10, 24, 3, 3, 2, 2, 2, 2, 2, 2},   // dilation 2: odd rows take no tap
      {2, 16, 13, 12, 24, 5, 4, 2, 1, 3, 2, 2, 1},   // stride (3, 2), dilation (2, 1)
      {2, 16, 9, 9, 24, 4, 4, 3, 3, 2, 2},           // 4x4, pad 3 > stride
      {2, 32, 9, 8, 48, 3, 3, 1, 1, 2, 2, 1, 1, 2},  // groups 2 at stride 2
      {2, 64, 10, 11, 72, 2, 2, 0, 0, 3, 3},         // a phase row with no taps, 2x2 s3
  };
  uint64_t seed = 300;
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0);
  }
}

TEST(ConvolutionTcCuda, WgmmaGeometries) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  struct Case {
    Conv2dGeometry g;
    bool forward, data, filter;  // fits the wgmma kernels
  };
  const std::vector<Case> cases = {
      // N C  H   W   K  R  S  pad_h pad_w stride_h stride_w
      {{1, 64, 9, 11, 64, 1, 1}, true, true, true},    // N = 1, 99 rows: a partial tile, BN 64
      {{2, 256, 9, 13, 72, 1, 1}, true, true, true},   // 4 slabs over BN 128's 3 stages; K = 72
      {{3, 72, 10, 10, 256, 1, 1}, true, true, true},  // C = 72: a slab of 8 channels + 56 zeros
      {{2, 8, 7, 9, 8, 1, 1}, true, true, true},       // C = K = 8
      {{1, 1024, 5, 7, 64, 1, 1}, true, true, true},   // 16 slabs: the ring lapped 4 times
      {{8, 64, 16, 16, 64, 1, 1}, true, true, true},   // 16 row tiles; filter: 4 slices
      {{4, 16, 40, 40, 24, 1, 1}, true, true, true},   // filter: 13 slices of 8 slabs
      {{4, 64, 14, 14, 72, 1, 1, 0, 0, 2, 2}, true, true, true},  // stride 2, images stacked
      {{3, 72, 13, 11, 64, 1, 1, 0, 0, 2, 2}, true, true, true},  // stride 2, odd H: unstacked
      {{2, 16, 9, 5, 16, 1, 1, 0, 0, 2, 1}, true, true, true},    // stride (2, 1)
      {{2, 16, 5, 9, 16, 1, 1, 0, 0, 1, 2}, false, true, true},   // stride (1, 2): Q * 2 > W
      {{1, 8, 3, 300, 8, 1, 1, 0, 0, 2, 2}, false, true, true},   // Q = 150 > 128
      {{2, 64, 5, 7, 60, 1, 1}, false, false, false},             // K = 60: not a multiple of 8
      // The epilogue's edges: 133 rows (a tile of 5), 200 channels (a last column tile of 72 of
      // BN 128, forward and data), a strided data pixel block clipped by odd H and W.
      {{1, 200, 7, 19, 200, 1, 1}, true, true, true},
      {{2, 200, 11, 9, 136, 1, 1, 0, 0, 2, 2}, true, true, true},
      // padded 1x1: y 9 x 9 (81 rows, one image a tile: no); data: dx 7 x 7, two images a tile
      {{2, 64, 7, 7, 64, 1, 1, 1, 1}, false, true, true},
      // Filters of taps at stride 1: forward and data with rows of one image a tile, tap offsets
      // read through the TMA's zero fill (the padding); the filter gradient one tap a block, slabs
      // of 64 consecutive output positions (x through the im2col map at the tap's offset).
      {{2, 64, 16, 16, 72, 3, 3, 1, 1}, true, true, true},             // 8 rows of 16: 128
      {{1, 72, 20, 12, 64, 3, 3, 1, 1}, true, true, true},             // C = 72: 2 boxes a side
      {{1, 256, 10, 12, 136, 3, 3, 1, 1}, true, true, true},           // 36 slabs, 2 column tiles
      {{1, 64, 9, 14, 200, 3, 3, 1, 1}, true, true, true},             // 126 rows, K = 200
      {{2, 16, 13, 24, 8, 3, 3, 2, 2, 1, 1, 2, 2}, true, true, true},  // dilation 2, pad 2
      {{1, 8, 9, 30, 16, 5, 3, 2, 1}, true, true, true},               // 5 x 3, pads 2 and 1
      {{8, 64, 16, 16, 64, 3, 3, 1, 1}, true, true, true},             // filter: 4 slices a tap
      // Images of at most 64 pixels: whole images a tile (7 x 7: two, 98 rows; 6 x 6: three).
      {{2, 32, 7, 7, 32, 3, 3, 1, 1}, true, true, true},
      {{5, 16, 6, 6, 24, 3, 3, 1, 1}, true, true, true},            // a last tile of two images
      {{3, 16, 14, 14, 16, 3, 3, 1, 1, 2, 2}, true, true, true},    // 7 x 7 outputs and phases
      {{1, 32, 7, 7, 32, 3, 3, 1, 1}, false, false, true},          // one 7 x 7 image: 49 rows
      {{1, 8, 3, 70, 8, 3, 3, 1, 1}, false, false, true},           // Q = 70: slabs wrap rows
      {{2, 16, 9, 1, 16, 3, 1, 1, 0}, false, false, true},          // Q = 1: a slab 64 rows
      {{2, 32, 12, 12, 32, 3, 3, 1, 1, 2, 2}, false, false, true},  // 6 x 6, N = 2: 72 rows
      // Taps at a stride: forward reads x through TMA boxes stepping the stride, the filter
      // gradient through im2col steps; data runs one GEMM per output phase (each phase's rows must
      // fill the tiles).
      {{1, 16, 23, 31, 24, 3, 3, 1, 1, 2, 2}, true, true, true},   // odd H, W; a 4-row tile
      {{2, 72, 19, 21, 40, 5, 5, 2, 2, 2, 2}, true, false, true},  // 5 x 5, C = 72; data: 9 x 10
      // Dilation 2 at stride 2: the odd rows' phase has no tap (data: mma.sync).
      {{1, 8, 30, 40, 16, 3, 3, 2, 2, 2, 2, 2, 2}, true, false, true},
      {{1, 16, 20, 12, 8, 3, 3, 1, 1, 2, 1}, true, true, true},     // stride (2, 1)
      {{2, 128, 28, 28, 136, 3, 3, 1, 1, 2, 2}, true, true, true},  // ResNet's 3x3s2, smaller
      {{1, 16, 36, 30, 24, 3, 3, 1, 1, 3, 3}, true, true, true},    // stride 3: a tap a phase
      {{2, 24, 24, 24, 16, 4, 4, 1, 1, 2, 2}, true, true, true},    // 4 x 4: 2 x 2 taps a phase
      {{1, 8, 20, 260, 8, 3, 3, 1, 1, 2, 2}, false, false, true},   // Q = 130 > 128
      {{8, 64, 32, 32, 64, 3, 3, 1, 1, 2, 2}, true, true, true},    // filter: slices a tap
      {{1, 8, 26, 26, 8, 3, 3, 1, 1, 5, 5}, false, false, true},    // stride 5 > 4; filter <= 8
      {{1, 8, 40, 40, 8, 3, 3, 1, 1, 9, 9}, false, false, false},   // stride 9 > 8
  };
  uint64_t seed = 900;
  for (const Case& c : cases) {
    const auto wgmma = cuda::TcKernels::wgmma;
    EXPECT_EQ(cuda::conv2d_tc_forward_uses_wgmma(c.g, wgmma), c.forward && hopper())
        << describe(c.g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_wgmma(c.g, wgmma), c.data && hopper())
        << describe(c.g);
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_wgmma(c.g, wgmma), c.filter && hopper())
        << describe(c.g);
    // Each family where it runs (`best` picks between them: both must be right).
    for (TcType type : kTypes) {
      check_passes(ctx, make_problem(c.g, type, seed += 7), 0, wgmma);
      check_passes(ctx, make_problem(c.g, type, seed += 7), 0, cuda::TcKernels::mma_sync);
    }
  }
  // Misaligned pointers: the element path, whatever the device.
  const Conv2dGeometry g{2, 64, 5, 7, 72, 1, 1};
  for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, 31), 2);
}

// Fused channel statistics write their partials into the workspace: without one, a named error
// before anything runs (the workspace now starts with the split reductions' room).
TEST(ConvolutionTcCuda, StatisticsNeedTheWorkspace) {
  const Conv2dGeometry g{2, 64, 8, 8, 64, 3, 3, 1, 1};
  float sums[2 * 64];
  cuda::TcEpilogue epilogue;
  epilogue.sum = sums, epilogue.sum_squares = sums + 64;
  try {
    cuda::conv2d_tc_forward(g, TcType::bf16, nullptr, nullptr, nullptr, epilogue, nullptr, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel statistics need the workspace"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConvolutionTcCuda, MisalignedPointersTakeTheElementPath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{2, 16, 7, 6, 24, 3, 3, 1, 1};
  for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, 17), 2);
}

// y, residual and dx 4 bytes past a 16-byte boundary, the operands aligned: the wgmma kernels'
// epilogue writes 16 bytes a lane, so these take mma.sync's pair stores (and must be right).
TEST(ConvolutionTcCuda, OutputsAlignedToFourBytes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {{2, 64, 9, 15, 136, 1, 1}, {1, 64, 16, 16, 72, 3, 3, 1, 1}};
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) {
      const TcProblem p = make_problem(g, type, 41);
      const std::string what = describe(g) + " " + cuda::tc_type_name(type) + " outputs at +4";
      const int m = mantissa_bits(type);
      const size_t ys = p.y.size(), xs = p.dx.size();
      DeviceBuffer x(xs * 2), w(p.w.bits.size() * 2), dy(ys * 2), residual(ys * 2), y(ys * 2),
          dx(xs * 2), bias(size_t(g.K) * 4);
      DeviceBuffer work(std::max({cuda::conv2d_tc_forward_workspace(g),
                                  cuda::conv2d_tc_backward_data_workspace(g, type), size_t(16)}));
      x.upload(p.x.bits), w.upload(p.w.bits), dy.upload(p.dy.bits), bias.upload(p.bias);
      residual.upload(p.residual.bits, 4);
      y.upload(std::vector<uint16_t>(ys, nan_bits(type)), 4);
      dx.upload(std::vector<uint16_t>(xs, nan_bits(type)), 4);
      cuda::TcEpilogue fused;
      fused.bias = static_cast<const float*>(bias.at()), fused.residual = residual.at(4);
      fused.relu = true;
      cuda::conv2d_tc_forward(g, type, x.at(), w.at(), y.at(4), fused, work.at(), ctx.stream(),
                              cuda::TcKernels::wgmma);
      expect_within(what + " forward + bias + residual + ReLU",
                    widened(y.download<uint16_t>(ys, 4), type), p.y_fused,
                    bounds(p.y_fused, p.y_fused_magnitude, m, double(g.R * g.S * g.C) + 2), g.K);
      cuda::conv2d_tc_backward_data(g, type, dy.at(), w.at(), dx.at(4), work.at(), ctx.stream(),
                                    cuda::TcKernels::wgmma);
      expect_within(what + " backward data", widened(dx.download<uint16_t>(xs, 4), type), p.dx,
                    bounds(p.dx, p.dx_magnitude, m, double(g.R * g.S * g.K)), g.C);
    }
  }
}

// residual == y: each element is read, then written, by the one thread that owns it (the 1x1
// geometry on the wgmma kernels on an H100 or H200).
TEST(ConvolutionTcCuda, ResidualInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {{2, 32, 9, 7, 48, 3, 3, 1, 1}, {2, 64, 9, 15, 136, 1, 1}};
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) {
      const TcProblem p = make_problem(g, type, 23);
      const size_t ys = p.y.size();
      DeviceBuffer x(p.x.bits.size() * 2), w(p.w.bits.size() * 2), y(ys * 2);
      x.upload(p.x.bits), w.upload(p.w.bits), y.upload(p.residual.bits);
      std::vector<double> want(ys), magnitude(ys);
      for (size_t i = 0; i < ys; ++i) {
        want[i] = p.y[i] + p.residual.value[i];
        magnitude[i] = p.y_magnitude[i] + std::fabs(p.residual.value[i]);
      }
      cuda::TcEpilogue ep;
      ep.residual = y.at();
      cuda::conv2d_tc_forward(g, type, x.at(), w.at(), y.at(), ep, nullptr, ctx.stream());
      expect_within(describe(g) + " " + cuda::tc_type_name(type) + " residual in place",
                    widened(y.download<uint16_t>(ys), type), want,
                    bounds(want, magnitude, mantissa_bits(type), double(g.R * g.S * g.C) + 1), g.K);
    }
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
