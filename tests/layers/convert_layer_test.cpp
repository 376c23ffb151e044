// The Convert layer (layers/convert.cpp) the Net inserts between formats: forward stores the
// bottom's values in the top's dtype and layout, backward is its adjoint. Convert is linear, so
// its gradient check is the adjoint identity <convert(u), v> = <u, convert_backward(v)> for random
// u, v (what central differences measure, without their truncation error), in f64 between layouts,
// and the rounding bound of a narrowing one in bf16.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/layout/layout.h"
#include "layers/register_layers.h"
#include "tests/layers/convert_rig.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

double dot(const Tensor& a, const Tensor& b) {
  const auto u = a.to_vector(), v = b.to_vector();
  double sum = 0;
  for (size_t i = 0; i < u.size(); ++i) sum += double(u[i]) * double(v[i]);
  return sum;
}

TEST(ConvertLayer, GradientIsTheAdjointOfForward) {
  Context ctx;
  const Shape shape{2, 5, 3, 7};
  for (Layout from : {Layout::nchw, Layout::nhwc}) {
    for (Layout to : {Layout::nchw, Layout::nhwc}) {
      ConvertRig rig(ctx, shape, DType::f64, from, DType::f64, to);
      EXPECT_EQ(rig.y.value.shape(), shape);
      EXPECT_EQ(rig.y.value.layout(), to);
      set_values(rig.x.value, random_values(size_t(shape_numel(shape)), -1, 1, 1));
      set_values(rig.y.grad, random_values(size_t(shape_numel(shape)), -1, 1, 2));
      rig.layer->forward({&rig.x}, {&rig.y}, ctx);
      rig.layer->backward({&rig.y}, {true}, {&rig.x}, ctx);
      const double lhs = dot(rig.y.value, rig.y.grad), rhs = dot(rig.x.value, rig.x.grad);
      EXPECT_NEAR(lhs, rhs, 1e-12 * std::fabs(lhs))
          << layout_name(from) << " -> " << layout_name(to);
      // And it is a permutation: backward of forward gives x back, exactly.
      Blob again = rig.x;
      again.grad = ctx.empty(shape, DType::f64);
      again.grad.set_layout(from);
      rig.y.grad.copy_from(rig.y.value);
      rig.layer->backward({&rig.y}, {true}, {&again}, ctx);
      EXPECT_EQ(again.grad.to_vector(), rig.x.value.to_vector());
    }
  }
}

TEST(ConvertLayer, GradientNarrowedToBf16IsWithinOneRounding) {
  Context ctx;
  const Shape shape{3, 4, 2, 5};
  ConvertRig rig(ctx, shape, DType::f32, Layout::nchw, DType::bf16, Layout::nhwc);
  set_values(rig.x.value, random_values(size_t(shape_numel(shape)), -3, 3, 3));
  rig.layer->forward({&rig.x}, {&rig.y}, ctx);
  // The top grad arrives in bf16; backward widens it exactly into the f32 bottom grad.
  Tensor g = Tensor::from_vector(shape, random_values(size_t(shape_numel(shape)), -1, 1, 4));
  Tensor gb(shape, DType::bf16);
  kernels::convert(ctx, g, gb);  // nchw values, stored nchw
  gb.set_layout(Layout::nchw);
  Tensor gy(shape, DType::bf16);
  gy.set_layout(Layout::nhwc);
  kernels::convert(ctx, gb, gy);
  rig.y.grad.copy_from(gy);
  rig.layer->backward({&rig.y}, {true}, {&rig.x}, ctx);
  const auto got = rig.x.grad.to_vector(), want = gb.to_vector();
  EXPECT_EQ(got, want);
  const auto x = rig.x.value.to_vector();
  Tensor yb(shape, DType::f32);
  kernels::convert(ctx, rig.y.value, yb);  // back to f32 nchw
  const auto y = yb.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;  // bf16: 8 bits
  }
}

}  // namespace
}  // namespace crema::testing
