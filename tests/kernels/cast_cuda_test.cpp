// kernels::cast on CUDA: every pair of f32, bf16, f16 against the CPU cast, bit for bit, on
// awkward sizes (1, 7, 8, 1023, 100003: the scalar tail and the 16-byte groups), on pointers one
// element past a 16-byte boundary (the scalar fallback), outputs poisoned first; and the refusal
// of f64 on the GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/float16.h"
#include "core/random.h"
#include "kernels/cast/cast.h"
#include "tests/kernels/half_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

const DType kGpuTypes[] = {DType::f32, DType::bf16, DType::f16};

// n float32 values of every kind (random bit patterns: all exponents, NaNs, infinities).
Tensor awkward_f32(int64_t n, uint64_t seed) {
  Random rng(seed);
  Tensor t({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    // Every other value in [-2, 2], where bf16 and f16 are both finite and normal.
    t.data<float>()[i] =
        (i % 2 == 0) ? f32_from_bits(uint32_t(rng.next())) : float(rng.uniform(-2.0, 2.0));
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The device tensor `t` copied to the host.
Tensor on_host(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), t.dtype());
  host.copy_from(t);
  return host;
}

TEST(CastCuda, EveryPairMatchesTheCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  for (int64_t n : {1, 7, 8, 9, 1023, 100003}) {
    const Tensor values = awkward_f32(n, uint64_t(n));
    for (DType from : kGpuTypes) {
      const Tensor x = cast_to(cpu, values, from);
      const Tensor xg = testing::device_copy(ctx, x);
      for (DType to : kGpuTypes) {
        SCOPED_TRACE("n=" + std::to_string(n) + " " + dtype_name(from) + " -> " + dtype_name(to));
        const Tensor want = cast_to(cpu, x, to);
        Tensor y = testing::poisoned_as(ctx, {n}, to);
        cast(ctx, xg, y);
        EXPECT_TRUE(same_bytes(on_host(ctx, y), want));
      }
    }
  }
}

TEST(CastCuda, MisalignedPointersFallBackToScalar) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  const int64_t n = 1031;
  const Tensor values = awkward_f32(n, 5);
  for (DType from : kGpuTypes) {
    for (DType to : kGpuTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      const Tensor x = cast_to(cpu, values, from), want = cast_to(cpu, x, to);
      const Tensor xg = testing::device_copy(ctx, x);
      Tensor y = testing::poisoned_as(ctx, {n}, to);
      // Elements 1 .. n-1 of x into elements 1 .. n-1 of y: both one element past 16 bytes.
      cuda::cast(n - 1, from, static_cast<const char*>(xg.raw()) + dtype_size(from), to,
                 static_cast<char*>(y.raw()) + dtype_size(to), ctx.stream());
      const Tensor got = on_host(ctx, y);
      EXPECT_TRUE(std::isnan(got.to_vector()[0]));  // not written
      const size_t element = dtype_size(to);
      EXPECT_EQ(std::memcmp(static_cast<const char*>(got.raw()) + element,
                            static_cast<const char*>(want.raw()) + element, (n - 1) * element),
                0);
    }
  }
}

TEST(CastCuda, RefusesF64) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Tensor x = ctx.empty({3}, DType::f32);
  Tensor y = ctx.empty({3}, DType::f64);
  EXPECT_CONTAINS(crema::testing::error_of([&] { cast(ctx, x, y); }),
                  "cast: no implementation for f32 -> f64 on cuda:0 (cuda casts between f32, "
                  "bf16 and f16)");
  Tensor z = ctx.empty({3}, DType::f32);
  EXPECT_CONTAINS(crema::testing::error_of([&] { cast(ctx, y, z); }),
                  "cast: no implementation for f64 nchw on cuda:0");
}

}  // namespace
}  // namespace crema::kernels
