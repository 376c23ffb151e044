// Global pooling on CUDA (cuda::global_pool_forward, what pool2d_forward runs for a whole-plane
// window of at least kGlobalReductionPixels): against ref<double> on awkward shapes -- N = 1,
// C = 3, 13, 32, 96, 768, odd H and W, planes split over many blocks and over one -- in f32,
// bf16 and f16, nchw and nhwc, max and average; ties and NaN pick the reference's argmax;
// misaligned channels-last pointers take the scalar path; repeats give the same bits.
//
// Tolerances: max is exact (y and argmax equal the reference's). Average: the float sum of HW
// exactly representable values, then one division and one rounding to T: within
// u(T) |ref| + HW 2^-24 sum |x| / HW (f32: u = 2^-24; bf16 2^-8; f16 2^-11; half_test_util.h),
// the inputs positive so that the bound is relative.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/layout/layout.h"
#include "kernels/pooling/pooling.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::widened;

const double kFloatUlp = std::ldexp(1.0, -24);

Pool2dGeometry global_geometry(int64_t N, int64_t C, int64_t H, int64_t W) {
  return {N, C, H, W, H, W, 1, 1, 0, 0, 1, 1};
}

// x (exact values, nchw order) stored as `layout` in `dtype` on the device.
Tensor stored(Context& ctx, const Tensor& host_nchw, DType dtype, Layout layout) {
  const Tensor nchw = testing::device_copy(ctx, testing::host_as(host_nchw, dtype));
  if (layout == Layout::nchw) return nchw;
  Tensor t = ctx.empty(host_nchw.shape(), dtype);
  t.set_layout(layout);
  convert(ctx, nchw, t);
  return t;
}

struct Result {
  std::vector<double> y, argmax;
};

Result pool(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const Tensor& x, DType dtype,
            Layout layout) {
  Tensor y = testing::poisoned_as(ctx, {g.N, g.C, 1, 1}, dtype);
  Tensor argmax = testing::poisoned_as(ctx, {g.N, g.C, 1, 1}, DType::f32);
  y.set_layout(layout);
  argmax.set_layout(layout);
  pool2d_forward(ctx, g, mode, x, y, mode == PoolMode::max ? &argmax : nullptr);
  return {widened(ctx, y), mode == PoolMode::max ? widened(ctx, argmax) : std::vector<double>{}};
}

void check(Context& ctx, const Pool2dGeometry& g, DType dtype, Layout layout, PoolMode mode,
           const std::vector<float>& values) {
  const bool max = mode == PoolMode::max;
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + layout_name(layout) +
               (max ? " max " : " average ") + shape_str({g.N, g.C, g.H, g.W}));
  const Shape xs{g.N, g.C, g.H, g.W};
  const Tensor host = testing::host_as(Tensor::from_vector(xs, values), dtype);
  const std::vector<double> exact = widened(ctx, host);
  std::vector<double> y_ref(size_t(g.N * g.C)), arg_ref(y_ref.size());
  ref::pool2d_forward(g, mode, exact.data(), y_ref.data(), max ? arg_ref.data() : nullptr);
  const Tensor x = stored(ctx, host, dtype, layout);
  const Result got = pool(ctx, g, mode, x, dtype, layout);
  if (max) {
    for (size_t i = 0; i < y_ref.size(); ++i) {
      if (std::isnan(y_ref[i])) {
        EXPECT_TRUE(std::isnan(got.y[i])) << "output " << i;
      } else {
        EXPECT_EQ(got.y[i], y_ref[i]) << "output " << i;
      }
    }
    EXPECT_EQ(got.argmax, arg_ref);
  } else {
    const double HW = double(g.H * g.W);
    EXPECT_TRUE(testing::within_one_rounding(got.y, y_ref, dtype, HW * kFloatUlp));
  }
  const Result again = pool(ctx, g, mode, x, dtype, layout);  // the same bits
  EXPECT_TRUE(testing::same_bits({got.y.begin(), got.y.end()}, {again.y.begin(), again.y.end()}));
}

TEST(GlobalPoolingCuda, MatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Pool2dGeometry> cases = {
      global_geometry(1, 3, 17, 19),    global_geometry(2, 13, 16, 16),
      global_geometry(3, 32, 112, 112), global_geometry(1, 96, 23, 29),
      global_geometry(2, 768, 17, 17),  global_geometry(64, 8, 33, 31),
      global_geometry(1, 1, 1, 300),    global_geometry(5, 40, 56, 56)};
  uint64_t seed = 3;
  for (const Pool2dGeometry& g : cases) {
    Random rng(++seed);
    std::vector<float> values(size_t(g.N * g.C * g.H * g.W));
    for (float& v : values) v = float(rng.uniform(0.5, 1.5));
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
          check(ctx, g, dtype, layout, mode, values);
        }
      }
    }
  }
}

// Values from {0, 1, 2}: ties in every plane; then NaNs in some planes (the first NaN wins).
TEST(GlobalPoolingCuda, TiesAndNaNPickTheReferencesElement) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Pool2dGeometry g = global_geometry(2, 24, 37, 41);
  Random rng(11);
  std::vector<float> values(size_t(g.N * g.C * g.H * g.W));
  for (float& v : values) v = float(rng.below(3));
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    check(ctx, g, DType::f32, layout, PoolMode::max, values);
  }
  const int64_t plane = g.H * g.W;
  values[size_t(5 * plane + 700)] = std::nanf("");
  values[size_t(5 * plane + 1200)] = std::nanf("");
  values[size_t(30 * plane + 3)] = std::nanf("");
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      check(ctx, g, dtype, layout, PoolMode::max, values);
    }
  }
}

// Channels-last x one element past a 16-byte boundary: the scalar (one channel a thread) path.
TEST(GlobalPoolingCuda, MisalignedChannelsLast) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t N = 2, C = 16, HW = 400;
  Random rng(13);
  std::vector<float> values(size_t(N * HW * C + 1));
  for (float& v : values) v = float(rng.uniform(0.5, 1.5));
  const Tensor x = testing::to_device(ctx, {int64_t(values.size())}, values);
  const size_t bytes =
      cuda::global_pool_workspace_bytes<float>(N, C, HW, PoolMode::average, Layout::nhwc);
  Tensor workspace = ctx.empty({int64_t(bytes / sizeof(float)) + 1});
  Tensor y = testing::poisoned_device(ctx, {N * C});
  cuda::global_pool_forward(N, C, HW, PoolMode::average, x.data<float>() + 1, y.data<float>(),
                            nullptr, Layout::nhwc, workspace.raw(), ctx.stream());
  const std::vector<double> got = widened(ctx, y);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0;
      for (int64_t p = 0; p < HW; ++p) sum += values[size_t(1 + (n * HW + p) * C + c)];
      EXPECT_NEAR(got[size_t(n * C + c)], sum / double(HW), (HW + 1) * kFloatUlp * 1.5);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
