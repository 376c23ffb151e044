// The wgmma kernels' rarer launches on 16-bit NHWC tensors (convolution_tc_wgmma*_sm90a.cu), each
// forced through its TcKernels value and checked by check_passes (convolution_tc_test_util.h: the
// three passes against the double reference, the whole forward epilogue, repeats): the 256-column
// tile, persistent blocks, backward data's phases in one launch (split), halo tiles; and which
// tile and split `best` takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "tests/kernels/convolution_tc_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

// The 256-column tile (TcKernels::wgmma_wide; two wgmma m64n128 a k step, one block an SM):
// forward and data over 256 columns, over 264 and 200 (a partial last tile), a 1x1 at stride 2
// (data: a strided pixel block per row), 16 slabs lapping the 4-stage ring, a stride-2 3x3's data
// phases in one launch; the whole epilogue
// (bias, residual, ReLU, channel sums) and the repeats through check_passes.
TEST(ConvolutionTcCuda, WideTile) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 16, 16, 256, 3, 3, 1, 1},        // 256 columns forward; data over 64: BN 64
      {1, 264, 10, 12, 264, 3, 3, 1, 1},       // 264 both ways: a last tile of 8 columns
      {2, 200, 11, 9, 320, 1, 1, 0, 0, 2, 2},  // strided 1x1: 320 forward, 200 data
      {1, 1024, 5, 7, 256, 1, 1},              // 16 slabs: the ring lapped 4 times
      {2, 136, 14, 14, 64, 3, 3, 1, 1, 2, 2},  // data over 136: four phases in one launch
  };
  check_each(ctx, geometries, 1700, cuda::TcKernels::wgmma_wide);
}

// Persistent blocks (TcKernels::wgmma_persistent; two an SM, each walking units, its producer
// filling the next unit's stages under this one's epilogue; `best` takes them for large layers
// of at most 4 slabs): 294 units of 2 slabs forward and 1 data, more than two an SM on a 132-SM
// GPU (the blocks walk 2 or 3, lapping the 3-stage ring); a strided 1x1 (data: a pixel block a
// row); a 3x3 with the whole epilogue; a split reduction (which runs a block a unit in clusters
// of its parts whatever the launch asks: ConvProblem::reduce_parts); a stride-2 3x3's data
// phases in one launch.
TEST(ConvolutionTcCuda, PersistentBlocks) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {12, 128, 56, 56, 64, 1, 1},             // 294 units: blocks walk several
      {4, 64, 28, 28, 136, 1, 1, 0, 0, 2, 2},  // strided 1x1
      {2, 64, 16, 16, 72, 3, 3, 1, 1},         // taps, a last column tile of 8
      {2, 512, 7, 7, 512, 3, 3, 1, 1},         // 8 blocks: the reduction split in 8
      {2, 136, 14, 14, 64, 3, 3, 1, 1, 2, 2},  // data: four phases in one launch
  };
  EXPECT_EQ(cuda::tc::wgmma_forward_split_parts(geometries[3], 132), 8);
  check_each(ctx, geometries, 2900, cuda::TcKernels::wgmma_persistent);
}

// Streaming tiles (TcKernels::wgmma_stream: a stride-1 1x1 of at most 4 slabs on one block an
// SM, the filter resident, the outputs stored by the TMA; convolution_tc_wgmma_stream.cuh),
// checked by check_passes where they run (the fused forward, with a residual and channel sums,
// takes the ring kernel): row counts not a multiple of 128 (the TMA clips the last tile's
// stores), 1 to 4 slabs and 7 onto 56 columns, 8 channels of a 64-channel slab, columns clipped
// inside a box (40, 56, 72, 144), a box past the columns skipped (144 of a 256-column tile), five
// column tiles of 128 (520: the last of 8; these few rows leave SMs idle) and three (264, 4
// slabs).
TEST(ConvolutionTcCuda, StreamTiles) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S
      {3, 64, 11, 13, 256, 1, 1},  // forward 1 slab onto 256 over 429 rows; data 4 onto 64
      {2, 72, 9, 15, 40, 1, 1},    // forward 2 slabs onto 40; data 1 slab onto 72
      {4, 128, 7, 9, 520, 1, 1},   // forward 2 slabs onto five column tiles; data: the ring
      {1, 8, 5, 5, 16, 1, 1},      // N = 1, 25 rows, both passes
      {2, 256, 14, 14, 64, 1, 1},  // data 1 slab onto 256 columns; forward 4 onto 64
      {5, 24, 12, 11, 144, 1, 1},  // forward onto 144; data 3 slabs onto 24
      {2, 200, 9, 7, 264, 1, 1},   // forward 4 slabs onto 264: tiles of 128; data: the ring
      {3, 448, 7, 5, 56, 1, 1},    // forward 7 slabs onto 56; data 1 slab onto four tiles of 128
  };
  // At most 4 slabs of 64 channels, 8 onto at most 64 columns.
  auto fits = [](int64_t inner, int64_t columns) {
    return (inner + 63) / 64 <= (columns <= 64 ? 8 : 4);
  };
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_EQ(cuda::conv2d_tc_forward_uses_stream(g, cuda::TcKernels::wgmma_stream), fits(g.C, g.K))
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_stream(g, cuda::TcKernels::wgmma_stream),
              fits(g.K, g.C))
        << describe(g);
  }
  check_each(ctx, geometries, 3300, cuda::TcKernels::wgmma_stream);
}

// The streaming tiles against the ring kernel (TcKernels::wgmma, itself checked against the double
// reference) bit for bit: the same products summed in the same slab order, rounded once, so every
// output equal -- on layers whose blocks walk 6 to 9 tiles and lap their ring (32 and 48 images
// of 56 x 56: 784 and 1,176 row tiles on 132 SMs; 1 slab onto 256 columns, 4 onto 64), the
// forward with bias and ReLU (the epilogue the streaming tiles apply; check_passes' fused
// forward asks for a residual too), and backward data; both 16-bit types.
TEST(ConvolutionTcCuda, StreamTilesMatchTheRing) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const gpu::Stream s = ctx.stream();
  const cuda::TcKernels kernels[2] = {cuda::TcKernels::wgmma_stream, cuda::TcKernels::wgmma};
  const Conv2dGeometry geometries[] = {{48, 64, 56, 56, 256, 1, 1}, {32, 256, 56, 56, 64, 1, 1}};
  Random rng(3400);
  for (TcType type : kTypes) {
    for (const Conv2dGeometry& g : geometries) {
      const std::string what = describe(g) + " " + cuda::tc_type_name(type);
      const int64_t xs = g.N * g.H * g.W * g.C, ys = g.N * g.P() * g.Q() * g.K;
      ASSERT_TRUE(cuda::conv2d_tc_forward_uses_stream(g, cuda::TcKernels::best)) << what;
      ASSERT_TRUE(cuda::conv2d_tc_backward_data_uses_stream(g, cuda::TcKernels::best)) << what;
      DeviceBuffer x(size_t(xs) * 2), w(size_t(g.K * g.C) * 2), bias(size_t(g.K) * 4),
          y(size_t(ys) * 2), dy(size_t(ys) * 2), dx(size_t(xs) * 2);
      DeviceBuffer work(std::max(cuda::conv2d_tc_backward_data_workspace(g, type), size_t(16)));
      x.upload(random_values(rng, xs, type).bits);
      w.upload(random_values(rng, g.K * g.C, type).bits);
      dy.upload(random_values(rng, ys, type).bits);
      std::vector<float> b;
      for (int64_t k = 0; k < g.K; ++k) b.push_back(float(rng.uniform(-1.0, 1.0)));
      bias.upload(b);
      cuda::TcEpilogue ep;
      ep.bias = static_cast<const float*>(bias.at()), ep.relu = true;
      std::vector<uint16_t> y_of[2], dx_of[2];
      for (int i = 0; i < 2; ++i) {
        y.upload(std::vector<uint16_t>(size_t(ys), nan_bits(type)));
        cuda::conv2d_tc_forward(g, type, x.at(), w.at(), y.at(), ep, nullptr, s, kernels[i]);
        y_of[i] = y.download<uint16_t>(size_t(ys));
        dx.upload(std::vector<uint16_t>(size_t(xs), nan_bits(type)));
        cuda::conv2d_tc_backward_data(g, type, dy.at(), w.at(), dx.at(), work.at(), s, kernels[i]);
        dx_of[i] = dx.download<uint16_t>(size_t(xs));
      }
      EXPECT_TRUE(y_of[0] == y_of[1]) << what << " forward + bias + ReLU: streaming tiles differ";
      EXPECT_TRUE(dx_of[0] == dx_of[1]) << what << " backward data: streaming tiles differ";
    }
  }
}

// Backward data at stride 2 with its phases in one launch (even H and W: four phases of one
// extent; stride (2, 1): two), here also split: 2 images of 7 x 7 phases make 1 tile a phase, the
// 3x3's phases take 1, 2, 2 and 4 taps of 8 slabs each, so the 32-slab phase sets parts of 8 and
// the shorter phases leave parts empty (zeros summed).
TEST(ConvolutionTcCuda, DataPhasesInOneLaunch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 14, 14, 512, 3, 3, 1, 1, 2, 2},
      {2, 16, 28, 14, 72, 3, 3, 1, 1, 2, 1},
  };
  uint64_t seed = 2300;
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_wgmma(g), hopper()) << describe(g);
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0);
  }
  EXPECT_EQ(cuda::tc::wgmma_backward_data_split_parts(geometries[0], 132), 4);
}

// Which tile `best` takes: 256 columns only for long reductions over whole 256-column tiles
// that still give every SM a block; 64 where 128-column tiles would leave SMs idle; and where a
// reduction is split. The split itself runs in every test above whose geometry makes fewer than
// 128 tiles over at least 8 slabs (WgmmaGeometries' 1024-channel 1x1 and 36-slab 3x3, ...).
TEST(ConvolutionTcCuda, TileColumns) {
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 256, 36, 132), 256);  // a large 3x3 256 -> 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 256, 1, 132), 128);   // a 1x1 64 -> 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 384, 36, 132), 128);  // 384: not whole tiles
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(100, 256, 36, 132), 128);  // 100 blocks of 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(60, 256, 36, 132), 64);    // 120 blocks of 128
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 64, 36, 132), 64);
  // ResNet-50 at batch 128: layer3's 3x3 (256 -> 256 at 14 x 14) wide both ways; its 1x1s not.
  const Conv2dGeometry conv2{128, 256, 14, 14, 256, 3, 3, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_forward_tile_columns(conv2, 132), 256);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_tile_columns(conv2, 132), 256);
  const Conv2dGeometry conv3{128, 256, 14, 14, 1024, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_forward_tile_columns(conv3, 132), 128);
  // Split reductions: layer4's 3x3 at batch 16 (8 row tiles of two images x 8 column tiles of
  // 64, 72 slabs) in 4 parts of 18 slabs (256 / 64 blocks), the large layers and the short
  // reductions not at all.
  const Conv2dGeometry small{16, 512, 7, 7, 512, 3, 3, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_forward_split_parts(small, 132), 4);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_split_parts(small, 132), 4);
  EXPECT_EQ(cuda::tc::wgmma_forward_split_parts(conv2, 132), 1);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_split_parts(conv3, 132), 1);
  EXPECT_EQ(cuda::tc::wgmma_forward_split_parts(Conv2dGeometry{1, 64, 9, 11, 64, 1, 1}, 132), 1);
}

// The deep ring (one block an SM, Ring<BN, kDeep>: 9 stages at 64 columns, 7 at 128; `best` and
// TcKernels::wgmma take it for unsplit, non-persistent launches of at most a block an SM whose
// reductions are longer than the 96 KB ring): a 1x1 forward of 8 slabs at 64 columns (16 blocks),
// a 1x1 backward data of 10 slabs, a 1x1 forward at 128 columns on exactly 132 blocks, and a
// stride-2 3x3 forward (9 slabs, two 7 x 7 output images a tile); the rule itself. The whole
// epilogue and the repeats through check_passes.
TEST(ConvolutionTcCuda, DeepRing) {
  EXPECT_TRUE(cuda::tc::wgmma_deep_ring_pays(100, 16, 132, 64));
  EXPECT_FALSE(cuda::tc::wgmma_deep_ring_pays(100, 4, 132, 64));   // the 4-stage ring holds it
  EXPECT_TRUE(cuda::tc::wgmma_deep_ring_pays(100, 4, 132, 128));   // 3 stages at 128
  EXPECT_FALSE(cuda::tc::wgmma_deep_ring_pays(140, 16, 132, 64));  // two blocks on some SMs
  EXPECT_FALSE(cuda::tc::wgmma_deep_ring_pays(10, 40, 132, 256));
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 512, 14, 14, 256, 1, 1},             // forward: 16 blocks of 64 columns, 8 slabs
      {2, 256, 14, 14, 640, 1, 1},             // data: 16 blocks, 10 slabs
      {2, 256, 64, 66, 256, 1, 1},             // forward: 132 blocks of 128 columns, 4 slabs
      {2, 64, 14, 14, 128, 3, 3, 1, 1, 2, 2},  // forward: 2 blocks, 9 taps of one slab
  };
  EXPECT_TRUE(cuda::tc::wgmma_forward_deep_ring(geometries[0], 132));
  EXPECT_FALSE(cuda::tc::wgmma_backward_data_deep_ring(geometries[0], 132));  // 4 slabs
  EXPECT_TRUE(cuda::tc::wgmma_backward_data_deep_ring(geometries[1], 132));
  EXPECT_TRUE(cuda::tc::wgmma_forward_deep_ring(geometries[2], 132));
  EXPECT_EQ(cuda::tc::wgmma_forward_tile_columns(geometries[2], 132), 128);
  EXPECT_TRUE(cuda::tc::wgmma_forward_deep_ring(geometries[3], 132));
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_TRUE(cuda::conv2d_tc_forward_uses_wgmma(g, cuda::TcKernels::wgmma)) << describe(g);
  }
  check_each(ctx, geometries, 3100, cuda::TcKernels::wgmma);
}

// Halo tiles (TcKernels::wgmma_halo: a stride-1 filter with taps, its input read once a channel
// slab, each tap's A the halo's rows from a shifted start; convolution_tc_wgmma_halo.cuh),
// forward and data, each checked to take them on an H100 or H200: rows of 18 padded to a 7-row
// tile with a partial last band and a last column tile of 8 (K = 72); ResNet's 3x3 at 56 (two rows
// of 58 a tile; 64 columns both ways: three blocks an SM); 136 channels (3 slabs, the last of 8:
// two halo slots lapped) at 128 columns;
// dilation 2 with padding 2 over 24 channels; no padding (data: dx wider than dy, the halo's
// corner at the last tap); a 1x3 (one row of taps); a 5x5 (25 taps lapping the B ring); rows of
// 100 pixels, one a tile, over 200 channels. The whole epilogue and the repeats through
// check_passes.
TEST(ConvolutionTcCuda, HaloTiles) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {2, 64, 16, 16, 72, 3, 3, 1, 1},   {1, 64, 56, 56, 64, 3, 3, 1, 1},
      {2, 136, 28, 28, 128, 3, 3, 1, 1}, {2, 24, 20, 20, 32, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 64, 18, 18, 64, 3, 3, 0, 0},   {2, 40, 12, 20, 48, 1, 3, 0, 1},
      {2, 16, 24, 24, 24, 5, 5, 2, 2},   {1, 200, 10, 100, 64, 3, 3, 1, 1},
  };
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(g, cuda::TcKernels::wgmma_halo)) << describe(g);
    EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(g, cuda::TcKernels::wgmma_halo))
        << describe(g);
  }
  // Three blocks an SM at 64 columns (the 64-channel 3x3 both ways), two at 128.
  const auto halo = cuda::tc::WgmmaLaunch::halo;
  EXPECT_EQ(cuda::tc::wgmma_forward_halo_blocks(geometries[1], halo), 3);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_halo_blocks(geometries[1], halo), 3);
  EXPECT_EQ(cuda::tc::wgmma_forward_halo_blocks(geometries[2], halo), 2);
  check_each(ctx, geometries, 3100, cuda::TcKernels::wgmma_halo);
  // `best` takes them for large layers, not where the ring kernel splits a few tiles' reduction
  // (4 images of 14 x 14 at 256 channels: 8 row tiles).
  const Conv2dGeometry large{128, 64, 56, 56, 64, 3, 3, 1, 1}, few{4, 256, 14, 14, 256, 3, 3, 1, 1};
  EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(large, cuda::TcKernels::best));
  EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(large, cuda::TcKernels::best));
  EXPECT_FALSE(cuda::conv2d_tc_forward_uses_halo(few, cuda::TcKernels::best));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_halo(few, cuda::TcKernels::best));
}

// Halo tiles on rows wider than a tile (VGG's 224 x 224), which the ring kernel cannot take: each
// output row cut into pieces (Rows::segments), a tile a piece: 224 in two of 112 (pitch 114),
// 300 in three of 100 over 32 channels, no padding (forward 228 in two of 114; data onto dx's
// 230 in two of 115), a 1x3 over 250 (two of 125, the box 127 wide), dilation 2 over 200 (two
// of 100 with a reach of 4), a 5x5 over 240 (two of 120, pitch 124); forward and data, each
// checked to take them under every wgmma launch and `best`. A row of 130 (pieces of 65: fewer
// than 96 of a tile's rows) fits no wgmma kernel: mma.sync runs it.
TEST(ConvolutionTcCuda, HaloTilesOnWideRows) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {1, 64, 6, 224, 64, 3, 3, 1, 1},
      {2, 32, 4, 300, 48, 3, 3, 1, 1},
      {1, 64, 5, 230, 64, 3, 3, 0, 0},
      {1, 40, 3, 250, 48, 1, 3, 0, 1},
      {1, 24, 7, 200, 32, 3, 3, 2, 2, 1, 1, 2, 2},
      {1, 16, 6, 240, 24, 5, 5, 2, 2},
  };
  for (const Conv2dGeometry& g : geometries) {
    for (cuda::TcKernels k :
         {cuda::TcKernels::wgmma_halo, cuda::TcKernels::wgmma, cuda::TcKernels::best}) {
      // `best` leaves a forward of taps over fewer than 24 channels to mma.sync.
      const bool mma_sync = k == cuda::TcKernels::best && g.C < 24;
      EXPECT_EQ(cuda::conv2d_tc_forward_uses_halo(g, k), !mma_sync) << describe(g);
      EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(g, k)) << describe(g);
    }
  }
  check_each(ctx, geometries, 3700, cuda::TcKernels::wgmma_halo);
  check_each(ctx, geometries, 3800, cuda::TcKernels::best);
  const Conv2dGeometry vgg{8, 64, 224, 224, 64, 3, 3, 1, 1}, narrow{1, 64, 4, 130, 64, 3, 3, 1, 1};
  EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(vgg, cuda::TcKernels::best));
  EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(vgg, cuda::TcKernels::best));
  EXPECT_FALSE(cuda::tc::wgmma_forward_fits(narrow));
  EXPECT_FALSE(cuda::tc::wgmma_backward_data_fits(narrow));
  check_each(ctx, {narrow}, 3900, cuda::TcKernels::best);
}

// Halo tiles three blocks an SM (64-column tiles whose slots and 3 B stages fit a third of an
// SM's shared memory), on small layers (the sanitizers' case): one slab (64 -> 64 at 16 x 16, a
// band of 7 rows of 18), 3 slabs lapping two slots (136 -> 64 at 12 x 12; its data over 136
// columns: two blocks an SM at 128), the data over 64 columns from 136 channels.
TEST(ConvolutionTcCuda, HaloTilesThreeBlocksAnSm) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w
      {2, 64, 16, 16, 64, 3, 3, 1, 1},
      {2, 136, 12, 12, 64, 3, 3, 1, 1},
      {2, 64, 12, 12, 136, 3, 3, 1, 1},
  };
  const auto halo = cuda::tc::WgmmaLaunch::halo;
  EXPECT_EQ(cuda::tc::wgmma_forward_halo_blocks(geometries[0], halo), 3);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_halo_blocks(geometries[0], halo), 3);
  EXPECT_EQ(cuda::tc::wgmma_forward_halo_blocks(geometries[1], halo), 3);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_halo_blocks(geometries[1], halo), 2);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_halo_blocks(geometries[2], halo), 3);
  check_each(ctx, geometries, 3200, cuda::TcKernels::wgmma_halo);
}

// Halo tiles with one slot for several channel slabs (two slots and 3 B stages do not fit
// beside rows of 112 to 126 pixels: slots of 46-49 KB): each slab's last tap retires every wgmma
// before its slot goes back for the next slab's halo. 2 slabs at 126 (128 columns), 3 slabs onto
// 64 columns at 112 (data: 1 slab onto 192 columns), 2 slabs on rows of 224 (pieces of 112);
// forward and data, checked to take halo tiles (and `best` to take them on VGG's layer).
TEST(ConvolutionTcCuda, HaloTilesOneSlot) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w
      {1, 128, 5, 126, 128, 3, 3, 1, 1},
      {2, 192, 3, 112, 64, 3, 3, 1, 1},
      {1, 128, 3, 224, 64, 3, 3, 1, 1},
  };
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(g, cuda::TcKernels::wgmma_halo)) << describe(g);
    EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(g, cuda::TcKernels::wgmma_halo))
        << describe(g);
  }
  check_each(ctx, geometries, 4000, cuda::TcKernels::wgmma_halo);
  // `best` takes them for VGG's 128 -> 128 at 112 x 112 (a few tiles above split: the ring).
  const Conv2dGeometry vgg{8, 128, 112, 112, 128, 3, 3, 1, 1};
  EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(vgg, cuda::TcKernels::best));
  EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(vgg, cuda::TcKernels::best));
}

// Where halo tiles do not fit, the forced launch runs the ring kernel (and says so): strides,
// a 1x1, padded rows wider than a tile in pieces under 96 pixels (129: two of 64), rows filling
// under 96 of its 128 (a single 7 x 7 image).
TEST(ConvolutionTcCuda, HaloFits) {
  const Conv2dGeometry fit{2, 64, 16, 16, 72, 3, 3, 1, 1};
  EXPECT_TRUE(cuda::tc::wgmma_forward_halo_fits(fit));
  EXPECT_TRUE(cuda::tc::wgmma_backward_data_halo_fits(fit));
  const Conv2dGeometry misfits[] = {
      {2, 64, 16, 16, 64, 3, 3, 1, 1, 2, 2},  // stride 2
      {2, 64, 16, 16, 64, 1, 1},              // a 1x1: one tap, nothing to share
      {1, 64, 10, 127, 64, 3, 3, 1, 1},       // padded rows of 129 pixels: pieces of 64
      {1, 64, 7, 7, 64, 3, 3, 1, 1},          // 49 of 128 rows
  };
  for (const Conv2dGeometry& g : misfits) {
    EXPECT_FALSE(cuda::tc::wgmma_forward_halo_fits(g)) << describe(g);
    EXPECT_FALSE(cuda::tc::wgmma_backward_data_halo_fits(g)) << describe(g);
  }
}

// Backward data of a 1x1 and of a stride-1 filter reads w itself (MN-major boxes, no transposed
// copy) where w is 16-byte aligned; a w 8 bytes off that alignment (dy and dx aligned) takes the
// transposed copy in the workspace on the same wgmma kernels (the ring's and the halo's, B
// K-major). Both against the double reference, halo tiles and the ring kernel each.
TEST(ConvolutionTcCuda, DataReadsWOrItsTranspose) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 16, 16, 72, 3, 3, 1, 1},
      {2, 72, 9, 11, 136, 1, 1},
      {2, 40, 10, 9, 64, 1, 1, 0, 0, 2, 2},
  };
  uint64_t seed = 3500;
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_TRUE(cuda::tc::wgmma_backward_data_reads_w(g)) << describe(g);
    const TcProblem p = make_problem(g, TcType::bf16, seed += 7);
    const size_t xs = p.dx.size();
    DeviceBuffer w(p.w.bits.size() * 2), dy(p.dy.bits.size() * 2), dx(xs * 2),
        work(std::max(cuda::conv2d_tc_backward_data_workspace(g, TcType::bf16), size_t(16)));
    dy.upload(p.dy.bits);
    for (size_t w_offset : {size_t(0), size_t(8)}) {
      w.upload(p.w.bits, w_offset);
      for (cuda::TcKernels kernels : {cuda::TcKernels::wgmma, cuda::TcKernels::wgmma_halo}) {
        dx.upload(std::vector<uint16_t>(xs, nan_bits(TcType::bf16)));
        cuda::conv2d_tc_backward_data(g, TcType::bf16, dy.at(), w.at(w_offset), dx.at(), work.at(),
                                      ctx.stream(), kernels);
        expect_within(
            describe(g) + " backward data, w offset " + std::to_string(w_offset),
            widened(dx.download<uint16_t>(xs), TcType::bf16), p.dx,
            bounds(p.dx, p.dx_magnitude, mantissa_bits(TcType::bf16), double(g.R * g.S * g.K)),
            g.C);
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
