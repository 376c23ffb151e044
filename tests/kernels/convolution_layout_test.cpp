// The Tensor-level convolution on the CPU in both layouts (convolution.h, "Tensors"): f32 and f64
// nhwc tensors through conv2d_* (and conv_nd_* of rank 2, which views them) against the double
// reference on awkward geometries -- N = 1, odd H and W, C not a multiple of 8, stride 2,
// dilation, groups, depthwise, 1x1 -- with y and dx poisoned (written) and dw, db accumulated
// onto random values; the errors a wrong layout or dtype gets.
//
// Tolerance. f64 runs the reference itself: 1e-12 relative. f32 runs im2col + GEMM between
// transposes on float inputs (exact in double): each output is a float sum of n exactly
// representable-in-double products, so |got - want| <= (n + 1) u sum|terms| with u = 2^-24
// (each product and each addition rounds once), sum|terms| the same reference on |x| and |w|.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "tests/kernels/convolution_layout_test_util.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels::conv_test {
namespace {

using testing::error_of;

// A host tensor of `shape` in dtype (f32 or f64) and layout holding `values` (memory order).
Tensor tensor_of(const Shape& shape, DType dtype, Layout layout,
                 const std::vector<double>& values) {
  Tensor t(shape, dtype);
  t.set_layout(layout);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f64) {
      t.data<double>()[i] = values[i];
    } else {
      t.data<float>()[i] = float(values[i]);
    }
  }
  return t;
}
Tensor poisoned(const Shape& shape, DType dtype, Layout layout) {
  return tensor_of(shape, dtype, layout, std::vector<double>(size_t(shape_numel(shape)), NAN));
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::f64 ? t.data<double>()[i] : double(t.data<float>()[i]);
  }
  return v;
}

// 1e-12 relative in f64; (n + 1) u sum|terms| in f32 (the file's comment).
void expect_close(const std::string& what, const Tensor& got, const std::vector<double>& want,
                  const std::vector<double>& sum_abs, int64_t terms) {
  const bool f64 = got.dtype() == DType::f64;
  const double u = std::ldexp(1.0, -24);
  expect_within(what, values_of(got), want, [&](size_t i) {
    return f64 ? 1e-12 * (1.0 + sum_abs[i]) : double(terms + 1) * u * sum_abs[i];
  });
}

// The passes of one geometry in dtype and nhwc against the NHWC reference in double.
void check_nhwc_passes(const Conv2dGeometry& g, DType dtype, uint64_t seed) {
  SCOPED_TRACE(describe(g) + " " + dtype_name(dtype));
  Context ctx;
  const NhwcProblem p = nhwc_problem(g, seed, [](double v) { return v; });
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups, NPQ = g.N * g.P() * g.Q();
  const Layout nhwc = Layout::nhwc;
  const Tensor x = tensor_of(g.x_shape(), dtype, nhwc, p.x);
  const Tensor w = tensor_of(g.w_shape(), dtype, nhwc, p.w);
  const Tensor bias = tensor_of({g.K}, dtype, nhwc, p.bias);
  const Tensor dy = tensor_of(g.y_shape(), dtype, nhwc, p.dy);
  Tensor y = poisoned(g.y_shape(), dtype, nhwc), dx = poisoned(g.x_shape(), dtype, nhwc);
  Tensor dw = tensor_of(g.w_shape(), dtype, nhwc, p.dw0), db = tensor_of({g.K}, dtype, nhwc, p.db0);
  conv2d_forward(ctx, g, x, w, &bias, y);
  expect_close("y", y, p.y, p.y_abs, g.R * g.S * Cg + 1);
  conv2d_backward_data(ctx, g, dy, w, dx);
  expect_close("dx", dx, p.dx, p.dx_abs, g.R * g.S * Kg);
  conv2d_backward_weights(ctx, g, x, dy, dw, &db);
  expect_close("dw", dw, p.dw, p.dw_abs, NPQ + 1);
  expect_close("db", db, p.db, p.db_abs, NPQ + 1);
  // The bias alone and the filter alone accumulate the same sums.
  Tensor db2 = tensor_of({g.K}, dtype, nhwc, p.db0);
  conv2d_backward_bias(ctx, g, dy, db2);
  expect_close("db alone", db2, p.db, p.db_abs, NPQ + 1);
  Tensor dw2 = tensor_of(g.w_shape(), dtype, nhwc, p.dw0);
  conv2d_backward_filter(ctx, g, x, dy, dw2);
  expect_close("dw alone", dw2, p.dw, p.dw_abs, NPQ + 1);
}

TEST(ConvolutionLayout, NhwcF32MatchesTheDoubleReference) {
  uint64_t seed = 1;
  for (const Conv2dGeometry& g : layout_geometries()) check_nhwc_passes(g, DType::f32, seed++);
}

TEST(ConvolutionLayout, NhwcF64MatchesTheDoubleReference) {
  uint64_t seed = 11;
  for (const Conv2dGeometry& g : layout_geometries()) check_nhwc_passes(g, DType::f64, seed++);
}

// The N-d calls of rank 2 (what the layer calls) pass nhwc views on to the 2-D ones: the same
// bits as the 2-D call.
TEST(ConvolutionLayout, NdRankTwoKeepsTheLayout) {
  const Conv2dGeometry g = layout_geometries()[1];
  ConvNdGeometry nd;
  nd.rank = 2;
  nd.N = g.N;
  nd.C = g.C;
  nd.K = g.K;
  nd.groups = g.groups;
  nd.in = {g.H, g.W, 1};
  nd.kernel = {g.R, g.S, 1};
  nd.pad = {g.pad_h, g.pad_w, 0};
  nd.stride = {g.stride_h, g.stride_w, 1};
  nd.dilation = {g.dilation_h, g.dilation_w, 1};
  Context ctx;
  const NhwcProblem p = nhwc_problem(g, 5, [](double v) { return v; });
  const Tensor x = tensor_of(g.x_shape(), DType::f32, Layout::nhwc, p.x);
  const Tensor w = tensor_of(g.w_shape(), DType::f32, Layout::nhwc, p.w);
  Tensor y2 = poisoned(g.y_shape(), DType::f32, Layout::nhwc);
  Tensor ynd = poisoned(g.y_shape(), DType::f32, Layout::nhwc);
  conv2d_forward(ctx, g, x, w, nullptr, y2);
  conv_nd_forward(ctx, nd, x, w, nullptr, ynd);
  EXPECT_EQ(y2.to_vector(), ynd.to_vector());
}

TEST(ConvolutionLayout, MismatchedLayoutsAndDtypesAreNamed) {
  const Conv2dGeometry g{1, 4, 5, 5, 3, 3, 3, 1, 1};
  Context ctx;
  auto make = [](const Shape& shape, DType dtype, Layout layout) {
    return tensor_of(shape, dtype, layout, std::vector<double>(size_t(shape_numel(shape)), 0.0));
  };
  const Layout nchw = Layout::nchw, nhwc = Layout::nhwc;
  const Tensor x = make(g.x_shape(), DType::f32, nhwc);
  const Tensor w_nchw = make(g.w_shape(), DType::f32, nchw);
  const Tensor w = make(g.w_shape(), DType::f32, nhwc);
  Tensor y = make(g.y_shape(), DType::f32, nhwc), y_nchw = make(g.y_shape(), DType::f32, nchw);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x, w_nchw, nullptr, y); }),
                  "conv2d_forward: w is nchw (f32[3, 4, 3, 3] on cpu), expected nhwc as x is");
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x, w, nullptr, y_nchw); }),
                  "conv2d_forward: y is nchw");
  const Tensor bias64 = make({3}, DType::f64, nchw);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x, w, &bias64, y); }),
                  "conv2d_forward: bias is f64[3] on cpu, expected f32[3] on cpu");
  Tensor dw_nchw = make(g.w_shape(), DType::f32, nchw);
  EXPECT_CONTAINS(error_of([&] { conv2d_backward_filter(ctx, g, x, y, dw_nchw); }),
                  "conv2d_backward_filter: dw is nchw");
  // 16-bit tensors run on CUDA only, and only channels-last; their parameters are f32.
  Tensor x16(g.x_shape(), DType::bf16), w16(g.w_shape(), DType::bf16),
      y16(g.y_shape(), DType::bf16);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x16, w16, nullptr, y16); }),
                  "conv2d_forward: no implementation for bf16 nchw on cpu");
  for (Tensor* t : {&x16, &w16, &y16}) t->set_layout(nhwc);
  EXPECT_CONTAINS(error_of([&] { conv2d_forward(ctx, g, x16, w16, nullptr, y16); }),
                  "conv2d_forward: no implementation for bf16 nhwc on cpu");
  Tensor db16(Shape{3}, DType::bf16);
  EXPECT_CONTAINS(error_of([&] { conv2d_backward_bias(ctx, g, y16, db16); }),
                  "conv2d_backward_bias: db is bf16[3] on cpu, expected f32[3] on cpu");
}

}  // namespace
}  // namespace crema::kernels::conv_test
