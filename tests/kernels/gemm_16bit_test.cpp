// The Tensor-level gemm on bf16 and f16 tensors on the CPU (the reference the GPU tests and the
// layers' CPU runs lean on): every layout, a bias, beta over a 16-bit or f32 C, against a plain
// triple loop in double rounded once; the dtypes it refuses, named. Also the bias gradient from
// 16-bit dy on the CPU, and that neither asks for workspace there.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemm/gemm.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::error_of;

float round_to(float v, DType t) {
  return t == DType::bf16 ? to_f32(to_bf16(v)) : t == DType::f16 ? to_f32(to_f16(v)) : v;
}

// A host tensor of dtype t with random values of t (uniform in [-1, 1), rounded).
Tensor random_tensor(const Shape& shape, DType t, uint64_t seed) {
  Random rng(seed);
  Tensor out(shape, t);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float v = float(rng.uniform(-1.0, 1.0));
    if (t == DType::bf16) out.data<bf16_t>()[i] = to_bf16(v);
    if (t == DType::f16) out.data<f16_t>()[i] = to_f16(v);
    if (t == DType::f32) out.data<float>()[i] = v;
  }
  return out;
}

TEST(Gemm16bit, CpuReferenceEveryLayout) {
  Context ctx;
  const int64_t M = 7, N = 5, K = 13;
  uint64_t seed = 100;
  for (DType type : {DType::bf16, DType::f16}) {
    for (DType c_type : {DType::f32, type}) {
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const Tensor a = random_tensor(ta ? Shape{K, M} : Shape{M, K}, type, ++seed);
        const Tensor b = random_tensor(tb ? Shape{N, K} : Shape{K, N}, type, ++seed);
        const Tensor bias = random_tensor({N}, DType::f32, ++seed);
        Tensor c = random_tensor({M, N}, c_type, ++seed);
        const std::vector<float> a_v = a.to_vector(), b_v = b.to_vector(), c0 = c.to_vector();
        const std::vector<float> bias_v = bias.to_vector();
        gemm(ctx, ta, tb, 0.5f, a, b, 2.0f, c, cuda::GemmMath::fp32, &bias);
        const std::vector<float> got = c.to_vector();
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double sum = 0;
            for (int64_t k = 0; k < K; ++k) {
              sum += double(a_v[size_t(ta ? k * M + m : m * K + k)]) *
                     double(b_v[size_t(tb ? n * K + k : k * N + n)]);
            }
            const double want = 0.5 * sum + bias_v[size_t(n)] + 2.0 * c0[size_t(m * N + n)];
            EXPECT_EQ(got[size_t(m * N + n)], round_to(float(want), c_type))
                << dtype_name(type) << " -> " << dtype_name(c_type) << " t=" << t;
          }
        }
      }
    }
  }
}

TEST(Gemm16bit, RefusesMixedDtypesNamingThem) {
  Context ctx;
  const Tensor a = random_tensor({3, 4}, DType::bf16, 1),
               b16 = random_tensor({4, 2}, DType::f16, 2);
  const Tensor b = random_tensor({4, 2}, DType::bf16, 3);
  Tensor c_f16 = random_tensor({3, 2}, DType::f16, 4), c = random_tensor({3, 2}, DType::f32, 5);
  EXPECT_CONTAINS(error_of([&] { gemm(ctx, false, false, 1.0f, a, b16, 0.0f, c); }),
                  "gemm: b is f16[4, 2] on cpu, expected bf16[4, 2] on cpu");
  EXPECT_CONTAINS(error_of([&] { gemm(ctx, false, false, 1.0f, a, b, 0.0f, c_f16); }),
                  "gemm: c is f16[3, 2] on cpu, expected bf16[3, 2] on cpu");
  const Tensor bias16 = random_tensor({2}, DType::bf16, 6);
  EXPECT_CONTAINS(error_of([&] {
                    gemm(ctx, false, false, 1.0f, a, b, 0.0f, c, cuda::GemmMath::fp32, &bias16);
                  }),
                  "gemm: bias is bf16[2] on cpu, expected f32[2] on cpu");
  EXPECT_EQ(gemm_workspace_bytes(Device::cpu(), true, false, 384, 96, 200704, DType::bf16), 0u);
}

TEST(Gemm16bit, BiasGradientFrom16bitDyOnTheCpu) {
  Context ctx;
  for (DType type : {DType::bf16, DType::f16}) {
    const Tensor dy = random_tensor({37, 5}, type, 20);
    Tensor db = random_tensor({5}, DType::f32, 21);
    const std::vector<float> dy_v = dy.to_vector(), db0 = db.to_vector();
    accumulate_bias_rows(ctx, dy, db);
    for (int64_t n = 0; n < 5; ++n) {
      float want = 0.0f;  // each column's rows in order, fp32
      for (int64_t m = 0; m < 37; ++m) want += dy_v[size_t(m * 5 + n)];
      EXPECT_EQ(db.data<float>()[n], db0[size_t(n)] + want) << dtype_name(type);
    }
    EXPECT_EQ(accumulate_bias_rows_workspace_bytes(Device::cpu(), 37, 5, type), 0u);
  }
  Tensor db16 = random_tensor({5}, DType::bf16, 22);
  EXPECT_CONTAINS(error_of([&] {
                    accumulate_bias_rows(ctx, random_tensor({3, 5}, DType::bf16, 23), db16);
                  }),
                  "accumulate_bias_rows: dbias is bf16[5] on cpu, expected f32[5] on cpu");
}

}  // namespace
}  // namespace crema::kernels
