// Backward data with few channels as one GEMM and a gather (convolution_col2im_nhwc.h), on bf16
// tensors (conv2d_tc_backward_data) and f32 tensors in tf32 (conv2d_backward_data_nhwc), against
// the double reference on the operands as the tensor cores read them: the 7x7 stride-2 stem
// (C = 3), LeNet's 5x5 (C = 20, K = 50: gemm_bf16 copies both operands), dilation, stride 3, a
// 1x1, N = 1, odd sizes, outputs that read only padding, cols in several chunks (whole images of
// 24.9 MB against the 64 MiB budget: chunks of 2, 2, 1). dx is poisoned first; repeats are
// bit-identical; on an H100 or H200 each geometry must take the col2im kernels when asked for
// them (a silent fallback fails) and under `best` where the direct few-channel kernel
// (convolution_few_channels_nhwc.h, tested on its own) does not take it, and a misaligned dy
// falls back to mma.sync (still right).
//
// Tolerance per element: fp32 sums of exact products (bf16 x bf16 and tf32 x tf32 are exact in
// fp32) -- col2im's GEMM sums K of them, then its gather at most R*S of those; mma.sync sums all
// R*S*K at once -- |got - want| <= 2^-m |want| + (1 + 2^-m) n 2^-24 sum|terms| with n = R*S*K +
// R*S, which bounds both; m = 8 for bf16's one rounding at the store, none (m = 0) for f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;
using cuda::TcKernels;
using cuda::TcType;

bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

float from_bits(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// bf16 round to nearest even; tf32 as cvt.rna (nearest, ties away), both as the hardware does.
uint16_t bf16_bits(float v) {
  const uint32_t u = bits_of(v);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float tf32(float v) {
  return from_bits((bits_of(v) + 0x1000u) & 0xffffe000u);
}

struct Problem {
  Conv2dGeometry g;
  std::vector<float> dy, w;  // as stored (f32) -- for bf16, the values the bits hold
  std::vector<uint16_t> dy16, w16;
  std::vector<double> dx, bound;
};

Problem make(const Conv2dGeometry& g, bool sixteen, uint64_t seed) {
  Random rng(seed);
  Problem p;
  p.g = g;
  auto draw = [&](int64_t n, std::vector<float>& values, std::vector<uint16_t>& bits) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = float(rng.uniform(-1.0, 1.0));
      if (sixteen) {
        bits.push_back(bf16_bits(v));
        values.push_back(from_bits(uint32_t(bits.back()) << 16));
      } else {
        values.push_back(v);
      }
    }
  };
  draw(g.N * g.P() * g.Q() * g.K, p.dy, p.dy16);
  draw(g.K * g.R * g.S * g.C, p.w, p.w16);
  auto read = [&](const std::vector<float>& v, bool magnitude) {
    std::vector<double> d;
    for (float f : v)
      d.push_back(magnitude ? std::fabs(double(sixteen ? f : tf32(f)))
                            : double(sixteen ? f : tf32(f)));
    return d;
  };
  const int64_t xs = g.N * g.H * g.W * g.C;
  std::vector<double> magnitude(size_t(xs), 0.0);
  p.dx.assign(size_t(xs), 0.0);
  ref::conv2d_backward_data_nhwc<double>(g, read(p.dy, false).data(), read(p.w, false).data(),
                                         p.dx.data());
  ref::conv2d_backward_data_nhwc<double>(g, read(p.dy, true).data(), read(p.w, true).data(),
                                         magnitude.data());
  const double r = sixteen ? std::ldexp(1.0, -8) : 0.0, n = double((g.K + 1) * g.R * g.S);
  for (int64_t i = 0; i < xs; ++i) {
    p.bound.push_back(r * std::fabs(p.dx[size_t(i)]) +
                      (1.0 + r) * n * std::ldexp(1.0, -24) * magnitude[size_t(i)]);
  }
  return p;
}

void expect_within(const std::string& what, const std::vector<double>& got, const Problem& p) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - p.dx[i]) <= p.bound[i]) continue;  // NaN fails here
    if (first < 0) first = int64_t(i);
    ++bad;
  }
  if (bad == 0) return;
  ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements off; first " << first
                << ": got " << got[size_t(first)] << ", want " << p.dx[size_t(first)] << " +- "
                << p.bound[size_t(first)];
}

// Device bytes as a float tensor (16-byte aligned), `offset` bytes in.
struct Bytes {
  Tensor t;
  Bytes(Context& ctx, size_t bytes) : t(ctx.empty({int64_t(bytes / 4 + 8)})) {}
  char* at(size_t offset) { return reinterpret_cast<char*>(t.data<float>()) + offset; }
};

// bf16: backward data with `kernels`, dy `offset` bytes off alignment; twice (repeats equal).
void check_bf16(Context& ctx, const Problem& p, TcKernels kernels, size_t offset) {
  const Conv2dGeometry& g = p.g;
  const size_t xs = p.dx.size();
  Bytes dy(ctx, p.dy16.size() * 2), w(ctx, p.w16.size() * 2), dx(ctx, xs * 2),
      work(ctx, cuda::conv2d_tc_backward_data_workspace(g, TcType::bf16));
  gpu::copy(dy.at(offset), p.dy16.data(), p.dy16.size() * 2, nullptr);
  gpu::copy(w.at(0), p.w16.data(), p.w16.size() * 2, nullptr);
  const std::string what = describe(g) + " bf16" + (offset ? " misaligned dy" : "");
  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    const std::vector<uint16_t> nan(xs, 0x7fc0);
    gpu::copy(dx.at(0), nan.data(), xs * 2, nullptr);
    cuda::conv2d_tc_backward_data(g, TcType::bf16, dy.at(offset), w.at(0), dx.at(0), work.at(0),
                                  ctx.stream(), kernels);
    std::vector<uint16_t> got(xs);
    gpu::copy(got.data(), dx.at(0), xs * 2, ctx.stream());
    ctx.synchronize();
    if (run == 1) {
      EXPECT_EQ(got, first) << what << ": a repeat differs";
      break;
    }
    std::vector<double> widened;
    for (uint16_t b : got) widened.push_back(from_bits(uint32_t(b) << 16));
    expect_within(what, widened, p);
    first = got;
  }
}

void check_tf32(Context& ctx, const Problem& p, TcKernels kernels) {
  const Conv2dGeometry& g = p.g;
  const size_t xs = p.dx.size();
  Bytes dy(ctx, p.dy.size() * 4), w(ctx, p.w.size() * 4), dx(ctx, xs * 4),
      work(ctx, cuda::conv2d_backward_data_nhwc_workspace(g) * 4);
  gpu::copy(dy.at(0), p.dy.data(), p.dy.size() * 4, nullptr);
  gpu::copy(w.at(0), p.w.data(), p.w.size() * 4, nullptr);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    const std::vector<float> nan(xs, NAN);
    gpu::copy(dx.at(0), nan.data(), xs * 4, nullptr);
    cuda::conv2d_backward_data_nhwc(
        g, reinterpret_cast<const float*>(dy.at(0)), reinterpret_cast<const float*>(w.at(0)),
        reinterpret_cast<float*>(dx.at(0)), reinterpret_cast<float*>(work.at(0)), ctx.stream(),
        GemmMath::tf32, kernels);
    std::vector<float> got(xs);
    gpu::copy(got.data(), dx.at(0), xs * 4, ctx.stream());
    ctx.synchronize();
    if (run == 1) {
      EXPECT_EQ(got, first) << describe(g) << " tf32: a repeat differs";
      break;
    }
    expect_within(describe(g) + " tf32", std::vector<double>(got.begin(), got.end()), p);
    first = got;
  }
}

const std::vector<Conv2dGeometry> kGeometries = {
    // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
    {2, 3, 29, 31, 16, 7, 7, 3, 3, 2, 2},      // the stem, odd sizes
    {3, 20, 12, 12, 50, 5, 5},                 // LeNet's conv2: K = 50 (not a multiple of 8)
    {1, 5, 9, 7, 24, 3, 3, 2, 2, 1, 1, 2, 2},  // dilation 2, N = 1
    {2, 13, 16, 11, 64, 3, 3, 1, 1, 3, 3},     // stride 3
    {2, 6, 7, 5, 10, 1, 1},                    // 1x1, C = 6 (f32: 6 % 4 != 0)
    {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},         // outputs that read only padding
    {5, 31, 64, 64, 8, 7, 7, 3, 3},            // cols of 24.9 MB an image: 3 chunks
};

TEST(ConvolutionCol2imNhwcCuda, Bf16AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 40;
  for (const Conv2dGeometry& g : kGeometries) {
    // gemm_bf16 is wgmma's: col2im runs on compute capability 9.0 only; `best` takes it for
    // filters of 25 taps and more.
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_col2im(g, TcType::bf16, TcKernels::col2im),
              hopper())
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_col2im(g, TcType::bf16),
              hopper() && g.R * g.S >= 25 && (g.C <= 8 || g.K % 8 != 0) &&
                  !cuda::conv2d_tc_backward_data_uses_direct(g, TcType::bf16) &&
                  !cuda::conv2d_tc_backward_data_uses_direct_mma(g, TcType::bf16))
        << describe(g);
    EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_col2im(g, TcType::f16)) << describe(g);
    const Problem p = make(g, true, seed += 7);
    check_bf16(ctx, p, TcKernels::col2im, 0);
    check_bf16(ctx, p, TcKernels::best, 0);
    check_bf16(ctx, p, TcKernels::mma_sync, 0);  // the family it replaces, still right
    check_bf16(ctx, p, TcKernels::best, 2);      // misaligned dy: mma.sync's element path
  }
  // Channels a whole vector (8) or 32 and more: the implicit GEMM's, not these.
  EXPECT_FALSE(
      cuda::conv2d_tc_backward_data_uses_col2im({2, 8, 9, 9, 16, 3, 3, 1, 1}, TcType::bf16));
  EXPECT_FALSE(
      cuda::conv2d_tc_backward_data_uses_col2im({2, 33, 9, 9, 16, 3, 3, 1, 1}, TcType::bf16));
}

TEST(ConvolutionCol2imNhwcCuda, Tf32AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 80;
  for (const Conv2dGeometry& g : kGeometries) {
    const bool fits = g.C % 4 != 0,
               direct = cuda::conv2d_backward_data_nhwc_uses_direct(g, GemmMath::tf32),
               mma = cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, GemmMath::tf32);
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_col2im(g, GemmMath::tf32, TcKernels::col2im),
              fits)
        << describe(g);
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_col2im(g, GemmMath::tf32),
              fits && !direct && !mma)
        << describe(g);
    EXPECT_FALSE(cuda::conv2d_backward_data_nhwc_uses_col2im(g, GemmMath::fp32)) << describe(g);
    EXPECT_EQ(
        std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f32, GemmMath::tf32)),
        mma      ? "direct_mma_few_channels"
        : direct ? "direct_few_channels"
        : fits   ? "col2im_gemm"
                 : "nhwc_implicit_gemm")
        << describe(g);
    const Problem p = make(g, false, seed += 7);
    check_tf32(ctx, p, TcKernels::col2im);
    // The direct kernel multiplies the f32 operands unrounded: its own test's reference.
    if (!direct) check_tf32(ctx, p, TcKernels::best);
    check_tf32(ctx, p, TcKernels::mma_sync);
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
