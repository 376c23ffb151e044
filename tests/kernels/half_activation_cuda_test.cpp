// ReLU, the pointwise activations and dropout in bf16 and f16 on CUDA, against the f64 reference
// on the same (exactly representable) inputs, with the tolerance of one rounding of the output
// plus what the op's float arithmetic adds (half_test_util.h), on sizes that are not multiples of
// 8 (the scalar tail) and pointers one element off 16 bytes (the scalar version), outputs poisoned
// first. Where the op's float arithmetic is one operation (ReLU, dropout), the result is also bit
// for bit the CPU's f32 result on the widened inputs, rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/activations/pointwise.h"
#include "kernels/activations/relu.h"
#include "kernels/dropout/dropout.h"
#include "tests/kernels/activation_test_util.h"
#include "tests/kernels/half_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::half_input;
using testing::HalfInput;
using testing::widened;
using testing::within_one_rounding;

const DType kHalves[] = {DType::bf16, DType::f16};
const int64_t kSizes[] = {1, 7, 8, 9, 1023, 100003};
// One float multiply before the rounding: its own 2^-24.
const double kOneFloatOp = std::ldexp(1.0, -24);

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The device tensor `t` on the host, once ctx's stream is done.
Tensor on_host(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), t.dtype());
  host.copy_from(t);
  return host;
}

// The CPU's f32 result of `run` on the widened inputs, rounded once to `dtype`.
template <class Run>
Tensor cpu_rounded(const Tensor& f32_result, DType dtype, Run run) {
  run();
  return testing::host_as(f32_result, dtype);
}

TEST(HalfReluCuda, MatchesTheReferenceAndTheRoundedCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  for (DType dtype : kHalves) {
    for (int64_t n : kSizes) {
      for (float slope : {0.0f, 0.1f}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n) +
                     " slope=" + std::to_string(slope));
        Random rng(static_cast<uint64_t>(n));
        const HalfInput x = half_input(ctx, rng, {n}, dtype), dy = half_input(ctx, rng, {n}, dtype);
        Tensor y = testing::poisoned_as(ctx, {n}, dtype),
               dx = testing::poisoned_as(ctx, {n}, dtype);
        relu_forward(ctx, x.device, y, slope);
        relu_backward(ctx, y, dy.device, dx, slope);
        const std::vector<double> yv = widened(ctx, y), dxv = widened(ctx, dx);

        std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
        ref::relu_forward(n, x.exact.data(), y_ref.data(), double(slope));
        ref::relu_backward(n, yv.data(), dy.exact.data(), dx_ref.data(), double(slope));
        if (slope == 0.0f) {  // selects and copies: exact
          EXPECT_EQ(yv, y_ref);
          EXPECT_EQ(dxv, dx_ref);
        } else {
          EXPECT_TRUE(within_one_rounding(yv, y_ref, dtype, kOneFloatOp));
          EXPECT_TRUE(within_one_rounding(dxv, dx_ref, dtype, kOneFloatOp));
        }

        const Tensor xf = testing::host_as(x.host, DType::f32);
        Tensor yf({n}, DType::f32);
        const Tensor y_want = cpu_rounded(yf, dtype, [&] { relu_forward(cpu, xf, yf, slope); });
        EXPECT_TRUE(same_bytes(on_host(ctx, y), y_want));

        // In place: y overwrites x, dx overwrites dy; the same bits.
        Tensor in_place = testing::device_copy(ctx, x.host);
        relu_forward(ctx, in_place, in_place, slope);
        EXPECT_TRUE(same_bytes(on_host(ctx, in_place), on_host(ctx, y)));
        Tensor grad = testing::device_copy(ctx, dy.host);
        relu_backward(ctx, y, grad, grad, slope);
        EXPECT_TRUE(same_bytes(on_host(ctx, grad), on_host(ctx, dx)));
      }
    }
  }
}

// Both versions, on pointers one element past 16 bytes (the vectorized one falls back): the
// same bits as the aligned call.
TEST(HalfReluCuda, VersionsAndMisalignedPointers) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t n = 1031;
  Random rng(8);
  const HalfInput x = half_input(ctx, rng, {n}, DType::bf16);
  Tensor aligned = testing::poisoned_as(ctx, {n}, DType::bf16);
  relu_forward(ctx, x.device, aligned, 0.1f);
  const Tensor want = on_host(ctx, aligned);
  for (cuda::ReluVersion version : {cuda::ReluVersion::scalar, cuda::ReluVersion::vectorized}) {
    Tensor y = testing::poisoned_as(ctx, {n}, DType::bf16);
    cuda::relu_forward(n - 1, x.device.data<bf16_t>() + 1, y.data<bf16_t>() + 1, 0.1f, version,
                       ctx.stream());
    const Tensor got = on_host(ctx, y);
    EXPECT_TRUE(std::isnan(got.to_vector()[0]));  // not written
    EXPECT_EQ(std::memcmp(got.data<bf16_t>() + 1, want.data<bf16_t>() + 1, (n - 1) * 2), 0);
  }
}

// Every activation: forward and backward within one rounding of ref<double>, plus the float
// functions' own error (CUDA's expf, tanhf, erff: a few ulp; 1e-6 relative) and, where the
// derivative crosses zero (swish, GELU, mish for negative x), an absolute 4e-7: there two float
// terms of up to about 0.3 cancel, each off by up to ten roundings of 2^-24 (0.3 * 10 * 6e-8).
TEST(HalfActivationCuda, EveryKindWithinOneRounding) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : kHalves) {
    for (const Activation& a : activation_test::all_activations()) {
      for (int64_t n : {7, 1023, 4101}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + activation_name(a.kind) +
                     " n=" + std::to_string(n));
        Random rng(uint64_t(n) + 17);
        const HalfInput x = half_input(ctx, rng, {n}, dtype, -4.0, 4.0);
        const HalfInput dy = half_input(ctx, rng, {n}, dtype);
        Tensor y = testing::poisoned_as(ctx, {n}, dtype),
               dx = testing::poisoned_as(ctx, {n}, dtype);
        activation_forward(ctx, a, x.device, y);
        const bool reads_y = activation_test::from_output(a);
        activation_backward(ctx, a, reads_y ? y : x.device, dy.device, dx);
        const std::vector<double> yv = widened(ctx, y), dxv = widened(ctx, dx);

        std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
        ref::activation_forward(a, n, x.exact.data(), y_ref.data());
        // The backward is fed what the GPU's read: the rounded y, or x.
        ref::activation_backward(a, n, reads_y ? yv.data() : x.exact.data(), dy.exact.data(),
                                 dx_ref.data());
        EXPECT_TRUE(within_one_rounding(yv, y_ref, dtype, 1e-6, 4e-7));
        EXPECT_TRUE(within_one_rounding(dxv, dx_ref, dtype, 1e-6, 4e-7));
      }
    }
  }
}

TEST(HalfDropoutCuda, SameMaskAsTheCpuRoundedOnce) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  const float ratio = 0.3f;
  const uint64_t seed = 99;
  for (DType dtype : kHalves) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      Random rng(uint64_t(n) + 5);
      const HalfInput x = half_input(ctx, rng, {n}, dtype), dy = half_input(ctx, rng, {n}, dtype);
      Tensor step = dropout_step_counter(ctx), cpu_step = dropout_step_counter(cpu);
      Tensor y = testing::poisoned_as(ctx, {n}, dtype), dx = testing::poisoned_as(ctx, {n}, dtype);
      dropout_forward(ctx, x.device, y, ratio, seed, step);
      dropout_backward(ctx, dy.device, dx, ratio, seed, step);

      const Tensor xf = testing::host_as(x.host, DType::f32);
      const Tensor dyf = testing::host_as(dy.host, DType::f32);
      Tensor yf({n}, DType::f32), dxf({n}, DType::f32);
      dropout_forward(cpu, xf, yf, ratio, seed, cpu_step);
      dropout_backward(cpu, dyf, dxf, ratio, seed, cpu_step);
      EXPECT_TRUE(same_bytes(on_host(ctx, y), testing::host_as(yf, dtype)));
      EXPECT_TRUE(same_bytes(on_host(ctx, dx), testing::host_as(dxf, dtype)));

      // And against the exact mask-times-scale: one rounding of one float multiply.
      std::vector<double> y_ref(static_cast<size_t>(n));
      ref::dropout_forward(n, x.exact.data(), y_ref.data(), ratio, seed, 1);
      EXPECT_TRUE(within_one_rounding(widened(ctx, y), y_ref, dtype, kOneFloatOp));
    }
  }
}

}  // namespace
}  // namespace crema::kernels
