// CUDA NHWC convolution: the raw conv2d_*_nhwc passes in fp32, tf32 and bf16 against the double
// reference (ref::*_nhwc) on awkward geometries (N = 1, odd H and W, C = 3, 4, 6, 12, 36, 132,
// stride 2, pads 0/1/2, dilation 2, groups 2, more output channels than a tile, a filter gradient
// cut into many slices); outputs poisoned with NaN, dw and db accumulated onto random values. In
// tf32 and bf16 the reference runs on the operands rounded as the tensor cores round them
// (products of rounded operands are exact in fp32), so every math is held to 1e-5; where a tf32
// pass runs on the wgmma kernels (Hopper, conv2d_nhwc_kernel "tc_wgmma") on the operands
// truncated to TF32, as wgmma reads them (convolution_tf32_wgmma_cuda_test.cpp). Then the 4-byte
// path on misaligned pointers, bit-identical repeats, and v9 (nhwc_implicit_gemm) through the NCHW
// entry points and the Tensor-level dispatch.
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
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;

// What the tensor cores see of an fp32 operand: TF32 (cvt.rna: to nearest, ties away from zero,
// 10 mantissa bits; `truncated`: the top 19 bits, as wgmma reads fp32 words) or bf16 (cvt.rn: to
// nearest even, 7 mantissa bits).
float rounded(float v, GemmMath math, bool truncated = false) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (math == GemmMath::tf32) u = truncated ? u & 0xffffe000u : (u + 0x1000u) & 0xffffe000u;
  if (math == GemmMath::bf16) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

std::vector<double> as_double(const std::vector<float>& v, GemmMath math, bool truncated = false) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = rounded(v[i], math, truncated);
  return d;
}

// NHWC inputs and what each pass must produce from their rounded values (forward and data: from
// their truncated values where the pass runs on wgmma in tf32).
struct NhwcProblem {
  Conv2dGeometry g;
  std::vector<float> x, w, bias, dy, dw0, db0;  // [N,H,W,C], [K,R,S,Cg], [K], [N,P,Q,K], ...
  std::vector<double> y, y_no_bias, dx, dw, db;
};

bool runs_wgmma(ConvPass pass, const Conv2dGeometry& g, GemmMath math) {
  return std::string(conv2d_nhwc_kernel(pass, g, DType::f32, math)) == "tc_wgmma";
}

NhwcProblem make_problem(const Conv2dGeometry& g, GemmMath math, uint64_t seed) {
  Random rng(seed);
  NhwcProblem p;
  p.g = g;
  p.x = random_values(rng, g.N * g.H * g.W * g.C);
  p.w = random_values(rng, g.K * g.R * g.S * (g.C / g.groups));
  p.bias = random_values(rng, g.K);
  p.dy = random_values(rng, g.N * g.P() * g.Q() * g.K);
  p.dw0 = random_values(rng, int64_t(p.w.size()));
  p.db0 = random_values(rng, g.K);
  const std::vector<double> x = as_double(p.x, math), w = as_double(p.w, math),
                            dy = as_double(p.dy, math);
  const std::vector<double> bias(p.bias.begin(), p.bias.end());
  p.y.resize(p.dy.size());
  p.y_no_bias.resize(p.dy.size());
  p.dx.resize(p.x.size());
  p.dw.assign(p.dw0.begin(), p.dw0.end());
  p.db.assign(p.db0.begin(), p.db0.end());
  const bool forward_truncates = runs_wgmma(ConvPass::forward, g, math),
             data_truncates = runs_wgmma(ConvPass::backward_data, g, math);
  const std::vector<double> xt = as_double(p.x, math, true), wt = as_double(p.w, math, true),
                            dyt = as_double(p.dy, math, true);
  const std::vector<double>& xf = forward_truncates ? xt : x;
  const std::vector<double>& wf = forward_truncates ? wt : w;
  ref::conv2d_forward_nhwc<double>(g, xf.data(), wf.data(), bias.data(), p.y.data());
  ref::conv2d_forward_nhwc<double>(g, xf.data(), wf.data(), nullptr, p.y_no_bias.data());
  ref::conv2d_backward_data_nhwc<double>(g, (data_truncates ? dyt : dy).data(),
                                         (data_truncates ? wt : w).data(), p.dx.data());
  ref::conv2d_backward_filter_nhwc<double>(g, x.data(), dy.data(), p.dw.data());
  for (size_t i = 0; i < p.dy.size(); ++i) p.db[i % size_t(g.K)] += p.dy[i];
  return p;
}

// Every raw NHWC pass of p in `math`.
void check_nhwc(Context& ctx, const NhwcProblem& p, GemmMath math) {
  const Conv2dGeometry& g = p.g;
  const std::string what = describe(g) + " nhwc " + cuda::gemm_math_name(math);
  Tensor x = upload(ctx, p.x), w = upload(ctx, p.w), bias = upload(ctx, p.bias),
         dy = upload(ctx, p.dy), dw = upload(ctx, p.dw0), db = upload(ctx, p.db0);
  Tensor y = ctx.empty({int64_t(p.dy.size())}), dx = ctx.empty({int64_t(p.x.size())});
  float* ws = ctx.workspace(std::max({cuda::conv2d_forward_nhwc_workspace(g),
                                      cuda::conv2d_backward_data_nhwc_workspace(g),
                                      cuda::conv2d_backward_filter_nhwc_workspace(g), size_t(1)}));
  const gpu::Stream s = ctx.stream();
  ctx.fill(y, kNaN);
  cuda::conv2d_forward_nhwc(g, x.data<float>(), w.data<float>(), bias.data<float>(),
                            y.data<float>(), ws, s, math);
  ctx.synchronize();
  expect_close(y, p.y, what + " forward");
  ctx.fill(y, kNaN);
  cuda::conv2d_forward_nhwc(g, x.data<float>(), w.data<float>(), nullptr, y.data<float>(), ws, s,
                            math);
  ctx.synchronize();
  expect_close(y, p.y_no_bias, what + " forward without bias");
  ctx.fill(dx, kNaN);
  cuda::conv2d_backward_data_nhwc(g, dy.data<float>(), w.data<float>(), dx.data<float>(), ws, s,
                                  math);
  ctx.synchronize();
  expect_close(dx, p.dx, what + " backward data");
  cuda::conv2d_backward_filter_nhwc(g, x.data<float>(), dy.data<float>(), dw.data<float>(),
                                    db.data<float>(), ws, s, math);
  ctx.synchronize();
  expect_close(dw, p.dw, what + " backward filter");
  expect_close(db, p.db, what + " backward bias");
}

const GemmMath kMaths[] = {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16};

TEST(ConvolutionNhwcCuda, EveryPassAndMathAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 4, 7, 9, 6, 3, 3, 1, 1},                   // C = 4: 16-byte copies, N = 1, odd H, W
      {2, 12, 11, 10, 20, 3, 2, 2, 1, 2, 2},         // stride 2, pads 2 and 1
      {3, 36, 9, 13, 70, 3, 3, 0, 0, 1, 1, 2, 2},    // dilation 2, pad 0, K > 64 (wide tile)
      {2, 3, 9, 8, 5, 3, 3, 1, 1},                   // C = 3: 4-byte copies
      {2, 8, 8, 7, 12, 3, 3, 1, 1, 2, 1, 1, 1, 2},   // groups 2: Cg = 4, Kg = 6 (data 4-byte)
      {2, 16, 6, 7, 16, 3, 3, 2, 2, 1, 1, 1, 1, 2},  // groups 2, Cg = Kg = 8, pad 2
      {2, 6, 7, 5, 10, 1, 1},                        // 1x1, C = 6
      {1, 4, 5, 5, 130, 3, 3, 1, 1},                 // K = 130: three column tiles
      {2, 132, 5, 6, 8, 3, 3, 1, 1},                 // Cg = 132: data's wide tile, inner > slab
      {37, 4, 9, 8, 5, 3, 2, 1, 0},                  // N*P*Q not a tile multiple
      {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},             // outputs that read only padding
      {2, 3, 19, 17, 10, 7, 7, 3, 3, 2, 2},          // a stem in small: 7x7 stride 2, C = 3
      {8, 8, 32, 32, 16, 3, 3, 1, 1},                // N*P*Q = 8192: many filter slices
      {2, 8, 9, 11, 132, 3, 3, 1, 1, 2, 2},          // filter gradient: 16-byte runs, wide tile
      {2, 4, 10, 9, 8, 3, 3, 2, 2, 1, 1, 2, 2},      // the same, narrow tile, dilation 2
  };
  uint64_t seed = 100;
  for (const Conv2dGeometry& g : geometries) {
    for (GemmMath math : kMaths) check_nhwc(ctx, make_problem(g, math, seed += 7), math);
  }
}

// Pointers off 16-byte alignment take the 4-byte copies even where C % 4 == 0 and K % 4 == 0.
TEST(ConvolutionNhwcCuda, MisalignedPointersTakeTheFourByteCopies) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{2, 8, 9, 7, 12, 3, 3, 1, 1, 2, 1};
  const NhwcProblem p = make_problem(g, GemmMath::fp32, 5);
  auto shifted = [&](const std::vector<float>& v) {
    std::vector<float> one_more(v.size() + 1, 0.0f);
    std::copy(v.begin(), v.end(), one_more.begin() + 1);
    return upload(ctx, one_more);
  };
  Tensor x = shifted(p.x), w = shifted(p.w), dy = shifted(p.dy);
  Tensor y = ctx.empty({int64_t(p.dy.size())}), dx = ctx.empty({int64_t(p.x.size())});
  Tensor dw = upload(ctx, p.dw0);
  float* ws = ctx.workspace(std::max(cuda::conv2d_backward_data_nhwc_workspace(g),
                                     cuda::conv2d_backward_filter_nhwc_workspace(g)));
  ctx.fill(y, kNaN);
  ctx.fill(dx, kNaN);
  cuda::conv2d_forward_nhwc(g, x.data<float>() + 1, w.data<float>() + 1, nullptr, y.data<float>(),
                            ws, ctx.stream());
  cuda::conv2d_backward_data_nhwc(g, dy.data<float>() + 1, w.data<float>() + 1, dx.data<float>(),
                                  ws, ctx.stream());
  cuda::conv2d_backward_filter_nhwc(g, x.data<float>() + 1, dy.data<float>() + 1, dw.data<float>(),
                                    nullptr, ws, ctx.stream());
  ctx.synchronize();
  expect_close(y, p.y_no_bias, describe(g) + " misaligned forward");
  expect_close(dx, p.dx, describe(g) + " misaligned backward data");
  expect_close(dw, p.dw, describe(g) + " misaligned backward filter");
}

// The filter gradient's slices are fixed by the geometry and summed in order: repeats agree bit
// for bit.
TEST(ConvolutionNhwcCuda, FilterGradientIsDeterministic) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{16, 32, 17, 19, 24, 3, 3, 1, 1};
  const NhwcProblem p = make_problem(g, GemmMath::fp32, 9);
  Tensor x = upload(ctx, p.x), dy = upload(ctx, p.dy);
  float* ws = ctx.workspace(cuda::conv2d_backward_filter_nhwc_workspace(g));
  std::vector<float> first;
  for (GemmMath math : kMaths) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      Tensor dw = upload(ctx, p.dw0);
      cuda::conv2d_backward_filter_nhwc(g, x.data<float>(), dy.data<float>(), dw.data<float>(),
                                        nullptr, ws, ctx.stream(), math);
      const std::vector<float> out = dw.to_vector();
      if (repeat == 0) first = out;
      EXPECT_EQ(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)), 0)
          << cuda::gemm_math_name(math);
    }
  }
}

// v9 runs NCHW callers through the NHWC kernels: every pass of conv2d_forward and its siblings
// against the NCHW reference, in every math (tf32 within 2e-3, bf16 within 1.6e-2 of the exact
// result: conv_find_tolerance).
TEST(ConvolutionNhwcCuda, NchwVersionThroughTheEntryPoints) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      {1, 4, 7, 9, 6, 3, 3, 1, 1},
      {2, 3, 9, 8, 5, 3, 3, 1, 1},
      {3, 36, 9, 13, 70, 3, 3, 0, 0, 1, 1, 2, 2},
      {2, 8, 8, 7, 12, 3, 3, 1, 1, 2, 1, 1, 1, 2},
      {2, 12, 11, 10, 20, 3, 2, 2, 1, 2, 2},
  };
  uint64_t seed = 300;
  for (const Conv2dGeometry& g : geometries) {
    const Problem p = reference_problem(g, seed += 5);
    for (GemmMath math : kMaths) {
      check_algorithm(ctx, p, record("nhwc_implicit_gemm"), math);
    }
  }
  // The Tensor-level dispatch with the version pinned.
  const Conv2dGeometry g{2, 12, 11, 10, 20, 3, 3, 1, 1};
  const Problem p = reference_problem(g, 77);
  Tensor x = ctx.empty({g.N, g.C, g.H, g.W}), w = ctx.empty({g.K, g.C, g.R, g.S}),
         bias = ctx.empty({g.K}), y = ctx.empty({g.N, g.K, g.P(), g.Q()});
  x.copy_from(Tensor::from_vector(x.shape(), p.x));
  w.copy_from(Tensor::from_vector(w.shape(), p.w));
  bias.copy_from(Tensor::from_vector(bias.shape(), p.bias));
  ctx.fill(y, kNaN);
  conv2d_forward(ctx, g, x, w, &bias, y, ConvRequest::pin(record("nhwc_implicit_gemm")));
  ctx.synchronize();
  expect_close(y, p.y, describe(g) + " Tensor-level conv2d_forward, nhwc_implicit_gemm");
}

}  // namespace
}  // namespace crema::kernels::conv_test
