// cuda::gemm_16bit and the Tensor-level gemm on bf16 and f16 tensors: every layout, awkward
// shapes (M, N, K odd, K not a multiple of 8, K = 1), the skinny products that split K (a weight
// gradient's few tiles and long K; M = 1; N = 1), alpha/beta blends over NaN-poisoned C, a bias,
// C f32 or 16-bit, in every way (wgmma_in_place and wgmma_repacked on compute capability 9.0,
// tf32_mma / bf16_mma on widened operands anywhere); the bits repeat; what it refuses it names.
// Also the bias gradient from 16-bit dy. The bounds: gemm_16bit_cuda_test_util.h;
// wgmma_in_place's own cases: gemm_16bit_in_place_cuda_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/gemm_16bit_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using namespace gemm16;

TEST(Gemm16bitCuda, AwkwardShapesEveryLayout) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // K = 1, odd extents, K not a multiple of 8 (both operands copied and zero-padded), K a
  // multiple of 8 (K-major operands read in place), several 128 x 256 tiles with edges, a long K
  // over several laps of the ring.
  const Dims shapes[] = {{1, 1, 1},      {7, 5, 3},       {33, 65, 71},
                         {129, 257, 72}, {300, 520, 200}, {65, 7, 1000}};
  uint64_t seed = 1600;
  for (const Dims& d : shapes) check_shape(ctx, d, seed += 16);
}

TEST(Gemm16bitCuda, SkinnyProductsSplitK) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // A weight gradient's shape (C 384 x 96: 3 tiles of 128 x 256, K long; K = 9999 ragged), one
  // row of C, one column of C.
  const Dims shapes[] = {{384, 96, 20000}, {384, 96, 9999}, {1, 300, 9000}, {200, 1, 5000}};
  uint64_t seed = 1700;
  for (const Dims& d : shapes) {
    if (on_sm90()) {
      // The shapes are there to split: a plan without a split would leave the path untested.
      for (GemmVersion v : {GemmVersion::wgmma_repacked, GemmVersion::wgmma_in_place}) {
        EXPECT_GT(cuda::gemm_16bit_splits(true, false, d.M, d.N, d.K, v), 1)
            << d.M << " x " << d.N << " x " << d.K << " " << cuda::gemm_version_name(v);
      }
    }
    check_shape(ctx, d, seed += 16);
  }
}

TEST(Gemm16bitCuda, SplitKRepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  if (!on_sm90()) GTEST_SKIP() << "the split runs on sm_90 only";
  // A split weight gradient (both operands MN-major) and an unsplit NN product (B MN-major) with a
  // 16-bit C, on both wgmma ways.
  struct Case {
    Dims d;
    bool ta, tb;
    DType c_type;
  };
  for (const Case& k : {Case{{384, 96, 20000}, true, false, DType::f32},
                        Case{{264, 520, 3000}, false, false, DType::bf16}}) {
    const Operands o = make_operands(k.d, k.ta, k.tb, DType::bf16, 1800);
    const std::vector<float> c0 = random_representable(size_t(k.d.M * k.d.N), k.c_type, 1801);
    const std::vector<float> bias = random_representable(size_t(k.d.N), DType::f32, 1802);
    const Blend blend{1.0f, 1.0f, true};
    for (GemmVersion version : {GemmVersion::wgmma_in_place, GemmVersion::wgmma_repacked}) {
      const std::vector<float> first = run(ctx, o, k.c_type, blend, c0, bias, version);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const std::vector<float> again = run(ctx, o, k.c_type, blend, c0, bias, version);
        ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0)
            << cuda::gemm_version_name(version) << " M=" << k.d.M << " repeat " << repeat;
      }
    }
  }
}

TEST(Gemm16bitCuda, TensorLevelMatchesTheCpuReference) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  // An inner product's three GEMMs at a small ConvNeXt-like shape: y = x W^T + b (16-bit y),
  // dW += dy^T x (f32 dW, beta 1, split), dx = dy W (16-bit dx).
  const int64_t P = 3000, C = 24, H = 96;
  for (DType type : {DType::bf16, DType::f16}) {
    const auto x = random_representable(size_t(P * C), type, 1900);
    const auto w = random_representable(size_t(H * C), type, 1901);
    const auto dy = random_representable(size_t(P * H), type, 1902);
    const auto b = random_representable(size_t(H), DType::f32, 1903);
    const auto dw0 = random_representable(size_t(H * C), DType::f32, 1904);
    struct Call {
      bool ta, tb;
      const std::vector<float>*a, *b;
      Shape sa, sb, sc;
      DType c_type;
      float beta;
      const std::vector<float>* c0;
      bool bias;
      int64_t K;
    };
    const std::vector<float> none(size_t(P * std::max(H, C)), kNaN);
    const Tensor bias_g = device_tensor(gpu, {H}, DType::f32, b);
    const Tensor bias_c = host_tensor({H}, DType::f32, b);
    const Call calls[] = {
        {false, true, &x, &w, {P, C}, {H, C}, {P, H}, type, 0.0f, &none, true, C},
        {true, false, &dy, &x, {P, H}, {P, C}, {H, C}, DType::f32, 1.0f, &dw0, false, P},
        {false, false, &dy, &w, {P, H}, {H, C}, {P, C}, type, 0.0f, &none, false, H}};
    for (const Call& k : calls) {
      const std::vector<float> c0(k.c0->begin(), k.c0->begin() + shape_numel(k.sc));
      Tensor cg = device_tensor(gpu, k.sc, k.c_type, c0);
      Tensor cc = host_tensor(k.sc, k.c_type, c0);
      gemm(gpu, k.ta, k.tb, 1.0f, device_tensor(gpu, k.sa, type, *k.a),
           device_tensor(gpu, k.sb, type, *k.b), k.beta, cg, cuda::GemmMath::fp32,
           k.bias ? &bias_g : nullptr);
      gemm(cpu, k.ta, k.tb, 1.0f, host_tensor(k.sa, type, *k.a), host_tensor(k.sb, type, *k.b),
           k.beta, cc, cuda::GemmMath::fp32, k.bias ? &bias_c : nullptr);
      gpu.synchronize();
      const std::vector<float> want_f = cc.to_vector();
      const std::vector<double> want(want_f.begin(), want_f.end());
      // The CPU's C is itself rounded once: a 16-bit C may differ by one rounding on each side.
      expect_close(cg.to_vector(), want, k.c_type, k.K,
                   std::string("tensor level ") + dtype_name(type) + (k.ta ? " T" : " N") +
                       (k.tb ? "T" : "N"),
                   2);
    }
  }
}

TEST(Gemm16bitCuda, RefusesWhatItCannotRunWithTheReason) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor a = ctx.empty({256}, DType::bf16), c = ctx.empty({256}, DType::f16);
  const auto message = [&](DType ab, DType ct, GemmVersion v, int64_t lda, int64_t offset) {
    try {
      const auto* base = static_cast<const uint16_t*>(a.raw()) + offset;
      cuda::gemm_16bit(ab, ct, false, true, 8, 8, 8, 1.0f, base, lda, a.raw(), 8, 0.0f, c.raw(), 8,
                       nullptr, ctx.stream(), v, nullptr);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  const auto expect_has = [](const std::string& text, const char* part) {
    EXPECT_NE(text.find(part), std::string::npos) << text;
  };
  expect_has(message(DType::bf16, DType::f16, GemmVersion::tf32_mma, 8, 0),
             "C must be f32 or the operands' bf16, got f16");
  expect_has(message(DType::f32, DType::f32, GemmVersion::tf32_mma, 8, 0),
             "operands must be bf16 or f16, got f32");
  expect_has(message(DType::f16, DType::f16, GemmVersion::bf16_mma, 8, 0),
             "bf16_mma would round f16 operands to bf16");
  expect_has(message(DType::bf16, DType::bf16, GemmVersion::ffma_tuned, 8, 0),
             "does not read 16-bit operands");
  expect_has(message(DType::bf16, DType::bf16, GemmVersion::tf32_mma, 8, 0),
             "needs a 16-byte aligned workspace");
  if (on_sm90()) {
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_repacked, 12, 0),
               "a multiple of 8");
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_repacked, 8, 1),
               "16-byte aligned");
    // wgmma_in_place copies an operand with rows of 12 (the workspace the plan for lda = 12 asks
    // for is missing here), and refuses a misaligned base.
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_in_place, 12, 0),
               "lda=12, ldb=8) needs a 16-byte aligned workspace");
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_in_place, 8, 1),
               "A [M,K] is read in place and must be 16-byte aligned");
  }
}

TEST(Gemm16bitCuda, BiasGradientFrom16bitDy) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // dbias += column sums of dy: a weight gradient's long M (row chunks over the grid) and a
  // short one; fp32 sums of exact 16-bit values, held to the double sum within 1e-5 of the sum of
  // magnitudes; the chunks' order fixed: the same bits again.
  for (DType type : {DType::bf16, DType::f16}) {
    const Dims sizes[] = {{20000, 96, 0}, {3, 7, 0}, {1000, 1, 0}};
    for (const Dims& size : sizes) {
      const int64_t M = size.M, N = size.N;
      const auto dy = random_representable(size_t(M * N), type, 2000);
      const auto db0 = random_representable(size_t(N), DType::f32, 2001);
      std::vector<float> first;
      for (int repeat = 0; repeat < 2; ++repeat) {
        Tensor db = device_tensor(ctx, {N}, DType::f32, db0);
        accumulate_bias_rows(ctx, device_tensor(ctx, {M, N}, type, dy), db);
        ctx.synchronize();
        const std::vector<float> got = db.to_vector();
        if (repeat == 0) {
          first = got;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0);
        }
        for (int64_t n = 0; n < N; ++n) {
          double want = db0[size_t(n)], magnitude = std::fabs(want);
          for (int64_t m = 0; m < M; ++m) {
            want += dy[size_t(m * N + n)];
            magnitude += std::fabs(dy[size_t(m * N + n)]);
          }
          EXPECT_NEAR(got[size_t(n)], want, 1e-5 * magnitude) << dtype_name(type) << " M=" << M;
        }
      }
    }
  }
}
}  // namespace
}  // namespace crema::kernels
