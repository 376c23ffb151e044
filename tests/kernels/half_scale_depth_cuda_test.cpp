// LayerScale's kernels (scale_forward, channel_reduce) and stochastic depth in bf16 and f16 on
// CUDA, nchw and nhwc: against ref<double> on the same exactly representable inputs, on awkward
// shapes (N = 1, C = 3, 13, 96, 768, odd H and W, planes of 320 and 323), outputs poisoned first.
//
// Tolerances (half_test_util.h): scale_forward computes x * s + b in float (two roundings of
// 2^-24) and rounds once to T: within u(T) |ref| + 2^-23 (|x s| + |b|). channel_reduce sums in
// double into float32 out: within 1e-6 relative (norm-wise). Stochastic depth scales in float and
// rounds once: the CPU's float32 result rounded to T, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dropout/dropout.h"
#include "kernels/layout/layout.h"
#include "kernels/scale/scale.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::half_input;
using testing::HalfInput;
using testing::host_values;
using testing::widened;

// A device copy of `in` stored as `layout` (in.exact stays in nchw order).
Tensor stored_as(Context& ctx, const HalfInput& in, Layout layout) {
  if (layout == Layout::nchw || in.device.ndim() != 4) return in.device;
  Tensor t = ctx.empty(in.device.shape(), in.device.dtype());
  t.set_layout(layout);
  convert(ctx, in.device, t);
  return t;
}

// `t` (any layout) in nchw order, widened.
std::vector<double> nchw_values(Context& ctx, const Tensor& t) {
  if (t.ndim() != 4 || t.layout() == Layout::nchw) return widened(ctx, t);
  Tensor back = ctx.empty(t.shape(), t.dtype());
  convert(ctx, t, back);
  return widened(ctx, back);
}

TEST(HalfScaleCuda, PerChannelScaleAndItsSums) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // The last two reach channel_reduce's planes (inner >= 256) on nchw: 16-byte loads of 8 halves
  // (inner 320) and halves one by one (inner 323).
  const std::vector<Shape> shapes = {{1, 3, 5, 7},   {2, 13, 3, 3},  {4, 96, 7, 9},
                                     {1, 768, 3, 5}, {2, 5, 16, 20}, {1, 3, 17, 19}};
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (const Shape& shape : shapes) {
      for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(shape) + " " +
                     layout_name(layout));
        const int64_t C = shape[1], inner = shape[2] * shape[3];
        Random rng(uint64_t(C * 10 + shape[0]));
        const HalfInput x = half_input(ctx, rng, shape, dtype, -2.0, 2.0);
        const HalfInput dy = half_input(ctx, rng, shape, dtype, -1.0, 1.0);
        const Tensor s = testing::random_tensor(rng, {C}, 0.5, 1.5);
        const Tensor b = testing::random_tensor(rng, {C});
        const std::vector<double> sd = testing::to_double(s), bd = testing::to_double(b);
        std::vector<double> y_ref(x.exact.size()), dw_ref(static_cast<size_t>(C)),
            db_ref(static_cast<size_t>(C));
        ref::scale_forward(shape[0], C, inner, x.exact.data(), sd.data(), bd.data(), y_ref.data());
        ref::channel_reduce(shape[0], C, inner, dy.exact.data(), x.exact.data(), false,
                            dw_ref.data());
        ref::channel_reduce<double>(shape[0], C, inner, dy.exact.data(), nullptr, false,
                                    db_ref.data());
        const Tensor xs = stored_as(ctx, x, layout), dys = stored_as(ctx, dy, layout);
        const Tensor sg = testing::to_device(ctx, s), bg = testing::to_device(ctx, b);
        Tensor y = testing::poisoned_as(ctx, shape, dtype);
        y.set_layout(layout);
        scale_forward(ctx, xs, &sg, &bg, 1, 1, y);
        const std::vector<double> got = nchw_values(ctx, y);
        double magnitude = 0;
        for (size_t e = 0; e < got.size(); ++e) {
          const size_t c = size_t((int64_t(e) / inner) % C);
          magnitude = std::max(magnitude, std::fabs(x.exact[e] * sd[c]) + std::fabs(bd[c]));
        }
        EXPECT_TRUE(
            testing::within_one_rounding(got, y_ref, dtype, 0.0, std::ldexp(1.0, -23) * magnitude));
        Tensor dw = testing::poisoned_device(ctx, {C}), db = testing::poisoned_device(ctx, {C});
        channel_reduce(ctx, dys, &xs, 1, 1, false, dw);
        channel_reduce(ctx, dys, nullptr, 1, 1, false, db);
        EXPECT_LT(testing::rel_error(host_values(ctx, dw), dw_ref), 1e-6);
        EXPECT_LT(testing::rel_error(host_values(ctx, db), db_ref), 1e-6);
      }
    }
  }
}

// Squeeze-excitation's gate: x [N, C, H, W] scaled by gate [N, C] (axis 0, two axes), the
// gate's gradient sum_hw dy x written in the gate's dtype (one rounding of a double sum), in nchw
// (C' = N C channels of H W) and nhwc (N entries of H W rows of C).
TEST(HalfScaleCuda, SqueezeExcitationGate) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (const Shape& shape : std::vector<Shape>{{2, 32, 17, 19}, {3, 13, 5, 7}, {1, 96, 4, 4}}) {
      for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(shape) + " " +
                     layout_name(layout));
        const int64_t NC = shape[0] * shape[1], HW = shape[2] * shape[3];
        Random rng(uint64_t(NC + HW));
        const HalfInput x = half_input(ctx, rng, shape, dtype, -2.0, 2.0);
        const HalfInput dy = half_input(ctx, rng, shape, dtype, -1.0, 1.0);
        const HalfInput gate = half_input(ctx, rng, {shape[0], shape[1]}, dtype, 0.0, 1.0);
        std::vector<double> y_ref(x.exact.size()), dx_ref(x.exact.size());
        std::vector<double> dgate_ref(static_cast<size_t>(NC));
        ref::scale_forward<double>(1, NC, HW, x.exact.data(), gate.exact.data(), nullptr,
                                   y_ref.data());
        ref::scale_forward<double>(1, NC, HW, dy.exact.data(), gate.exact.data(), nullptr,
                                   dx_ref.data());
        ref::channel_reduce(1, NC, HW, dy.exact.data(), x.exact.data(), false, dgate_ref.data());
        const Tensor xs = stored_as(ctx, x, layout), dys = stored_as(ctx, dy, layout);
        Tensor y = testing::poisoned_as(ctx, shape, dtype),
               dx = testing::poisoned_as(ctx, shape, dtype);
        y.set_layout(layout);
        dx.set_layout(layout);
        Tensor dgate = testing::poisoned_as(ctx, {shape[0], shape[1]}, dtype);
        scale_forward(ctx, xs, &gate.device, nullptr, 0, 2, y);
        scale_forward(ctx, dys, &gate.device, nullptr, 0, 2, dx);
        channel_reduce(ctx, dys, &xs, 0, 2, false, dgate);
        // x g and dy g: one float product (exact for these 8- and 11-bit inputs), one rounding.
        EXPECT_TRUE(testing::within_one_rounding(nchw_values(ctx, y), y_ref, dtype));
        EXPECT_TRUE(testing::within_one_rounding(nchw_values(ctx, dx), dx_ref, dtype));
        EXPECT_TRUE(testing::within_one_rounding(widened(ctx, dgate), dgate_ref, dtype, 1e-6));
      }
    }
  }
}

TEST(HalfStochasticDepthCuda, TheCpusFloatResultRoundedOnce) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  const uint64_t seed = 0xbeefULL;
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (const auto& [rows, row_size] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {3, 7}, {5, 16}, {64, 96 * 7 * 7}, {37, 1001}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(rows) + "x" +
                   std::to_string(row_size));
      Random rng(uint64_t(rows * 3 + row_size));
      const HalfInput x = half_input(ctx, rng, {rows, row_size}, dtype, -2.0, 2.0);
      Tensor step = dropout_step_counter(ctx), cpu_step = dropout_step_counter(cpu);
      Tensor y = testing::poisoned_as(ctx, {rows, row_size}, dtype);
      stochastic_depth_forward(ctx, x.device, y, 0.5f, seed, step);
      const Tensor wide = testing::host_as(x.host, DType::f32);
      Tensor want_f32({rows, row_size});
      stochastic_depth_forward(cpu, wide, want_f32, 0.5f, seed, cpu_step);
      const std::vector<double> want = widened(cpu, testing::host_as(want_f32, dtype));
      EXPECT_EQ(widened(ctx, y), want);
      // The backward applies the same mask: in place on dy.
      Tensor g = testing::device_copy(ctx, x.host);
      stochastic_depth_backward(ctx, g, g, 0.5f, seed, step);
      EXPECT_EQ(widened(ctx, g), want);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
