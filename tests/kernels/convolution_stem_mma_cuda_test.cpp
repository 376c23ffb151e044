// The forward with few input channels on mma.sync (convolution_stem_mma.h), bf16 and fp16 tensors
// (conv2d_tc_forward), against the double reference on the values as stored: ResNet's 7x7 stride-2
// stem on odd sizes, a 3x3 VGG stem (stride 1: pixels of odd offsets), MobileNet's 3x3 stride 2
// onto 32 channels, one channel (a pair of one real and one zero), 4, 5 and 8 channels, K = 8
// (one n-tile) and 40 (an odd number of them), strides (2, 1), padding wider than the filter's
// reach, N = 1 with bands of one output row, rows longer than a block's warps cover; with bias,
// ReLU and a residual; x and w misaligned (the kernel reads them element by element). y is
// poisoned first and every element checked; repeats are bit-identical; every geometry must fit
// (a silent fallback fails), and `best` must pick the kernel.
//
// Bound per element: R*S*C exact products (16-bit values: exact in fp32) summed in fp32 by the
// tensor cores, plus the bias and the residual, then one rounding: |got - want| <= 2^-m |want| +
// (1 + 2^-m) (n + 2) 2^-24 (sum|terms| + |bias| + |residual|), n = R*S*C, m = 8 (bf16), 11 (fp16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::TcEpilogue;
using cuda::TcKernels;
using cuda::TcType;

struct Values {
  std::vector<float> v;  // as stored
  std::vector<uint16_t> bits;
};

Values draw(Random& rng, int64_t n, TcType type, double scale = 1.0) {
  Values out;
  for (int64_t i = 0; i < n; ++i) {
    const float f = float(rng.uniform(-scale, scale));
    out.bits.push_back(type == TcType::bf16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f));
    out.v.push_back(type == TcType::bf16 ? bf16_to_f32(out.bits.back())
                                         : f16_to_f32(out.bits.back()));
  }
  return out;
}

float widen(uint16_t bits, TcType type) {
  return type == TcType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// Device bytes as a float tensor, `offset` bytes in.
struct Bytes {
  Tensor t;
  Bytes(Context& ctx, size_t bytes) : t(ctx.empty({int64_t(bytes / 4 + 8)})) {}
  char* at(size_t offset) { return reinterpret_cast<char*>(t.data<float>()) + offset; }
};

// The forward of g with `kernels`, an epilogue (bias, ReLU, residual) when `epilogue`, x and w
// `offset` bytes off alignment; twice, the repeat bit-identical.
void check(Context& ctx, const Conv2dGeometry& g, TcType type, TcKernels kernels, bool epilogue,
           size_t offset, uint64_t seed) {
  Random rng(seed);
  const int64_t xs = g.N * g.H * g.W * g.C, ws = g.K * g.R * g.S * g.C;
  const int64_t ys = g.N * g.P() * g.Q() * g.K;
  const Values x = draw(rng, xs, type), w = draw(rng, ws, type), res = draw(rng, ys, type);
  std::vector<float> bias;
  for (int64_t k = 0; k < g.K; ++k) bias.push_back(float(rng.uniform(-1.0, 1.0)));
  std::vector<double> xd(x.v.begin(), x.v.end()), wd(w.v.begin(), w.v.end());
  std::vector<double> xm, wm;
  std::vector<double> want(static_cast<size_t>(ys)), magnitude(static_cast<size_t>(ys));
  for (double v : xd) xm.push_back(std::fabs(v));
  for (double v : wd) wm.push_back(std::fabs(v));
  ref::conv2d_forward_nhwc<double>(g, xd.data(), wd.data(), nullptr, want.data());
  ref::conv2d_forward_nhwc<double>(g, xm.data(), wm.data(), nullptr, magnitude.data());
  const double m = type == TcType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double n = double(g.R * g.S * g.C + 2);
  std::vector<double> bound(static_cast<size_t>(ys));
  for (int64_t i = 0; i < ys; ++i) {
    double extra = 0.0;
    if (epilogue) {
      const int64_t k = i % g.K;
      want[size_t(i)] += double(bias[size_t(k)]) + double(res.v[size_t(i)]);
      extra = std::fabs(double(bias[size_t(k)])) + std::fabs(double(res.v[size_t(i)]));
    }
    bound[size_t(i)] =
        (1.0 + m) * n * std::ldexp(1.0, -24) * (magnitude[size_t(i)] + extra);  // before ReLU
    if (epilogue) want[size_t(i)] = std::max(want[size_t(i)], 0.0);
    bound[size_t(i)] += m * std::fabs(want[size_t(i)]);
  }
  Bytes dx(ctx, size_t(xs) * 2 + 16), dw(ctx, size_t(ws) * 2 + 16), dy(ctx, size_t(ys) * 2);
  Bytes dres(ctx, size_t(ys) * 2), dbias(ctx, size_t(g.K) * 4);
  gpu::copy(dx.at(offset), x.bits.data(), size_t(xs) * 2, nullptr);
  gpu::copy(dw.at(offset), w.bits.data(), size_t(ws) * 2, nullptr);
  gpu::copy(dres.at(0), res.bits.data(), size_t(ys) * 2, nullptr);
  gpu::copy(dbias.at(0), bias.data(), size_t(g.K) * 4, nullptr);
  TcEpilogue ep;
  if (epilogue) {
    ep.bias = reinterpret_cast<const float*>(dbias.at(0));
    ep.residual = dres.at(0);
    ep.relu = true;
  }
  const std::string what = describe(g) + (type == TcType::bf16 ? " bf16" : " f16") +
                           (epilogue ? " bias+residual+relu" : "") +
                           (offset ? " misaligned x, w" : "");
  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    const std::vector<uint16_t> poison(static_cast<size_t>(ys), 0xffff);  // NaN in both types
    gpu::copy(dy.at(0), poison.data(), size_t(ys) * 2, nullptr);
    cuda::conv2d_tc_forward(g, type, dx.at(offset), dw.at(offset), dy.at(0), ep, nullptr,
                            ctx.stream(), kernels);
    std::vector<uint16_t> got(static_cast<size_t>(ys));
    gpu::copy(got.data(), dy.at(0), size_t(ys) * 2, ctx.stream());
    ctx.synchronize();
    if (run == 1) {
      EXPECT_TRUE(got == first) << what << ": a repeat differs";
      break;
    }
    int64_t bad = 0, at = -1;
    for (int64_t i = 0; i < ys; ++i) {
      const double v = widen(got[size_t(i)], type);
      if (std::fabs(v - want[size_t(i)]) <= bound[size_t(i)]) continue;  // NaN fails here
      if (at < 0) at = i;
      ++bad;
    }
    EXPECT_EQ(bad, 0) << what << ": first bad " << at << ": got "
                      << (at < 0 ? 0.0 : widen(got[size_t(at)], type)) << ", want "
                      << (at < 0 ? 0.0 : want[size_t(at)]);
    first = got;
  }
}

const std::vector<Conv2dGeometry> kGeometries = {
    // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
    {2, 3, 29, 31, 64, 7, 7, 3, 3, 2, 2},    // ResNet's stem, odd sizes
    {2, 3, 17, 19, 64, 3, 3, 1, 1},          // VGG's: stride 1, odd pixel offsets
    {2, 3, 33, 35, 32, 3, 3, 1, 1, 2, 2},    // MobileNet's onto 32
    {1, 1, 20, 22, 8, 5, 5, 2, 2},           // one channel: pairs of one, K = 8
    {2, 4, 15, 13, 40, 3, 3, 1, 1},          // 4 channels, 5 n-tiles
    {1, 5, 11, 12, 16, 3, 5, 1, 2, 2, 1},    // 5 channels, strides (2, 1), a 3x5 filter
    {2, 8, 9, 9, 24, 3, 3, 4, 4},            // 8 channels; padding past the reach
    {1, 3, 230, 226, 64, 7, 7, 3, 3, 2, 2},  // bands of one row for N = 1
    {1, 3, 6, 600, 16, 3, 3, 1, 1},          // 600 pixels a row: more m-tiles than warps
};

TEST(ConvolutionStemMmaCuda, AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 540;
  for (const Conv2dGeometry& g : kGeometries) {
    ASSERT_TRUE(cuda::stem_mma::fits(g)) << describe(g);
    EXPECT_TRUE(cuda::conv2d_tc_forward_uses_stem(g)) << describe(g);
    EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::forward, g, DType::bf16), "stem_mma") << describe(g);
    for (TcType type : {TcType::bf16, TcType::f16}) {
      check(ctx, g, type, TcKernels::stem_mma, false, 0, seed += 7);
      check(ctx, g, type, TcKernels::stem_mma, true, 2, seed += 7);
      check(ctx, g, type, TcKernels::best, true, 0, seed += 7);
    }
  }
}

// What the kernel does not take.
TEST(ConvolutionStemMmaCuda, Fits) {
  using cuda::stem_mma::fits;
  EXPECT_FALSE(fits({2, 9, 9, 9, 16, 3, 3, 1, 1}));                 // 9 channels
  EXPECT_FALSE(fits({2, 3, 9, 9, 12, 3, 3, 1, 1}));                 // K not a multiple of 8
  EXPECT_FALSE(fits({2, 3, 9, 9, 72, 3, 3, 1, 1}));                 // K above 64
  EXPECT_FALSE(fits({2, 3, 9, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2}));     // dilation 2
  EXPECT_FALSE(fits({2, 4, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}));  // groups 2
  EXPECT_FALSE(fits({2, 3, 99, 99, 64, 11, 11, 2, 2, 4, 4}));       // 11 x 11 x 4: 484 > 256
  EXPECT_FALSE(fits({2, 1, 9, 9, 16, 3, 3, 1, 1}));                 // S * C2 = 6 < 8
  EXPECT_TRUE(fits({2, 1, 9, 9, 16, 3, 4, 1, 1}));                  // 8
}

}  // namespace
}  // namespace crema::kernels::conv_test
