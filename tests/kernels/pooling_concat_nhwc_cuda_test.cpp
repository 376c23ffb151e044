// Pooling and concat on CUDA in channels-last (nhwc), in f32, bf16 and f16, against the float64
// reference in nhwc on the same (exactly widened) inputs: max pooling and its argmax exactly (a
// comparison picks an input), its backward and average pooling within one rounding of the dtype
// plus their float sums' 2^-24 each (the bound of half_eltwise_pool_cuda_test.cpp); concat and
// slice bit for bit (copies). Geometries: pooling_test_util.h's nhwc_geometries().
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/concat/concat.h"
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

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};
const double kFloatUlp = std::ldexp(1.0, -24);

Tensor nhwc_output(Context& ctx, const Shape& shape, DType dtype) {
  Tensor t = testing::poisoned_as(ctx, shape, dtype);
  t.set_layout(Layout::nhwc);
  return t;
}

TEST(PoolingNhwcCuda, MatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : kDtypes) {
    for (Pool2dGeometry g : testing::nhwc_geometries()) {
      for (bool include_pad : {true, false}) {
        g.count_include_pad = include_pad;
        for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
          const bool max = mode == PoolMode::max;
          if (max && !include_pad) continue;  // max pooling has no divisor
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + testing::describe(g) +
                       (max           ? " max"
                        : include_pad ? " average"
                                      : " average without padding"));
          const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
          Random rng(uint64_t(g.C * 1000 + g.H * 10 + g.W));
          // Positive values for the sums: their error stays relative (see the header).
          HalfInput x = half_input(ctx, rng, xs, dtype, max ? -1.0 : 0.5, 1.5);
          HalfInput dy = half_input(ctx, rng, ys, dtype, 0.5, 1.5);
          x.device.set_layout(Layout::nhwc);
          dy.device.set_layout(Layout::nhwc);
          Tensor y = nhwc_output(ctx, ys, dtype), dx = nhwc_output(ctx, xs, dtype);
          Tensor argmax = nhwc_output(ctx, ys, DType::f32);
          pool2d_forward(ctx, g, mode, x.device, y, max ? &argmax : nullptr);
          pool2d_backward(ctx, g, mode, dy.device, max ? &argmax : nullptr, dx);

          std::vector<double> y_ref(size_t(shape_numel(ys))), arg_ref(y_ref.size());
          std::vector<double> dx_ref(size_t(shape_numel(xs)));
          ref::pool2d_forward(g, mode, x.exact.data(), y_ref.data(), max ? arg_ref.data() : nullptr,
                              Layout::nhwc);
          ref::pool2d_backward(g, mode, dy.exact.data(), max ? arg_ref.data() : nullptr,
                               dx_ref.data(), Layout::nhwc);
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
}

// Channels of nhwc parts side by side (rows of C_p per pixel; C_p of 8 halves are 16-byte units,
// odd C_p 2-byte ones), and along W; slicing gives the parts back. The CPU's f32 concat of the
// widened values is the oracle: copies, the same bits.
TEST(ConcatNhwcCuda, CopiesMatchTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  for (DType dtype : kDtypes) {
    for (const auto& [axis, extents] : std::vector<std::pair<int, std::vector<int64_t>>>{
             {1, {8, 16}}, {1, {3, 1, 5}}, {1, {64, 64, 64}}, {3, {2, 5}}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      Random rng(uint64_t(axis * 100 + extents.size()));
      Shape whole_shape = {2, 3, 5, 7};
      whole_shape[size_t(axis)] = 0;
      std::vector<HalfInput> parts;
      std::vector<Tensor> host_parts;
      for (int64_t e : extents) {
        Shape s = {2, 3, 5, 7};
        s[size_t(axis)] = e;
        whole_shape[size_t(axis)] += e;
        parts.push_back(half_input(ctx, rng, s, dtype));
        parts.back().device.set_layout(Layout::nhwc);
        host_parts.push_back(testing::host_as(parts.back().host, DType::f32));
        host_parts.back().set_layout(Layout::nhwc);
      }
      std::vector<const Tensor*> dev, host;
      for (size_t p = 0; p < parts.size(); ++p) {
        dev.push_back(&parts[p].device);
        host.push_back(&host_parts[p]);
      }
      Tensor whole = nhwc_output(ctx, whole_shape, dtype);
      Tensor want(whole_shape);
      want.set_layout(Layout::nhwc);
      concat(ctx, dev, axis, whole);
      concat(cpu, host, axis, want);
      const std::vector<float> w = want.to_vector();
      EXPECT_EQ(widened(ctx, whole), std::vector<double>(w.begin(), w.end()));
      std::vector<Tensor> back;
      for (const HalfInput& p : parts) back.push_back(nhwc_output(ctx, p.host.shape(), dtype));
      std::vector<Tensor*> out;
      for (Tensor& t : back) out.push_back(&t);
      slice(ctx, whole, axis, extents, out);
      for (size_t p = 0; p < parts.size(); ++p) EXPECT_EQ(widened(ctx, back[p]), parts[p].exact);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
