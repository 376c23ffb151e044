// Backward data with few channels on the CUDA cores (convolution_few_channels_nhwc.h), on bf16 and
// fp16 tensors (conv2d_tc_backward_data) and f32 tensors in both maths (conv2d_backward_data_nhwc),
// against the double reference on the operands as stored: the 7x7 stride-2 stem (C = 3, odd
// sizes), LeNet's 5x5 (C = 20, K = 50: k chunks with a short last one), C = 1 with a 5x20 speech
// filter at stride 2, C = 31, stride 3 and 4 (phases that no tap reaches: zeros), strides (2, 1),
// 8 taps a column, a 1x1, planes of several tiles, outputs that read only padding, N = 1, and
// misaligned pointers. dx is poisoned first and every element is checked; repeats are
// bit-identical; every geometry must fit the kernel (a silent fallback fails), and `best` must
// pick it where its rule says.
//
// Tolerance per element: the kernel sums R*S*K products in fp32 by fused multiply-adds (a 16-bit
// product is exact in fp32; an FMA rounds once), so |got - want| <= 2^-m |want| + (1 + 2^-m) n
// 2^-24 sum|terms| with n = R*S*K and m = 8 (bf16), 11 (fp16) for the one rounding at the store,
// no m term for f32.
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
#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "kernels/convolution/convolution_tc.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;
using cuda::TcKernels;
using cuda::TcType;

enum class Kind { bf16, f16, f32 };

const char* name_of(Kind kind) {
  return kind == Kind::bf16 ? "bf16" : kind == Kind::f16 ? "f16" : "f32";
}

struct Problem {
  Conv2dGeometry g;
  Kind kind;
  std::vector<float> dy, w;  // the values as stored
  std::vector<uint16_t> dy16, w16;
  std::vector<double> dx, bound;
};

Problem make(const Conv2dGeometry& g, Kind kind, uint64_t seed) {
  Random rng(seed);
  Problem p;
  p.g = g;
  p.kind = kind;
  auto draw = [&](int64_t n, std::vector<float>& values, std::vector<uint16_t>& bits) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = float(rng.uniform(-1.0, 1.0));
      if (kind == Kind::bf16) {
        bits.push_back(f32_to_bf16_bits(v));
        values.push_back(bf16_to_f32(bits.back()));
      } else if (kind == Kind::f16) {
        bits.push_back(f32_to_f16_bits(v));
        values.push_back(f16_to_f32(bits.back()));
      } else {
        values.push_back(v);
      }
    }
  };
  draw(g.N * g.P() * g.Q() * g.K, p.dy, p.dy16);
  draw(g.K * g.R * g.S * g.C, p.w, p.w16);
  auto widen = [](const std::vector<float>& v, bool magnitude) {
    std::vector<double> d;
    for (float f : v) d.push_back(magnitude ? std::fabs(double(f)) : double(f));
    return d;
  };
  const int64_t xs = g.N * g.H * g.W * g.C;
  std::vector<double> magnitude(size_t(xs), 0.0);
  p.dx.assign(size_t(xs), 0.0);
  ref::conv2d_backward_data_nhwc<double>(g, widen(p.dy, false).data(), widen(p.w, false).data(),
                                         p.dx.data());
  ref::conv2d_backward_data_nhwc<double>(g, widen(p.dy, true).data(), widen(p.w, true).data(),
                                         magnitude.data());
  const double r = kind == Kind::bf16  ? std::ldexp(1.0, -8)
                   : kind == Kind::f16 ? std::ldexp(1.0, -11)
                                       : 0.0;
  const double n = double(g.R * g.S * g.K);
  for (int64_t i = 0; i < xs; ++i) {
    p.bound.push_back(r * std::fabs(p.dx[size_t(i)]) +
                      (1.0 + r) * n * std::ldexp(1.0, -24) * magnitude[size_t(i)]);
  }
  return p;
}

// Device bytes as a float tensor (16-byte aligned), `offset` bytes in.
struct Bytes {
  Tensor t;
  Bytes(Context& ctx, size_t bytes) : t(ctx.empty({int64_t(bytes / 4 + 8)})) {}
  char* at(size_t offset) { return reinterpret_cast<char*>(t.data<float>()) + offset; }
};

// Backward data with `kernels` (f32: in `math`), dy and dx `offset` bytes off 16-byte alignment;
// twice: the repeat must be bit-identical.
void check(Context& ctx, const Problem& p, TcKernels kernels, size_t offset,
           GemmMath math = GemmMath::fp32) {
  const Conv2dGeometry& g = p.g;
  const bool f32 = p.kind == Kind::f32;
  const size_t bytes = f32 ? 4 : 2, xs = p.dx.size();
  Bytes dy(ctx, p.dy.size() * bytes + 16), w(ctx, p.w.size() * bytes), dx(ctx, xs * bytes + 16);
  // The direct kernel takes none; the implicit GEMMs it is compared with do.
  Bytes work(ctx, f32 ? cuda::conv2d_backward_data_nhwc_workspace(g) * 4
                      : cuda::conv2d_tc_backward_data_workspace(g, TcType::bf16));
  const void* dy_host = f32 ? static_cast<const void*>(p.dy.data()) : p.dy16.data();
  const void* w_host = f32 ? static_cast<const void*>(p.w.data()) : p.w16.data();
  gpu::copy(dy.at(offset), dy_host, p.dy.size() * bytes, nullptr);
  gpu::copy(w.at(0), w_host, p.w.size() * bytes, nullptr);
  const std::string what = describe(g) + " " + name_of(p.kind) +
                           (offset ? " misaligned by " + std::to_string(offset) : "");
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    const std::vector<uint8_t> poison(xs * bytes, 0xff);  // NaN in every type
    gpu::copy(dx.at(offset), poison.data(), poison.size(), nullptr);
    if (f32) {
      cuda::conv2d_backward_data_nhwc(
          g, reinterpret_cast<const float*>(dy.at(offset)), reinterpret_cast<const float*>(w.at(0)),
          reinterpret_cast<float*>(dx.at(offset)), reinterpret_cast<float*>(work.at(0)),
          ctx.stream(), math, kernels);
    } else {
      cuda::conv2d_tc_backward_data(g, p.kind == Kind::bf16 ? TcType::bf16 : TcType::f16,
                                    dy.at(offset), w.at(0), dx.at(offset), work.at(0), ctx.stream(),
                                    kernels);
    }
    std::vector<uint8_t> got(xs * bytes);
    gpu::copy(got.data(), dx.at(offset), got.size(), ctx.stream());
    ctx.synchronize();
    if (run == 1) {
      EXPECT_TRUE(got == first) << what << ": a repeat differs";
      break;
    }
    int64_t bad = 0, at = -1;
    double value = 0.0;
    for (size_t i = 0; i < xs; ++i) {
      uint16_t half = 0;
      float single = 0.0f;
      if (f32) {
        std::memcpy(&single, got.data() + 4 * i, 4);
      } else {
        std::memcpy(&half, got.data() + 2 * i, 2);
      }
      const double v = f32                    ? double(single)
                       : p.kind == Kind::bf16 ? double(bf16_to_f32(half))
                                              : double(f16_to_f32(half));
      if (std::fabs(v - p.dx[i]) <= p.bound[i]) continue;  // NaN fails here
      if (at < 0) at = int64_t(i), value = v;
      ++bad;
    }
    EXPECT_EQ(bad, 0) << what << ": first " << at << ": got " << value << ", want "
                      << (at < 0 ? 0.0 : p.dx[size_t(at)]) << " +- "
                      << (at < 0 ? 0.0 : p.bound[size_t(at)]);
    first = got;
  }
}

const std::vector<Conv2dGeometry> kGeometries = {
    // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
    {2, 3, 29, 31, 16, 7, 7, 3, 3, 2, 2},    // the stem, odd sizes
    {3, 20, 12, 12, 50, 5, 5},               // LeNet's conv2: K = 50, chunks of 8 and a short one
    {1, 1, 20, 40, 8, 5, 20, 2, 9, 2, 2},    // C = 1, a 5x20 speech filter, N = 1
    {2, 31, 9, 10, 19, 3, 3, 1, 1},          // C = 31 (8 groups, the last of 3), K odd
    {2, 13, 16, 11, 64, 3, 3, 1, 1, 3, 3},   // stride 3
    {2, 3, 17, 17, 16, 3, 3, 1, 1, 4, 4},    // stride 4: phases no tap reaches
    {2, 7, 15, 14, 12, 5, 3, 2, 1, 2, 1},    // strides (2, 1)
    {1, 4, 12, 10, 7, 8, 8, 3, 4},           // 8 taps a column (NR = 8)
    {1, 1, 41, 30, 8, 41, 11, 20, 5, 2, 2},  // DeepSpeech2's 41x11 s2: 21 taps (NR = 24)
    {2, 6, 7, 5, 10, 1, 1},                  // 1x1
    {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},       // outputs that read only padding
    {2, 5, 70, 75, 24, 3, 3, 1, 1},          // a plane of 2 x 3 tiles
    {1, 3, 230, 226, 20, 7, 7, 3, 3, 2, 2},  // the stem's plane, tiles of 28 columns
};

bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

// Each geometry through the kernel (forced), through `best` (whichever family it picks, which
// must be the kernel where few_channels_direct_pays says so: channels not a whole 16-byte
// vector, more than 8 of them going to col2im where that runs -- bf16 with 25 taps or more on
// Hopper, f32 in tf32), with dy and dx misaligned, and through mma.sync (the family it replaces,
// still right). f32: in fp32 math (tf32 and bf16 round the operands first: the math tests'
// references, tests/kernels/convolution_nhwc_cuda_test.cpp).
TEST(ConvolutionFewChannelsNhwcCuda, Bf16AndF16AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 140;
  for (const Conv2dGeometry& g : kGeometries) {
    ASSERT_TRUE(cuda::few_channels_nhwc::fits(g)) << describe(g);
    // best: direct for at most 8 channels, or more from a K that is not a multiple of 8 where
    // col2im (bf16, Hopper, 25 taps or more, <= 8 channels or K % 8 != 0) does not run; else the
    // implicit GEMM (C % 8 != 0: mma.sync).
    const bool col2im = hopper() && g.R * g.S >= 25 && (g.C <= 8 || g.K % 8 != 0);
    const bool direct16 = g.C <= 8 || g.K % 8 != 0, direct_bf16 = g.C <= 8 || (direct16 && !col2im);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_direct(g, TcType::bf16), direct_bf16)
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_direct(g, TcType::f16), direct16) << describe(g);
    EXPECT_EQ(std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::bf16)),
              direct_bf16 ? "direct_few_channels"
              : col2im    ? "col2im_gemm"
                          : "tc_implicit_gemm")
        << describe(g);
    for (Kind kind : {Kind::bf16, Kind::f16}) {
      const Problem p = make(g, kind, seed += 7);
      check(ctx, p, TcKernels::direct, 0);
      check(ctx, p, TcKernels::direct, 2);  // misaligned dy and dx: element loads and stores
      check(ctx, p, TcKernels::best, 0);
      check(ctx, p, TcKernels::mma_sync, 0);
    }
  }
}

TEST(ConvolutionFewChannelsNhwcCuda, F32AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 240;
  for (const Conv2dGeometry& g : kGeometries) {
    // In 4-float vectors; col2im runs in tf32 only, wherever C % 4 != 0 (C > 1).
    const bool few = g.C % 4 != 0, col2im = few && g.C > 1;
    const bool fp32 = few && (g.C <= 8 || g.K % 4 != 0);
    const bool tf32 = few && (g.C <= 8 || (g.K % 4 != 0 && !col2im));
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_direct(g, GemmMath::fp32), fp32) << describe(g);
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_direct(g, GemmMath::tf32), tf32) << describe(g);
    if (few) {
      EXPECT_EQ(
          std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f32, GemmMath::tf32)),
          tf32 ? "direct_few_channels" : "col2im_gemm")
          << describe(g);
    }
    const Problem p = make(g, Kind::f32, seed += 7);
    check(ctx, p, TcKernels::direct, 0, GemmMath::fp32);
    check(ctx, p, TcKernels::direct, 4, GemmMath::fp32);
    check(ctx, p, TcKernels::best, 0, GemmMath::fp32);
  }
}

// What the kernel does not take, and what `best` leaves to the implicit GEMMs.
TEST(ConvolutionFewChannelsNhwcCuda, Fits) {
  using cuda::few_channels_nhwc::fits;
  EXPECT_FALSE(fits({2, 5, 9, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2}));     // dilation 2
  EXPECT_FALSE(fits({2, 6, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}));  // groups 2
  EXPECT_FALSE(fits({2, 32, 9, 9, 16, 3, 3, 1, 1}));                // C = 32
  EXPECT_FALSE(fits({1, 3, 30, 30, 16, 25, 3, 12, 1}));             // 25 taps a column
  EXPECT_TRUE(fits({1, 3, 30, 30, 16, 25, 3, 12, 1, 2, 1}));        // 13 at stride 2
  const Conv2dGeometry sixteen{2, 16, 9, 9, 16, 3, 3, 1, 1};        // fits, but C % 8 == 0:
  EXPECT_TRUE(fits(sixteen));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_direct(sixteen, TcType::bf16));
  EXPECT_FALSE(cuda::conv2d_backward_data_nhwc_uses_direct(sixteen, GemmMath::fp32));
  EXPECT_FALSE(
      cuda::conv2d_backward_data_nhwc_uses_direct({2, 12, 9, 9, 16, 3, 3, 1, 1}, GemmMath::fp32))
      << "12 floats: three 16-byte vectors";
  EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_direct(sixteen, TcType::bf16, TcKernels::direct));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_direct({2, 4, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},
                                                         TcType::bf16, TcKernels::direct))
      << "depthwise";
}

}  // namespace
}  // namespace crema::kernels::conv_test
