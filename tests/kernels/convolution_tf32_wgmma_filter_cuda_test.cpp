// The filter gradient of f32 NHWC convolutions in tf32 math on the wgmma + TMA kernel
// (conv2d_backward_filter_nhwc on an H100 or H200; convolution_tc_wgmma_filter_sm90a.cu, "f32 in
// tf32"): every layout of its tile -- taps paired (C = 64, an odd tap count), rows from dy (K >=
// C), rows from x, 64- and 128-column tiles, boxes partly past the channels (C or K = 4, 36, 100)
// -- and every way of reading x -- a plain 1x1, a strided 1x1, 3x3 at strides 1 and 2, dilation 2,
// a 5x5 -- then cuts whose slices are summed in clusters and in groups, dw and the workspace only
// 4-byte aligned, and the shapes that fall back (C not a multiple of 4, groups 2, x misaligned,
// fp32 math). Each against the double reference on the operands rounded to TF32 (cvt.rna: the
// kernel's transposers round, as the mma.sync kernels do), on top of a dw that is not zero (the
// pass adds), repeated bit for bit, which kernel ran asserted.
//
// Tolerance: ||dw - ref|| / ||ref|| < 1e-5. The products of two TF32 values are exact in fp32, so
// only the fp32 sums differ (N*P*Q up to 50,176 terms, summed in slabs of 32 and slices: a few
// 1e-7 relative); the truncated reading (what wgmma's own tf32 read would give) differs by ~8e-4
// and fails it.
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

bool on_hopper() {
  return gpu::device_description(0).find("sm_90") != std::string::npos;
}

double rounded_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x1000u) & 0xffffe000u;  // cvt.rna.tf32.f32: to nearest, ties away
  std::memcpy(&v, &u, 4);
  return v;
}

struct Case {
  std::vector<float> x, dy, dw0;
  std::vector<double> want;  // dw0 + the gradient on the rounded operands
};

Case make_case(const Conv2dGeometry& g, uint64_t seed, bool rounded = true) {
  Random rng(seed);
  Case c;
  c.x = random_values(rng, g.N * g.H * g.W * g.C);
  c.dy = random_values(rng, g.N * g.P() * g.Q() * g.K);
  c.dw0 = random_values(rng, g.K * g.R * g.S * (g.C / g.groups));
  auto read = [&](const std::vector<float>& v) {
    std::vector<double> d(v.size());
    for (size_t i = 0; i < v.size(); ++i) d[i] = rounded ? rounded_tf32(v[i]) : double(v[i]);
    return d;
  };
  const std::vector<double> x = read(c.x), dy = read(c.dy);
  c.want.assign(c.dw0.begin(), c.dw0.end());
  ref::conv2d_backward_filter_nhwc<double>(g, x.data(), dy.data(), c.want.data());
  return c;
}

// dw = dw0 + the pass of g in `math` with `kernels`, x and dy `shift_in` floats and dw and the
// workspace `shift_out` floats past 16-byte aligned starts; run twice, the repeat's bits checked.
std::vector<float> run_filter(Context& ctx, const Conv2dGeometry& g, const Case& c, GemmMath math,
                              TcKernels kernels, int shift_in = 0, int shift_out = 0) {
  auto shifted = [&](const std::vector<float>& v, int shift) {
    std::vector<float> more(v.size() + size_t(shift), 0.0f);
    std::copy(v.begin(), v.end(), more.begin() + shift);
    return upload(ctx, more);
  };
  Tensor x = shifted(c.x, shift_in), dy = shifted(c.dy, shift_in);
  Tensor dw = ctx.empty({int64_t(c.dw0.size()) + shift_out});
  float* ws = ctx.workspace(cuda::conv2d_backward_filter_nhwc_workspace(g) + size_t(shift_out) + 1);
  std::vector<float> first;
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<float> start(size_t(shift_out), 0.0f);
    start.insert(start.end(), c.dw0.begin(), c.dw0.end());
    gpu::copy(dw.data<float>(), start.data(), start.size() * 4, nullptr);
    cuda::conv2d_backward_filter_nhwc(g, x.data<float>() + shift_in, dy.data<float>() + shift_in,
                                      dw.data<float>() + shift_out, nullptr, ws + shift_out,
                                      ctx.stream(), math, kernels);
    ctx.synchronize();
    std::vector<float> out = dw.to_vector();
    out.erase(out.begin(), out.begin() + shift_out);
    if (repeat == 0) {
      first = out;
    } else {
      EXPECT_EQ(std::memcmp(first.data(), out.data(), out.size() * 4), 0)
          << describe(g) << ": the repeat differs";
    }
  }
  return first;
}

// g on the wgmma kernel (forced; where it runs asserted) and on mma.sync forced, both against the
// rounded reading; `best` takes wgmma exactly where wgmma_backward_filter_pays says so.
void check(Context& ctx, const Conv2dGeometry& g, uint64_t seed) {
  SCOPED_TRACE(describe(g));
  const bool hopper = on_hopper(), pays = cuda::tc::wgmma_backward_filter_pays(g);
  EXPECT_EQ(cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, GemmMath::tf32, TcKernels::wgmma),
            hopper);
  EXPECT_EQ(cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, GemmMath::tf32), hopper && pays);
  EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_filter, g, DType::f32, GemmMath::tf32),
               hopper && pays ? "tc_wgmma" : "nhwc_implicit_gemm");
  EXPECT_FALSE(cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, GemmMath::fp32, TcKernels::wgmma));
  const Case c = make_case(g, seed);
  expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::wgmma), c.want, "wgmma forced");
  expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::mma_sync), c.want,
               "mma_sync forced");
}

TEST(ConvolutionTf32WgmmaFilterCuda, TilesAndReads) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {3, 64, 56, 56, 64, 3, 3, 1, 1},              // taps paired, 9 of them: the last alone
      {2, 128, 28, 28, 128, 3, 3, 1, 1},            // rows from dy, 128 columns
      {2, 256, 14, 14, 36, 3, 3, 1, 1},             // rows from x (two tiles), K = 36
      {1, 36, 14, 14, 100, 1, 1},                   // a plain 1x1, K = 100: 4 of 32 in a box
      {3, 100, 14, 14, 36, 1, 1, 0, 0, 2, 2},       // a strided 1x1 (im2col), N odd
      {2, 4, 28, 28, 64, 3, 3, 1, 1},               // C = 4: one box of B, 4 channels real
      {4, 100, 14, 14, 36, 3, 3, 1, 1, 2, 2},       // 3x3 at stride 2
      {1, 36, 20, 20, 40, 3, 3, 2, 2, 1, 1, 2, 2},  // dilation 2
      {2, 32, 24, 24, 32, 5, 5, 2, 2},              // 5x5, 32 channels each side
      {1, 64, 9, 7, 128, 3, 3, 1, 1},               // paired, 63 positions: one partial slab
  };
  uint64_t seed = 9100;
  for (const Conv2dGeometry& g : shapes) check(ctx, g, seed += 13);
}

// Cuts with more than one slice: clusters of several blocks (the sums through distributed
// shared memory) and more than one group (partials in the workspace, then their sum), dw and the
// workspace 4-byte aligned only (scalar accesses), on both forms of the kernel: 64-column tiles
// (the ring kernel, transposing in place) and 128-column ones (the transposers' kernel).
TEST(ConvolutionTf32WgmmaFilterCuda, SlicesInClustersAndGroups) {
  CREMA_REQUIRE_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      {1, 96, 128, 128, 64, 3, 3, 1, 1},  // rows from x, 64 columns
      {1, 32, 128, 128, 64, 3, 3, 1, 1},  // rows from dy, 32 of 64 columns
      {1, 64, 128, 128, 64, 1, 1},        // a plain 1x1
      {1, 64, 128, 128, 64, 3, 3, 1, 1},  // taps paired: clusters of one block
      {1, 128, 96, 96, 128, 3, 3, 1, 1},  // 128 columns
      {1, 256, 64, 64, 96, 3, 3, 1, 1},   // rows from x, 96 of 128 columns
      {1, 128, 128, 128, 256, 1, 1},      // a plain 1x1 at 128 columns
  };
  bool clustered[2] = {false, false}, grouped[2] = {false, false};
  uint64_t seed = 9300;
  for (const Conv2dGeometry& g : shapes) {
    SCOPED_TRACE(describe(g));
    ASSERT_TRUE(cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, GemmMath::tf32, TcKernels::wgmma));
    // The tile's columns: the tensor with fewer channels (x's with taps paired).
    const bool paired = cuda::tc::wgmma_backward_filter_pairs_taps(g);
    const int64_t columns = paired ? g.K : std::min(g.C, g.K);
    const int wide = columns > 64 ? 1 : 0;
    clustered[wide] |= cuda::tc::wgmma_backward_filter_cluster(g, true) > 1;
    grouped[wide] |= cuda::tc::wgmma_backward_filter_workspace(g, true) > 0;
    const Case c = make_case(g, seed += 13);
    expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::wgmma), c.want, "aligned");
    expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::wgmma, 0, 1), c.want,
                 "dw and workspace 4-byte aligned");
  }
  for (int wide = 0; wide < 2; ++wide) {
    const char* form = wide ? "128 columns" : "64 columns";
    EXPECT_TRUE(clustered[wide]) << form << ": no cut summed in clusters of several blocks";
    EXPECT_TRUE(grouped[wide]) << form << ": no cut with several groups";
  }
}

// Not on the kernel: C or K not a multiple of 4, groups 2, x and dy misaligned (the mma.sync
// kernels, rounded reading); fp32 math (the exact FFMA kernels, unrounded reading).
TEST(ConvolutionTf32WgmmaFilterCuda, ShapesThatFallBack) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry shapes[] = {
      {2, 6, 28, 28, 12, 3, 3, 1, 1},                // C not a multiple of 4
      {2, 8, 28, 28, 6, 1, 1},                       // K not a multiple of 4
      {2, 8, 28, 28, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2
  };
  uint64_t seed = 9500;
  for (const Conv2dGeometry& g : shapes) {
    SCOPED_TRACE(describe(g));
    EXPECT_FALSE(cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, GemmMath::tf32));
    const Case c = make_case(g, seed += 13);
    expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::best), c.want, "tf32");
  }
  const Conv2dGeometry g{2, 36, 14, 14, 36, 3, 3, 1, 1};
  const Case c = make_case(g, 9700);
  expect_close(run_filter(ctx, g, c, GemmMath::tf32, TcKernels::best, 1), c.want,
               describe(g) + " x, dy misaligned");
  const Case exact = make_case(g, 9700, false);
  expect_close(run_filter(ctx, g, exact, GemmMath::fp32, TcKernels::best), exact.want,
               describe(g) + " fp32 math");
}

}  // namespace
}  // namespace crema::kernels::conv_test
