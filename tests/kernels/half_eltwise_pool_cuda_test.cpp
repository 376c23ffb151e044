// Eltwise, 2-D pooling and concat/slice in bf16 and f16 on CUDA: against the f64 reference on the
// same (exactly representable) inputs with the tolerance of one rounding of the output plus what
// the op's float arithmetic adds (stated per test, half_test_util.h), on awkward shapes (odd
// H and W, N = 1, C = 3, sizes that are not multiples of 8, more inputs than one launch takes),
// outputs poisoned first. Max and copies are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/concat/concat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/eltwise.h"
#include "kernels/pooling/pooling.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/pooling_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::half_input;
using testing::HalfInput;
using testing::widened;
using testing::within_one_rounding;

const DType kHalves[] = {DType::bf16, DType::f16};
const double kFloatUlp = std::ldexp(1.0, -24);

std::vector<const Tensor*> devices_of(const std::vector<HalfInput>& x) {
  std::vector<const Tensor*> p;
  for (const HalfInput& in : x) p.push_back(&in.device);
  return p;
}

std::vector<const double*> exact_of(const std::vector<HalfInput>& x) {
  std::vector<const double*> p;
  for (const HalfInput& in : x) p.push_back(in.exact.data());
  return p;
}

// Sum with coefficients: each launch (8 inputs) rounds y once, and its float products and sums
// err by K 2^-24 of sum |c_j x_j| (cancellation makes that bound, not |y|, the one that holds).
::testing::AssertionResult sum_within(const std::vector<double>& out,
                                      const std::vector<double>& ref,
                                      const std::vector<HalfInput>& x,
                                      const std::vector<float>& coeff, DType dtype) {
  const int K = int(x.size());
  const int launches = (K + cuda::kMaxInputsPerLaunch - 1) / cuda::kMaxInputsPerLaunch;
  for (size_t e = 0; e < out.size(); ++e) {
    double magnitude = 0;
    for (int j = 0; j < K; ++j)
      magnitude += std::fabs(double(coeff[size_t(j)]) * x[size_t(j)].exact[e]);
    const double bound =
        testing::unit_roundoff(dtype) * std::fabs(ref[e]) +
        ((launches - 1) * testing::unit_roundoff(dtype) + K * kFloatUlp) * magnitude +
        testing::subnormal_error(dtype) * launches;
    if (!(std::fabs(out[e] - ref[e]) <= bound)) {
      return ::testing::AssertionFailure() << "element " << e << ": " << out[e] << " vs " << ref[e];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(HalfEltwiseCuda, SumProdMaxAndTheirBackward) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : kHalves) {
    for (int K : {1, 2, 3, 9}) {
      for (int64_t n : {1, 7, 1023, 4099}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " K=" + std::to_string(K) +
                     " n=" + std::to_string(n));
        Random rng(static_cast<uint64_t>(n * 10 + K));
        std::vector<HalfInput> x;
        std::vector<float> coeff;
        for (int j = 0; j < K; ++j) {
          x.push_back(half_input(ctx, rng, {n}, dtype, -2.0, 2.0));
          coeff.push_back(j % 3 == 0 ? 1.0f : (j % 3 == 1 ? -0.75f : 0.3f));
        }
        const HalfInput dy = half_input(ctx, rng, {n}, dtype);
        const std::vector<const Tensor*> xs = devices_of(x);
        const std::vector<const double*> xd = exact_of(x);
        const size_t count = static_cast<size_t>(n);

        Tensor y = testing::poisoned_as(ctx, {n}, dtype);
        eltwise_sum(ctx, xs, coeff, y);
        std::vector<double> ref(count), cd(coeff.begin(), coeff.end());
        ref::eltwise_sum(n, K, xd.data(), cd.data(), ref.data());
        EXPECT_TRUE(sum_within(widened(ctx, y), ref, x, coeff, dtype));

        // Products do not cancel: each float multiply adds 2^-24 relative. Where more than
        // kMaxInputsPerLaunch inputs take several launches, each partial product is rounded to
        // the dtype once more; a partial below the normal range (f16's subnormals: nine factors
        // in [-2, 2] reach them) errs by up to half the subnormal step, and the factors after it
        // (each at most 2, dy at most 1) scale that error.
        double partial_slack = 0;
        for (int b = cuda::kMaxInputsPerLaunch; b < K; b += cuda::kMaxInputsPerLaunch) {
          partial_slack += testing::subnormal_error(dtype) * std::ldexp(1.0, K - b);
        }
        const double prod_extra =
            ((K - 1) / cuda::kMaxInputsPerLaunch) * testing::unit_roundoff(dtype) + K * kFloatUlp;
        eltwise_prod(ctx, xs, y);
        ref::eltwise_prod(n, K, xd.data(), ref.data());
        EXPECT_TRUE(within_one_rounding(widened(ctx, y), ref, dtype, prod_extra, partial_slack));
        Tensor dx = testing::poisoned_as(ctx, {n}, dtype);
        eltwise_prod_backward(ctx, xs, K - 1, dy.device, dx);
        ref::eltwise_prod_backward(n, K, xd.data(), K - 1, dy.exact.data(), ref.data());
        EXPECT_TRUE(within_one_rounding(widened(ctx, dx), ref, dtype, prod_extra, partial_slack));

        // Max: one of the inputs, and its index: exact.
        Tensor argmax = testing::poisoned_as(ctx, {n}, dtype);
        eltwise_max(ctx, xs, y, argmax);
        std::vector<double> arg_ref(count);
        ref::eltwise_max(n, K, xd.data(), ref.data(), arg_ref.data());
        EXPECT_EQ(widened(ctx, y), ref);
        EXPECT_EQ(widened(ctx, argmax), arg_ref);
        eltwise_max_backward(ctx, dy.device, argmax, K - 1, dx);
        ref::eltwise_max_backward(n, K - 1, dy.exact.data(), arg_ref.data(), ref.data());
        EXPECT_EQ(widened(ctx, dx), ref);
      }
    }
  }
}

// The BLAS-1 maps: positive inputs, so that the float sums do not cancel and the error is relative:
// one rounding of the output plus one 2^-24 per float operation.
TEST(HalfMapsCuda, FillScaleAxpyAxpbyAdd) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : kHalves) {
    for (int64_t n : {1, 7, 1023, 4099}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      Random rng(static_cast<uint64_t>(n) + 3);
      const HalfInput x = half_input(ctx, rng, {n}, dtype, 0.5, 1.5);
      const HalfInput y = half_input(ctx, rng, {n}, dtype, 0.5, 1.5);
      const size_t count = static_cast<size_t>(n);
      std::vector<double> ref(count);

      Tensor t = testing::poisoned_as(ctx, {n}, dtype);
      fill(ctx, t, 0.3f);
      EXPECT_TRUE(within_one_rounding(widened(ctx, t), std::vector<double>(count, 0.3f), dtype));

      t = testing::device_copy(ctx, x.host);
      scale(ctx, -1.5f, t);
      for (size_t e = 0; e < count; ++e) ref[e] = -1.5 * x.exact[e];
      EXPECT_TRUE(within_one_rounding(widened(ctx, t), ref, dtype, kFloatUlp));

      t = testing::device_copy(ctx, y.host);
      axpy(ctx, 0.25f, x.device, t);
      for (size_t e = 0; e < count; ++e) ref[e] = 0.25 * x.exact[e] + y.exact[e];
      EXPECT_TRUE(within_one_rounding(widened(ctx, t), ref, dtype, 2 * kFloatUlp));

      t = testing::device_copy(ctx, y.host);
      axpby(ctx, 0.25f, x.device, 0.5f, t);
      for (size_t e = 0; e < count; ++e) ref[e] = 0.25 * x.exact[e] + 0.5 * y.exact[e];
      EXPECT_TRUE(within_one_rounding(widened(ctx, t), ref, dtype, 3 * kFloatUlp));

      t = testing::poisoned_as(ctx, {n}, dtype);
      add(ctx, x.device, y.device, t);
      for (size_t e = 0; e < count; ++e) ref[e] = x.exact[e] + y.exact[e];
      EXPECT_TRUE(within_one_rounding(widened(ctx, t), ref, dtype, kFloatUlp));
    }
  }
}

// An input one element past 16 bytes: the kernels fall back to one element per thread.
TEST(HalfEltwiseCuda, MisalignedInputs) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t n = 1031;
  Random rng(4);
  const HalfInput a = half_input(ctx, rng, {n}, DType::f16),
                  b = half_input(ctx, rng, {n}, DType::f16);
  const f16_t* x[] = {a.device.data<f16_t>() + 1, b.device.data<f16_t>()};
  const float coeff[] = {1.0f, 1.0f};
  Tensor y = testing::poisoned_as(ctx, {n}, DType::f16);
  cuda::eltwise_sum(n - 1, 2, x, coeff, y.data<f16_t>(), ctx.stream());
  const std::vector<double> yv = widened(ctx, y);
  for (int64_t e = 0; e + 1 < n; ++e) {
    const double want = a.exact[size_t(e + 1)] + b.exact[size_t(e)];
    EXPECT_LE(std::fabs(yv[size_t(e)] - want),
              testing::unit_roundoff(DType::f16) * std::fabs(want) + kFloatUlp * 4 +
                  testing::subnormal_error(DType::f16))
        << e;
  }
  EXPECT_TRUE(std::isnan(yv[size_t(n - 1)]));  // not written
}

const Pool2dGeometry kGeometries[] = {
    testing::geometry(1, 3, 7, 9, 3, 2, 1, false),    // odd H and W, padding, overlapping
    testing::geometry(2, 3, 5, 5, 2, 2, 0, true),     // ceil mode: partial last windows
    testing::geometry(1, 5, 13, 11, 3, 1, 1, false),  // stride 1: nine windows per element
    testing::geometry(3, 2, 8, 8, 2, 3, 0, false),    // gaps between windows
    testing::geometry(2, 3, 7, 7, 7, 1, 0, false),    // global
};

TEST(HalfPoolingCuda, MaxIsExactAverageWithinOneRounding) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : kHalves) {
    for (const Pool2dGeometry& g : kGeometries) {
      for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
        const bool max = mode == PoolMode::max;
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + testing::describe(g) +
                     (max ? " max" : " average"));
        const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
        Random rng(static_cast<uint64_t>(g.H * 100 + g.W));
        // Positive values: the float sums of the average (and of max's overlapping gradients)
        // do not cancel, so their error is relative: one 2^-24 per addition and the division.
        const HalfInput x = half_input(ctx, rng, xs, dtype, max ? -1.0 : 0.5, 1.5);
        const HalfInput dy = half_input(ctx, rng, ys, dtype, 0.5, 1.5);
        Tensor y = testing::poisoned_as(ctx, ys, dtype), dx = testing::poisoned_as(ctx, xs, dtype);
        Tensor argmax = testing::poisoned_as(ctx, ys, DType::f32);
        pool2d_forward(ctx, g, mode, x.device, y, max ? &argmax : nullptr);
        pool2d_backward(ctx, g, mode, dy.device, max ? &argmax : nullptr, dx);

        std::vector<double> y_ref(static_cast<size_t>(shape_numel(ys)));
        std::vector<double> arg_ref(y_ref.size()), dx_ref(static_cast<size_t>(shape_numel(xs)));
        ref::pool2d_forward(g, mode, x.exact.data(), y_ref.data(), max ? arg_ref.data() : nullptr);
        ref::pool2d_backward(g, mode, dy.exact.data(), max ? arg_ref.data() : nullptr,
                             dx_ref.data());
        // Every input element is in at most ceil(k / s)^2 windows.
        const int64_t per_axis = (g.kernel_h + g.stride_h - 1) / g.stride_h;
        const double sums = double(per_axis * per_axis) + double(g.kernel_h * g.kernel_w);
        if (max) {
          EXPECT_EQ(widened(ctx, y), y_ref);
          EXPECT_EQ(widened(ctx, argmax), arg_ref);
          EXPECT_TRUE(within_one_rounding(widened(ctx, dx), dx_ref, dtype, sums * kFloatUlp));
        } else {
          EXPECT_TRUE(within_one_rounding(widened(ctx, y), y_ref, dtype, sums * kFloatUlp));
          EXPECT_TRUE(within_one_rounding(widened(ctx, dx), dx_ref, dtype, 2 * sums * kFloatUlp));
        }
      }
    }
  }
}

struct Parts {
  int64_t outer, inner;
  std::vector<int64_t> extents;
};

// Copies: the GPU's bf16 / f16 concat and slice are the CPU's f32 ones on the widened values,
// narrowed back (exact: they were bf16 / f16 values), bit for bit. Rows of 8 elements (16-byte
// units), of odd lengths (2-byte units), more parts than one launch.
TEST(HalfConcatCuda, ConcatAndSliceAreExactCopies) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  const Parts cases[] = {
      {1, 1, {1}},    {2, 8, {1, 2}}, {3, 49, {4, 1, 2}}, {1, 56, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}},
      {2, 7, {3, 5}},
  };
  for (DType dtype : kHalves) {
    for (const Parts& c : cases) {
      int64_t K = 0;
      for (int64_t e : c.extents) K += e;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " outer=" + std::to_string(c.outer) +
                   " inner=" + std::to_string(c.inner) +
                   " parts=" + std::to_string(c.extents.size()));
      Random rng(static_cast<uint64_t>(K * 7 + c.inner));
      std::vector<HalfInput> parts;
      std::vector<Tensor> parts_f32;
      for (int64_t e : c.extents) {
        parts.push_back(half_input(ctx, rng, {c.outer, e, c.inner}, dtype));
        parts_f32.push_back(testing::host_as(parts.back().host, DType::f32));
      }
      std::vector<const Tensor*> device_parts = devices_of(parts), cpu_parts;
      for (const Tensor& t : parts_f32) cpu_parts.push_back(&t);
      Tensor whole = testing::poisoned_as(ctx, {c.outer, K, c.inner}, dtype);
      concat(ctx, device_parts, 1, whole);
      Tensor whole_f32({c.outer, K, c.inner}, DType::f32);
      concat(cpu, cpu_parts, 1, whole_f32);
      const Tensor want = testing::host_as(whole_f32, dtype);
      ctx.synchronize();
      Tensor got(want.shape(), dtype);
      got.copy_from(whole);
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);

      std::vector<Tensor> back;
      std::vector<Tensor*> back_ptrs;
      for (int64_t e : c.extents)
        back.push_back(testing::poisoned_as(ctx, {c.outer, e, c.inner}, dtype));
      for (Tensor& t : back) back_ptrs.push_back(&t);
      slice(ctx, whole, 1, c.extents, back_ptrs);
      for (size_t p = 0; p < back.size(); ++p) {
        ctx.synchronize();
        Tensor part(back[p].shape(), dtype);
        part.copy_from(back[p]);
        EXPECT_EQ(std::memcmp(part.raw(), parts[p].host.raw(), part.nbytes()), 0) << "part " << p;
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
