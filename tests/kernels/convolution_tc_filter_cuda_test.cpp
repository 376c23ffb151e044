// The filter gradient on 16-bit NHWC tensors (conv2d_tc_backward_filter, convolution_tc.h) on the
// geometries of its two special paths, in bf16 and fp16 against the double reference
// (ref::conv2d_backward_filter_nhwc) on the same rounded inputs, dw accumulated onto random
// values, each run twice (the repeat bit-identical):
//   - the wgmma kernel's two taps a tile (C = 64 with taps, convolution_tc_wgmma_filter_sm90a.cu):
//     3x3 64 -> 64, 64 -> 128 (and 32, 72, 200) at 14x14, 9x9, 56x56, N = 1..3, dilation 2,
//     stride 2 (and both), odd and even tap counts (an odd count's last tile carries one tap:
//     1x2, 2x2, 5x5, 1x3, 3x1); forced wgmma (on an H100 or H200 these must take it) and `best`
//     (which takes it there too), and mma.sync for the same geometries;
//   - the wgmma kernel's im2col windows (every filter but a plain 1x1): sizes, pads, strides,
//     dilations, both row tensors, and the im2col map's limits;
//   - the wgmma kernel's slices summed in clusters (of several blocks, and of one), in one group
//     or several (the groups' partials), dw and the workspace off 16-byte alignment;
//   - the stem on x padded to 8 channels (convolution_tc_filter_cuda.cu, C < 8, groups 1; forced
//     mma.sync, `best` taking the stem kernel below): 7x7 stride 2 pad 3 at 32x32 and 31x29 with
//     C = 1, 3, 5, 7; dy misaligned (the element path on the real geometry instead) and K = 12
//     (not a multiple of 8: the element path);
//   - the stem's own kernel (convolution_stem_mma.h, forced and `best`): ResNet's 7x7 stride 2 on
//     odd sizes, 3x3 stride 1 and 2 (several k-step warps), 1 to 7 channels, K = 16 to 64,
//     strides (2, 1), strides above the filter, padding past its reach, runs crossing images,
//     rows of 9 and of 290 pixels; x misaligned; the fallbacks it leaves.
//
// Tolerance (as convolution_tc_cuda_test.cpp's, fp32 result): 16-bit x 16-bit products are exact
// in fp32, so |got - want| <= (n u) sum|terms| with u = 2^-24 and n = N*P*Q products + the slice
// sums (at most N*P*Q / 256 + 1) + dw's start; sum|terms| is the reference on absolute values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::TcKernels;
using cuda::TcType;

// A device buffer of `bytes` (+ 16, room to misalign it).
class Buffer {
 public:
  explicit Buffer(size_t bytes) : ptr_(gpu::device_allocate(bytes + 16)) {}
  ~Buffer() { gpu::device_free(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* at(size_t offset = 0) const { return static_cast<char*>(ptr_) + offset; }

 private:
  void* ptr_;
};

// Random 16-bit inputs (their bits and what they are), random fp32 dw's start, and the double
// reference of dw and of its terms' magnitudes.
struct FilterCase {
  std::vector<uint16_t> x, dy;
  std::vector<float> dw0;
  std::vector<double> want, magnitude;
};

FilterCase make_case(const Conv2dGeometry& g, TcType type, uint64_t seed) {
  Random rng(seed);
  FilterCase c;
  std::vector<double> x, dy, x_abs, dy_abs;
  auto fill = [&](int64_t count, std::vector<uint16_t>& bits, std::vector<double>& value,
                  std::vector<double>& magnitude) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = float(rng.uniform(-1.0, 1.0));
      bits.push_back(type == TcType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v));
      value.push_back(type == TcType::bf16 ? bf16_to_f32(bits.back()) : f16_to_f32(bits.back()));
      magnitude.push_back(std::fabs(value.back()));
    }
  };
  fill(g.N * g.H * g.W * g.C, c.x, x, x_abs);
  fill(g.N * g.P() * g.Q() * g.K, c.dy, dy, dy_abs);
  const int64_t ws = g.K * g.R * g.S * (g.C / g.groups);
  for (int64_t i = 0; i < ws; ++i) {
    c.dw0.push_back(float(rng.uniform(-1.0, 1.0)));
    c.want.push_back(c.dw0.back()), c.magnitude.push_back(std::fabs(c.dw0.back()));
  }
  ref::conv2d_backward_filter_nhwc<double>(g, x.data(), dy.data(), c.want.data());
  ref::conv2d_backward_filter_nhwc<double>(g, x_abs.data(), dy_abs.data(), c.magnitude.data());
  return c;
}

const char* kernels_name(TcKernels kernels) {
  return kernels == TcKernels::best       ? "best"
         : kernels == TcKernels::wgmma    ? "wgmma"
         : kernels == TcKernels::stem_mma ? "stem_mma"
                                          : "mma.sync";
}

// dw = dw0 + the filter gradient, twice (on a poisoned workspace): within the bound, then
// bit-identical. x and dy
// `x_offset` and `dy_offset` bytes into their buffers (2: misaligned).
// `extra_terms`: additions on a sum's path beyond the bound's (the stem kernel's: its blocks'
// partials, 32 lanes of them, then their sum).
void check_filter(Context& ctx, const Conv2dGeometry& g, TcType type, const FilterCase& c,
                  TcKernels kernels, size_t x_offset = 0, size_t dy_offset = 0,
                  size_t dw_offset = 0, size_t work_offset = 0, double extra_terms = 0) {
  const std::string what =
      describe(g) + " " + cuda::tc_type_name(type) + " " + kernels_name(kernels) +
      (x_offset != 0 ? " x misaligned" : "") + (dy_offset != 0 ? " dy misaligned" : "") +
      (dw_offset != 0 ? " dw misaligned" : "") + (work_offset != 0 ? " workspace misaligned" : "");
  const size_t ws = c.dw0.size();
  Buffer x(c.x.size() * 2), dy(c.dy.size() * 2), dw(ws * 4);
  const size_t work_bytes = std::max(cuda::conv2d_tc_backward_filter_workspace(g), size_t(16));
  Buffer work(work_bytes);
  // The workspace poisoned with NaN (all ones): a partial never written fails.
  const std::vector<uint8_t> poison(work_bytes, 0xff);
  gpu::copy(x.at(x_offset), c.x.data(), c.x.size() * 2, nullptr);
  gpu::copy(dy.at(dy_offset), c.dy.data(), c.dy.size() * 2, nullptr);
  const double npq = double(g.N * g.P() * g.Q());
  const double n = npq + std::ceil(npq / 256) + 2 + extra_terms;
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    gpu::copy(dw.at(dw_offset), c.dw0.data(), ws * 4, nullptr);
    gpu::copy(work.at(work_offset), poison.data(), work_bytes, nullptr);
    cuda::conv2d_tc_backward_filter(g, type, x.at(x_offset), dy.at(dy_offset),
                                    static_cast<float*>(dw.at(dw_offset)), work.at(work_offset),
                                    ctx.stream(), kernels);
    std::vector<float> got(ws);
    gpu::copy(got.data(), dw.at(dw_offset), ws * 4, nullptr);
    if (run == 1) {
      EXPECT_EQ(got, first) << what << ": a repeat differs";
      break;
    }
    first = got;
    int64_t bad = 0, at = -1;
    for (size_t i = 0; i < ws; ++i) {
      const double bound = n * std::ldexp(1.0, -24) * c.magnitude[i];
      if (std::fabs(double(got[i]) - c.want[i]) <= bound) continue;  // NaN fails
      if (at < 0) at = int64_t(i);
      ++bad;
    }
    if (bad != 0) {
      const int64_t rsc = g.R * g.S * (g.C / g.groups);
      ADD_FAILURE() << what << ": " << bad << " of " << ws << " off; first: k " << at / rsc
                    << ", rsc " << at % rsc << " got " << got[size_t(at)] << ", want "
                    << c.want[size_t(at)];
    }
  }
}

const TcType kTypes[] = {TcType::bf16, TcType::f16};

bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

TEST(ConvolutionTcFilterCuda, WgmmaTwoTapsATile) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W   K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {3, 64, 14, 14, 64, 3, 3, 1, 1},   // ResNet's 3x3 64 at 14: 5 tiles, the last 1 tap
      {2, 64, 9, 9, 64, 3, 3, 1, 1},     // 9 x 9: slabs wrap rows and images
      {1, 64, 56, 56, 64, 3, 3, 1, 1},   // ResNet's 64@56, N = 1
      {3, 64, 14, 14, 128, 3, 3, 1, 1},  // K = 128: BN 128
      {2, 64, 9, 9, 128, 3, 3, 1, 1},
      {1, 64, 56, 56, 128, 3, 3, 1, 1},
      {2, 64, 13, 11, 64, 3, 3, 2, 2, 1, 1, 2, 2},  // dilation 2, pad 2
      {2, 64, 15, 15, 128, 3, 3, 1, 1, 2, 2},       // stride 2 (ResNet-18's 64 -> 128)
      {1, 64, 56, 56, 128, 3, 3, 1, 1, 2, 2},       // the same at 56
      {2, 64, 17, 19, 64, 3, 3, 2, 2, 2, 2, 2, 2},  // stride 2 and dilation 2
      {2, 64, 10, 12, 32, 2, 2, 1, 0},              // 4 taps (even), K = 32 < C
      {1, 64, 9, 13, 72, 1, 2, 0, 1},               // 2 taps: one tile; K = 72 (2 boxes of dy)
      {2, 64, 11, 9, 200, 5, 5, 2, 2},              // 25 taps; K = 200: two column tiles
      {2, 64, 8, 30, 64, 1, 3, 0, 1},               // 1 x 3: the second tap s + 1 in one row
      {2, 64, 30, 8, 64, 3, 1, 1, 0, 1, 1},         // 3 x 1: the second tap a row down
      {8, 64, 16, 16, 64, 3, 3, 1, 1},              // several slices a tap pair
  };
  uint64_t seed = 500;
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma), hopper())
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::best), hopper())
        << describe(g);
    for (TcType type : kTypes) {
      const FilterCase c = make_case(g, type, seed += 7);
      check_filter(ctx, g, type, c, TcKernels::wgmma);
      check_filter(ctx, g, type, c, TcKernels::mma_sync);
    }
  }
  // `best` once on ResNet's shape (the same kernel as `wgmma` where it runs).
  const Conv2dGeometry g{2, 64, 14, 14, 64, 3, 3, 1, 1};
  check_filter(ctx, g, TcType::bf16, make_case(g, TcType::bf16, 77), TcKernels::best);
}

// x through the im2col map (every filter but a 1x1 at stride 1 without padding): windows that
// wrap rows and images inside a slab, unequal sizes, pads, strides (up to 8) and dilations, R = dy
// (K >= C) and R = x, channels past a 64-channel box, and enough positions for several slices.
TEST(ConvolutionTcFilterCuda, WgmmaIm2colWindows) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W   K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {2, 128, 14, 14, 256, 3, 3, 1, 1},              // R = dy: ResNet's 3x3 at 14
      {2, 256, 13, 11, 128, 3, 3, 1, 2},              // R = x; pad_w 2, 13 x 11
      {3, 96, 15, 17, 160, 3, 3, 1, 1, 2, 1},         // stride 2 down, 1 across
      {2, 128, 20, 18, 128, 5, 3, 2, 1, 1, 1, 2, 1},  // dilation 2 down
      {2, 128, 29, 31, 136, 1, 1, 0, 0, 2, 2},        // a strided 1x1, K = 136
      {1, 128, 40, 44, 128, 3, 3, 1, 1, 8, 8},        // stride 8
      {2, 72, 9, 7, 88, 2, 2, 0, 1},                  // 2x2, 72 and 88 channels
      {2, 16, 12, 10, 64, 3, 3, 1, 1},                // C = 16: most of x's box past C
      {2, 256, 28, 28, 256, 3, 3, 1, 1, 2, 2},        // ResNet's 3x3s2 at 28
      {8, 128, 14, 14, 256, 3, 3, 1, 1},              // several slices
  };
  uint64_t seed = 700;
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma), hopper())
        << describe(g);
    for (TcType type : kTypes) {
      const FilterCase c = make_case(g, type, seed += 7);
      check_filter(ctx, g, type, c, TcKernels::wgmma);
    }
  }
  // Past the im2col map's limits: stride 9, a corner outside [-128, 127] (pad 129; a 1 x 300
  // window with pad 1 leaves 1 - 299).
  const Conv2dGeometry too_far[] = {{1, 64, 40, 40, 64, 3, 3, 1, 1, 9, 9},
                                    {1, 64, 8, 8, 64, 3, 3, 129, 1},
                                    {1, 64, 8, 400, 64, 1, 300, 0, 1}};
  for (const Conv2dGeometry& g : too_far) {
    EXPECT_FALSE(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma)) << describe(g);
  }
}

// The cut's slices summed within clusters of blocks (shared memory read across the cluster) into
// dw, or, with more than one group of clusters a tile, into the groups' partials and then dw:
// clusters of several blocks in several groups (R = x, R = dy with a 32-column tile, a plain
// 1x1), groups of one block (many slices; taps paired); dw and the workspace 4-byte but not
// 16-byte aligned (scalar accesses) on both sides.
TEST(ConvolutionTcFilterCuda, WgmmaSlicesSummedInClusters) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  struct Case {
    Conv2dGeometry g;
    bool clustered;  // more than one block a cluster
  };
  const Case cases[] = {
      {{1, 96, 128, 128, 64, 3, 3, 1, 1}, true},   // R = x (transposed into shared memory)
      {{1, 32, 128, 128, 64, 3, 3, 1, 1}, true},   // R = dy, 32 of BN 64's columns
      {{1, 64, 128, 128, 64, 1, 1}, true},         // a plain 1x1
      {{2, 16, 100, 100, 32, 3, 3, 1, 1}, false},  // clusters of one block
      {{1, 64, 128, 128, 64, 3, 3, 1, 1}, false},  // taps paired: clusters of one block
  };
  uint64_t seed = 800;
  for (const Case& k : cases) {
    const Conv2dGeometry& g = k.g;
    ASSERT_TRUE(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma)) << describe(g);
    EXPECT_GT(cuda::tc::wgmma_backward_filter_workspace(g), size_t(0))
        << describe(g) << ": one group of clusters (the groups' sums go untested)";
    EXPECT_EQ(cuda::tc::wgmma_backward_filter_cluster(g) > 1, k.clustered) << describe(g);
    for (TcType type : kTypes) {
      const FilterCase c = make_case(g, type, seed += 7);
      check_filter(ctx, g, type, c, TcKernels::wgmma);
      if (type == TcType::bf16) check_filter(ctx, g, type, c, TcKernels::wgmma, 0, 0, 4, 4);
    }
  }
  // One group (dw written by the clusters themselves), dw misaligned.
  const Conv2dGeometry one{2, 128, 14, 14, 256, 3, 3, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_backward_filter_workspace(one), size_t(0));
  check_filter(ctx, one, TcType::bf16, make_case(one, TcType::bf16, 9), TcKernels::wgmma, 0, 0, 4);
}

// The cluster sums at each cluster size the cut takes on this device (add_cluster is unrolled for
// each, its loads in flight together): 1x1s and 3x3s whose reductions cheapest_cut spreads over
// clusters of 1 to 8 blocks (sizes from the cut's model with an H200's slots; the driver's own
// slots may move some by one), one with groups of clusters, each against the double reference with
// dw's old values kept (+=).
TEST(ConvolutionTcFilterCuda, WgmmaEveryClusterSize) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {
      {1, 128, 14, 14, 256, 3, 3, 1, 1}, {1, 128, 20, 20, 128, 1, 1},
      {3, 256, 16, 16, 512, 1, 1},       {2, 128, 20, 20, 128, 1, 1},
      {3, 128, 20, 20, 128, 1, 1},       {6, 256, 16, 16, 512, 1, 1},
      {2, 96, 40, 40, 128, 3, 3, 1, 1},  {2, 128, 32, 32, 128, 3, 3, 1, 1},
      {8, 96, 40, 40, 128, 3, 3, 1, 1},
  };
  std::set<int> sizes;
  std::string seen;
  uint64_t seed = 900;
  for (const Conv2dGeometry& g : geometries) {
    ASSERT_TRUE(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma)) << describe(g);
    const int cluster = cuda::tc::wgmma_backward_filter_cluster(g);
    sizes.insert(cluster);
    seen += " " + describe(g) + ": " + std::to_string(cluster) +
            (cuda::tc::wgmma_backward_filter_workspace(g) > 0 ? " (groups)" : "") + ";";
    for (TcType type : kTypes) {
      check_filter(ctx, g, type, make_case(g, type, seed += 7), TcKernels::wgmma);
    }
  }
  EXPECT_GE(sizes.size(), size_t(4)) << "cluster sizes:" << seen;
}

TEST(ConvolutionTcFilterCuda, StemOnChannelsPaddedToEight) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 600;
  for (int64_t C : {1, 3, 5, 7}) {
    const Conv2dGeometry geometries[] = {
        {2, C, 32, 32, 64, 7, 7, 3, 3, 2, 2},  // the stem in small
        {3, C, 31, 29, 64, 7, 7, 3, 3, 2, 2},  // odd sizes
        {1, C, 31, 29, 16, 3, 3, 1, 1},        // 3x3, K = 16: a narrow tile
    };
    for (const Conv2dGeometry& g : geometries) {
      EXPECT_FALSE(cuda::conv2d_tc_backward_filter_uses_wgmma(g, TcKernels::wgmma)) << describe(g);
      for (TcType type : kTypes) {
        const FilterCase c = make_case(g, type, seed += 7);
        check_filter(ctx, g, type, c, TcKernels::best);
        check_filter(ctx, g, type, c, TcKernels::mma_sync);
      }
    }
  }
  // x misaligned: still padded (the copy reads it element by element). The element path on the
  // real geometry: dy misaligned, or K not a multiple of 8.
  const Conv2dGeometry stem{2, 3, 31, 29, 64, 7, 7, 3, 3, 2, 2},
      k12{2, 3, 31, 29, 12, 7, 7, 3, 3, 2, 2};
  for (TcType type : kTypes) {
    const FilterCase c = make_case(stem, type, 91);
    check_filter(ctx, stem, type, c, TcKernels::best, 2, 0);
    check_filter(ctx, stem, type, c, TcKernels::best, 0, 2);
    check_filter(ctx, k12, type, make_case(k12, type, 93), TcKernels::best);
  }
}

TEST(ConvolutionTcFilterCuda, StemKernel) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {
      // N C  H   W   K  R  S  pad_h pad_w stride_h stride_w
      {2, 3, 31, 29, 64, 7, 7, 3, 3, 2, 2},  // ResNet's stem, odd sizes: 147 columns, 5 warps
      {2, 3, 17, 19, 64, 3, 3, 1, 1},        // VGG's: 27 columns, k steps over 4 warps
      {3, 3, 33, 35, 32, 3, 3, 1, 1, 2, 2},  // MobileNet's onto 32
      {1, 1, 20, 22, 16, 5, 5, 2, 2},        // one channel, K = 16
      {2, 4, 15, 13, 48, 3, 3, 1, 1},        // 4 channels, 3 m-tiles
      {1, 5, 11, 12, 16, 3, 5, 1, 2, 2, 1},  // 5 channels, strides (2, 1), a 3x5 filter
      {2, 7, 9, 9, 32, 3, 3, 4, 4},          // 7 channels; padding past the reach
      {2, 3, 14, 15, 16, 2, 2, 0, 1, 3, 3},  // stride 3 over a 2x2 filter: no row shared
      {7, 3, 5, 6, 16, 3, 3, 1, 1},          // 7 small images: runs cross images
      {3, 2, 7, 9, 32, 3, 3, 1, 1},          // rows of 9: one k step
      {1, 3, 4, 290, 64, 3, 3, 1, 1},        // rows of 290 pixels
  };
  uint64_t seed = 700;
  for (const Conv2dGeometry& g : geometries) {
    ASSERT_TRUE(cuda::stem_mma::backward_filter_fits(g)) << describe(g);
    EXPECT_TRUE(cuda::conv2d_tc_backward_filter_uses_stem(g)) << describe(g);
    EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_filter, g, DType::bf16), "stem_mma")
        << describe(g);
    // The partials' sum: each of 32 lanes adds every 32nd block partial, then the lanes in order.
    const double slices = double(cuda::stem_mma::backward_filter_workspace(g)) /
                          (4.0 * double(g.K * g.R * g.S * g.C));
    const double extra = std::ceil(slices / 32) + 33;
    for (TcType type : kTypes) {
      const FilterCase c = make_case(g, type, seed += 7);
      check_filter(ctx, g, type, c, TcKernels::stem_mma, 0, 0, 0, 0, extra);
      check_filter(ctx, g, type, c, TcKernels::best, 2, 0, 4, 0, extra);  // x, dw misaligned
    }
  }
  // What it leaves: K not a multiple of 16, 8 channels, dilation, groups, rows too wide.
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({2, 3, 9, 9, 24, 3, 3, 1, 1}));
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({2, 3, 9, 9, 80, 3, 3, 1, 1}));
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({2, 8, 9, 9, 16, 3, 3, 1, 1}));
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({2, 3, 9, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2}));
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({2, 4, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}));
  EXPECT_FALSE(cuda::stem_mma::backward_filter_fits({1, 3, 9, 400, 64, 7, 7, 3, 3, 2, 2}));
  EXPECT_EQ(cuda::stem_mma::backward_filter_workspace({2, 3, 9, 9, 24, 3, 3, 1, 1}), size_t(0));
  EXPECT_TRUE(cuda::stem_mma::backward_filter_fits({1, 3, 9, 318, 64, 7, 7, 3, 3, 2, 2}));  // Q 159
}

}  // namespace
}  // namespace crema::kernels::conv_test
