// CUDA NHWC convolution on f32 tensors in tf32 math on the wgmma + TMA kernels
// (conv2d_forward_nhwc and conv2d_backward_data_nhwc on an H100 or H200; convolution.h, "NHWC"):
// the shapes that take that route (1x1 with and without stride, 3x3 at strides 1 and 2 on 56, 28,
// 14 and 7 pixel images, N = 1 and odd N, C and K multiples of 4 but not of 8, 64, 256) and shapes
// that must fall back to the mma.sync kernels (C = 3, C or K not a multiple of 4, groups 2, a
// single 7 x 7 image, a misaligned pointer), each against the double reference, which kernel ran
// asserted through conv2d_nhwc_kernel, and repeats bit for bit.
//
// Tolerance (f32 tensors, tf32 math): ||out - ref|| / ||ref|| < 1e-5 against the reference on the
// operands as the kernel that ran sees them -- wgmma *truncates* each fp32 operand to TF32 (its top
// 19 bits), mma.sync rounds it (cvt.rna: to nearest, ties away) -- so only the fp32 sums differ:
// products of two 11-bit significands are exact in fp32. The two readings differ by ~2^-11
// relative per operand (a norm error near 8e-4, simulated on the host), so a kernel reading its
// operands the other way fails the check: it tells the paths apart. fp32 math on the same shapes
// is held to 1e-5 of the unrounded reference (fp32 stays the exact FFMA kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;
using cuda::TcKernels;

// How the tensor cores read an fp32 operand.
enum class Reading { exact, rounded, truncated };

double read_as(float v, Reading reading) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (reading == Reading::rounded) u = (u + 0x1000u) & 0xffffe000u;  // cvt.rna.tf32.f32
  if (reading == Reading::truncated) u &= 0xffffe000u;               // wgmma's tf32 read
  std::memcpy(&v, &u, 4);
  return v;
}

std::vector<double> read_all(const std::vector<float>& v, Reading reading) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = read_as(v[i], reading);
  return d;
}

struct Inputs {
  std::vector<float> x, w, bias, dy;
};

Inputs make_inputs(const Conv2dGeometry& g, uint64_t seed) {
  Random rng(seed);
  Inputs in;
  in.x = random_values(rng, g.N * g.H * g.W * g.C);
  in.w = random_values(rng, g.K * g.R * g.S * (g.C / g.groups));
  in.bias = random_values(rng, g.K);
  in.dy = random_values(rng, g.N * g.P() * g.Q() * g.K);
  return in;
}

// y (with bias) and dx from the operands read as `reading`.
struct Expected {
  std::vector<double> y, dx;
};

Expected expected(const Conv2dGeometry& g, const Inputs& in, Reading reading) {
  const std::vector<double> x = read_all(in.x, reading), w = read_all(in.w, reading),
                            dy = read_all(in.dy, reading);
  const std::vector<double> bias(in.bias.begin(), in.bias.end());
  Expected e;
  e.y.resize(in.dy.size());
  e.dx.resize(in.x.size());
  ref::conv2d_forward_nhwc<double>(g, x.data(), w.data(), bias.data(), e.y.data());
  ref::conv2d_backward_data_nhwc<double>(g, dy.data(), w.data(), e.dx.data());
  return e;
}

bool on_hopper() {
  return gpu::device_description(0).find("sm_90") != std::string::npos;
}

// Runs forward and backward data of g in `math` with `kernels` (inputs offset by `shift` floats
// from the allocations' 16-byte aligned starts), twice; checks the repeat's bits and returns y, dx.
struct Outputs {
  std::vector<float> y, dx;
};

Outputs run_passes(Context& ctx, const Conv2dGeometry& g, const Inputs& in, GemmMath math,
                   TcKernels kernels, int shift = 0) {
  auto shifted = [&](const std::vector<float>& v) {
    std::vector<float> more(v.size() + size_t(shift), 0.0f);
    std::copy(v.begin(), v.end(), more.begin() + shift);
    return upload(ctx, more);
  };
  Tensor x = shifted(in.x), w = shifted(in.w), dy = shifted(in.dy), bias = upload(ctx, in.bias);
  Tensor y = ctx.empty({int64_t(in.dy.size())}), dx = ctx.empty({int64_t(in.x.size())});
  float* ws = ctx.workspace(std::max({cuda::conv2d_forward_nhwc_workspace(g),
                                      cuda::conv2d_backward_data_nhwc_workspace(g), size_t(1)}));
  Outputs first;
  for (int repeat = 0; repeat < 2; ++repeat) {
    ctx.fill(y, kNaN);
    ctx.fill(dx, kNaN);
    cuda::conv2d_forward_nhwc(g, x.data<float>() + shift, w.data<float>() + shift,
                              bias.data<float>(), y.data<float>(), ws, ctx.stream(), math, kernels);
    cuda::conv2d_backward_data_nhwc(g, dy.data<float>() + shift, w.data<float>() + shift,
                                    dx.data<float>(), ws, ctx.stream(), math, kernels);
    ctx.synchronize();
    Outputs out{y.to_vector(), dx.to_vector()};
    if (repeat == 0) {
      first = out;
    } else {
      EXPECT_EQ(std::memcmp(first.y.data(), out.y.data(), out.y.size() * 4), 0)
          << describe(g) << ": forward repeat differs";
      EXPECT_EQ(std::memcmp(first.dx.data(), out.dx.data(), out.dx.size() * 4), 0)
          << describe(g) << ": backward data repeat differs";
    }
  }
  return first;
}

// g in tf32: `best` on the wgmma kernels exactly where wgmma_expected says so on Hopper (the
// truncated reading), mma_sync forced always on the rounded one; fp32 math exact.
void check(Context& ctx, const Conv2dGeometry& g, bool wgmma_expected, uint64_t seed,
           bool with_fp32 = false) {
  SCOPED_TRACE(describe(g));
  const bool wgmma = wgmma_expected && on_hopper();
  const char* kernel = wgmma ? "tc_wgmma" : "nhwc_implicit_gemm";
  EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::forward, g, DType::f32, GemmMath::tf32), kernel);
  // Few channels, not whole 4-float vectors: backward data direct (convolution_few_channels_
  // nhwc.h) for at most 8 of them without dilation, else as GEMM + gather (col2im_nhwc.h); other
  // filters with taps onto at most 8 channels: the data pass on mma.sync under `best`.
  const bool few = g.groups == 1 && g.C < 32 && g.C % 4 != 0;
  const bool direct = few && g.C <= 8 && g.dilation_h == 1 && g.dilation_w == 1;
  // Taps onto 8 to 31 channels at stride 1: the few-channel kernel on mma.sync, whose rule its
  // own tests check (operands rounded, as mma.sync's).
  const bool mma = cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, GemmMath::tf32);
  const bool data_wgmma = wgmma && !mma && !(g.R * g.S > 1 && g.C / g.groups <= 8);
  EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f32, GemmMath::tf32),
               mma              ? "direct_mma_few_channels"
               : direct         ? "direct_few_channels"
               : few && g.C > 1 ? "col2im_gemm"
               : data_wgmma     ? "tc_wgmma"
                                : "nhwc_implicit_gemm");
  // The filter gradient: its own tests (convolution_tf32_wgmma_filter_cuda_test.cpp).
  const bool filter_wgmma = on_hopper() && cuda::tc::wgmma_backward_filter_fits(g, 4) &&
                            cuda::tc::wgmma_backward_filter_pays(g);
  EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_filter, g, DType::f32, GemmMath::tf32),
               filter_wgmma ? "tc_wgmma" : "nhwc_implicit_gemm");
  EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::forward, g, DType::f32, GemmMath::fp32),
               "nhwc_implicit_gemm");
  EXPECT_EQ(cuda::conv2d_forward_nhwc_uses_wgmma(g, GemmMath::tf32, TcKernels::mma_sync), false);

  const Inputs in = make_inputs(g, seed);
  const Expected rounded = expected(g, in, Reading::rounded);
  const Outputs best = run_passes(ctx, g, in, GemmMath::tf32, TcKernels::best);
  const Expected truncated = wgmma ? expected(g, in, Reading::truncated) : Expected{};
  const Expected& want = wgmma ? truncated : rounded;
  expect_close(best.y, want.y, std::string("tf32 forward, ") + kernel);
  expect_close(best.dx, (data_wgmma ? truncated : rounded).dx,
               std::string("tf32 backward data, ") + (data_wgmma ? kernel
                                                      : mma      ? "direct_mma_few_channels"
                                                                 : "mma.sync"));
  if (wgmma) {
    const Outputs forced = run_passes(ctx, g, in, GemmMath::tf32, TcKernels::mma_sync);
    expect_close(forced.y, rounded.y, "tf32 forward, mma_sync forced");
    expect_close(forced.dx, rounded.dx, "tf32 backward data, mma_sync forced");
  }
  if (with_fp32) {
    const Expected exact = expected(g, in, Reading::exact);
    const Outputs fp32 = run_passes(ctx, g, in, GemmMath::fp32, TcKernels::best);
    expect_close(fp32.y, exact.y, "fp32 forward");
    expect_close(fp32.dx, exact.dx, "fp32 backward data");
  }
}

TEST(ConvolutionTf32WgmmaCuda, ShapesOnTheWgmmaRoute) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  struct Case {
    Conv2dGeometry g;
    bool with_fp32;
  };
  const Case cases[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {{1, 36, 14, 14, 100, 1, 1}, true},               // 1x1 flat, N = 1, C, K % 8 == 4
      {{3, 100, 14, 14, 36, 1, 1, 0, 0, 2, 2}, false},  // 1x1 stride 2 (stacked images), N odd
      {{2, 4, 28, 28, 64, 1, 1}, false},                // C = 4: one real channel in 8 of a slab
      {{2, 64, 28, 28, 12, 1, 1, 0, 0, 2, 2}, false},   // 1x1 stride 2 at 28, K = 12
      {{1, 12, 28, 28, 36, 3, 3, 1, 1}, true},          // 3x3 at 28, N = 1
      {{1, 4, 56, 56, 12, 3, 3, 1, 1, 2, 2}, false},    // 3x3 stride 2 on 56: two data phases
      {{3, 64, 56, 56, 64, 3, 3, 1, 1}, false},         // 3x3 at 56, N odd
      {{5, 64, 14, 14, 256, 3, 3, 1, 1}, false},        // 3x3 at 14, K = 256 (BN 128, 2 tiles)
      {{4, 100, 14, 14, 36, 3, 3, 1, 1, 2, 2}, false},  // 3x3 stride 2 to 7 x 7, 2 images a tile
      {{3, 256, 7, 7, 64, 3, 3, 1, 1}, true},           // 3x3 at 7, N odd: the last tile half full
  };
  uint64_t seed = 4100;
  for (const Case& c : cases) check(ctx, c.g, true, seed += 11, c.with_fp32);
}

// Forward and backward data of each shape in tf32 on the launch `kernels` forces (`launch` names
// it in failures), against the truncated reading.
template <size_t N>
void check_forced(Context& ctx, const Conv2dGeometry (&shapes)[N], uint64_t seed, TcKernels kernels,
                  const std::string& launch) {
  for (const Conv2dGeometry& g : shapes) {
    SCOPED_TRACE(describe(g));
    const Inputs in = make_inputs(g, seed += 11);
    const Expected truncated = expected(g, in, Reading::truncated);
    const Outputs out = run_passes(ctx, g, in, GemmMath::tf32, kernels);
    expect_close(out.y, truncated.y, "tf32 forward, " + launch);
    expect_close(out.dx, truncated.dx, "tf32 backward data, " + launch);
  }
}

// The 256-column tile (TcKernels::wgmma_wide) on f32 tensors: forward over K = 256 and 264 (a
// last column tile of 8), backward data over C = 264 and 320 (a 1x1 at stride 2: a last tile of
// 64), against the truncated reading; `best` takes it only for large layers.
TEST(ConvolutionTf32WgmmaCuda, WideTile) {
  CREMA_REQUIRE_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 14, 14, 256, 3, 3, 1, 1},
      {1, 264, 10, 12, 264, 3, 3, 1, 1},
      {2, 320, 11, 9, 256, 1, 1, 0, 0, 2, 2},
  };
  check_forced(ctx, shapes, 4700, TcKernels::wgmma_wide, "256-column tile");
}

// Persistent blocks (TcKernels::wgmma_persistent) on f32 tensors: a 1x1 of 294 units (the blocks
// walk several) and a 3x3, forward and backward data against the truncated reading.
TEST(ConvolutionTf32WgmmaCuda, PersistentBlocks) {
  CREMA_REQUIRE_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {12, 64, 56, 56, 64, 1, 1},
      {2, 64, 14, 14, 68, 3, 3, 1, 1},
  };
  check_forced(ctx, shapes, 4900, TcKernels::wgmma_persistent, "persistent blocks");
}

// Halo tiles (TcKernels::wgmma_halo) on f32 tensors, slabs of 32 channels: 64 channels (two
// slabs, two halo slots) into 68 (a last column tile of 4), dilation 2 over 36 channels, a 5x5,
// rows of 224 (two pieces a row), two slabs through one halo slot at 112; forward and backward data
// against the truncated reading, each checked to take them.
TEST(ConvolutionTf32WgmmaCuda, HaloTiles) {
  CREMA_REQUIRE_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {2, 64, 16, 16, 68, 3, 3, 1, 1},
      {1, 36, 20, 20, 40, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 32, 24, 24, 32, 5, 5, 2, 2},
      {1, 32, 5, 224, 32, 3, 3, 1, 1},  // rows wider than a tile: pieces of 112
      {1, 64, 4, 112, 32, 3, 3, 1, 1},  // 2 slabs in one halo slot (46 KB)
  };
  for (const Conv2dGeometry& g : shapes) {
    EXPECT_TRUE(cuda::conv2d_tc_forward_uses_halo(g, TcKernels::wgmma_halo, true)) << describe(g);
    EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_halo(g, TcKernels::wgmma_halo, true))
        << describe(g);
  }
  check_forced(ctx, shapes, 5100, TcKernels::wgmma_halo, "halo tiles");
}

// Streaming tiles (TcKernels::wgmma_stream) on f32 tensors, slabs of 32 channels: forward from 64
// channels (2 slabs) onto 256 (two tiles of 128: these few rows leave SMs idle; bias), from 36
// onto 60 (a box clipped at 60), from 32 onto 520 (five column tiles, the last of 8), from 48
// onto 160 (a 256-column tile), from 100 (4 slabs) onto 136, from 256 (8 slabs) onto 64; data
// from 256 (8 slabs) onto 64, from 160 (5) onto 48, from 60 onto 36, from 64 onto 256 (from 136
// and 520 onto 100 and 32: the ring kernel); against the truncated reading, each checked to take
// them where they fit.
TEST(ConvolutionTf32WgmmaCuda, StreamTiles) {
  CREMA_REQUIRE_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S
      {3, 64, 11, 13, 256, 1, 1}, {2, 36, 9, 15, 60, 1, 1},   {4, 32, 7, 9, 520, 1, 1},
      {2, 256, 14, 14, 64, 1, 1}, {3, 100, 7, 11, 136, 1, 1}, {2, 48, 9, 11, 160, 1, 1},
  };
  // At most 4 slabs of 32 channels, 8 onto at most 64 columns.
  auto fits = [](int64_t inner, int64_t columns) {
    return (inner + 31) / 32 <= (columns <= 64 ? 8 : 4);
  };
  for (const Conv2dGeometry& g : shapes) {
    EXPECT_EQ(cuda::conv2d_tc_forward_uses_stream(g, TcKernels::wgmma_stream, true), fits(g.C, g.K))
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_stream(g, TcKernels::wgmma_stream, true),
              fits(g.K, g.C))
        << describe(g);
  }
  check_forced(ctx, shapes, 5300, TcKernels::wgmma_stream, "streaming tiles");
}

TEST(ConvolutionTf32WgmmaCuda, ShapesThatFallBack) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {2, 3, 28, 28, 64, 3, 3, 1, 1},                // C = 3 (the stem)
      {2, 6, 28, 28, 12, 3, 3, 1, 1},                // C not a multiple of 4
      {2, 8, 28, 28, 6, 1, 1},                       // K not a multiple of 4
      {2, 8, 28, 28, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2
      {1, 64, 7, 7, 64, 3, 3, 1, 1},                 // one 7 x 7 image: 49 of 128 tile rows
  };
  uint64_t seed = 4300;
  for (const Conv2dGeometry& g : shapes) check(ctx, g, false, seed += 11);
}

// A shape on the wgmma route with its inputs one float off 16-byte alignment: the mma.sync
// kernels (the rounded reading) take it.
TEST(ConvolutionTf32WgmmaCuda, MisalignedPointersFallBack) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{2, 36, 14, 14, 36, 3, 3, 1, 1};
  const Inputs in = make_inputs(g, 4500);
  const Expected rounded = expected(g, in, Reading::rounded);
  const Outputs out = run_passes(ctx, g, in, GemmMath::tf32, TcKernels::best, 1);
  expect_close(out.y, rounded.y, describe(g) + " misaligned tf32 forward");
  expect_close(out.dx, rounded.dx, describe(g) + " misaligned tf32 backward data");
}

}  // namespace
}  // namespace crema::kernels::conv_test
