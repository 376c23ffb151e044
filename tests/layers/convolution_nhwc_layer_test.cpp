// The Convolution layer on channels-last bottoms on the CPU (layers/convolution_base.h, "The
// weights the kernels read"): what it runs (runs()), numerical gradient checks in f64 nhwc for
// the awkward options, f32 nhwc against f32 nchw on the same values (tops, bottom and parameter
// gradients, gradients accumulated onto what was there, frozen parameters), the master weight
// kept f32 KCRS, and the errors for what the CPU does not run.
//
// A harness builds the layer on nchw bottoms; relabelling its blobs nhwc and reshaping gives the
// layer channels-last bottoms as the Net's precision pass does (the layer makes its compute copy
// at reshape). Values are set in memory order, so an nhwc bottom holds other values at each
// logical index than an nchw one: the comparisons transpose (kernels::convert).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/layout/layout.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_checks.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

// The harness's bottoms and tops (values and gradients) labelled nhwc, then reshaped.
void make_nhwc(LayerHarness& h) {
  for (Blob* b : h.bottom) {
    b->value.set_layout(Layout::nhwc);
    b->grad.set_layout(Layout::nhwc);
  }
  for (Blob* t : h.top) {
    t->value.set_layout(Layout::nhwc);
    t->grad.set_layout(Layout::nhwc);
  }
  h.layer->reshape(h.bottom, h.top, h.ctx);
  for (Blob* t : h.top) t->grad.reshape(t->value.shape());
}

// `t` (any layout) as f32 values in nchw order.
std::vector<float> nchw_values(Context& ctx, const Tensor& t) {
  Tensor out = ctx.empty(t.shape(), DType::f32);
  kernels::convert(ctx, t, out);
  return out.to_vector();
}
// `values` in nchw order stored into `t` in its layout.
void set_nchw_values(Context& ctx, Tensor& t, const std::vector<float>& values) {
  const Tensor from = Tensor::from_vector(t.shape(), values);
  kernels::convert(ctx, from, t);
}

TEST(ConvolutionNhwcLayer, RunsWhatItsKernelsRun) {
  Context ctx;
  LayerHarness h("{name: c, type: Convolution, num_output: 2, kernel_size: 1}", {{1, 1, 2, 2}},
                 ctx);
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    EXPECT_TRUE(h.layer->runs(DType::f32, layout, cpu));
    EXPECT_TRUE(h.layer->runs(DType::f64, layout, cpu));
    EXPECT_TRUE(h.layer->runs(DType::f32, layout, gpu));
    EXPECT_FALSE(h.layer->runs(DType::f64, layout, gpu));
    EXPECT_FALSE(h.layer->runs(DType::bf16, layout, cpu));
    EXPECT_FALSE(h.layer->runs(DType::f16, layout, cpu));
  }
  EXPECT_TRUE(h.layer->runs(DType::bf16, Layout::nhwc, gpu));
  EXPECT_TRUE(h.layer->runs(DType::f16, Layout::nhwc, gpu));
  EXPECT_FALSE(h.layer->runs(DType::bf16, Layout::nchw, gpu));
  EXPECT_FALSE(h.layer->runs(DType::f16, Layout::nchw, gpu));
  // Deconvolution keeps the default: f32 and f64 in nchw.
  LayerHarness d("{name: d, type: Deconvolution, num_output: 2, kernel_size: 1}", {{1, 1, 2, 2}},
                 ctx);
  EXPECT_FALSE(d.layer->runs(DType::f32, Layout::nhwc, cpu));
  EXPECT_FALSE(d.layer->runs(DType::bf16, Layout::nhwc, gpu));
}

// Central differences in f64 through the compute copy and the gradient scratch: the bottom in
// nhwc, the master weight KCRS.
TEST(ConvolutionNhwcLayer, GradientEveryOptionInNhwc) {
  const std::string head = "{name: c, type: Convolution, ";
  const std::string uniform_bias = "bias_filler: {type: uniform, min: -1, max: 1}";
  const std::vector<GradientCase> cases = {
      {"num_output: 3, kernel_size: 3, stride: 2, pad: 1, " + uniform_bias, {2, 2, 5, 6}},
      {"num_output: 4, kernel_size: 2, dilation: 2, group: 2, bias_term: false,"
       " weight_filler: {type: gaussian, std: 0.5}",
       {1, 4, 5, 5}},
      {"num_output: 3, kernel_size: [3, 2], stride: [2, 1], pad: [1, 2], " + uniform_bias,
       {2, 5, 6, 5}},
      {"num_output: 3, kernel_size: 3, group: 3, stride: 2, pad: 1, " + uniform_bias, {2, 3, 5, 6}},
      {"num_output: 4, kernel_size: 1, group: 2, " + uniform_bias, {3, 6, 3, 5}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string yaml = head + cases[i].keys + "}";
    SCOPED_TRACE(yaml);
    Context ctx;
    LayerHarness h(yaml, {cases[i].x}, ctx, 1, Phase::train, DType::f64);
    make_nhwc(h);
    h.set_bottom(0, random_input(cases[i].x, i + 1));
    check_gradients(h);
  }
}

// f32 nhwc against f32 nchw on the same logical values: the CPU's nhwc path is the nchw path
// between transposes (float sums in the same order), and the filter gradient goes through the
// scratch; within 1e-6 (relative norm: the bias gradient sums in another order).
void check_against_nchw(const std::string& yaml, const Shape& x, float start_grad) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness a(yaml, {x}, ctx), b(yaml, {x}, ctx);
  make_nhwc(b);
  for (size_t i = 0; i < a.layer->params().size(); ++i) {
    b.layer->params()[i].value.copy_from(a.layer->params()[i].value);
  }
  const std::vector<float> input = random_input(x, 3);
  a.set_bottom(0, input);
  set_nchw_values(ctx, b.bottom[0]->value, input);
  a.forward();
  b.forward();
  EXPECT_LE(relative_error(nchw_values(ctx, b.top[0]->value), a.top[0]->value.to_vector()), 1e-6);
  const Shape& y = a.top[0]->value.shape();
  const std::vector<float> dy = random_input(y, 4);
  a.top[0]->grad.copy_from(Tensor::from_vector(y, dy));
  set_nchw_values(ctx, b.top[0]->grad, dy);
  for (LayerHarness* h : {&a, &b}) {
    for (Param& p : h->layer->params()) p.grad.fill(start_grad);
    h->layer->backward(h->top, {true}, h->bottom, ctx);
  }
  EXPECT_LE(relative_error(nchw_values(ctx, b.bottom[0]->grad), a.bottom[0]->grad.to_vector()),
            1e-6);
  for (size_t i = 0; i < a.layer->params().size(); ++i) {
    const Param& p = b.layer->params()[i];
    EXPECT_EQ(p.value.layout(), Layout::nchw) << "the master stays KCRS";
    EXPECT_EQ(p.grad.layout(), Layout::nchw);
    const std::vector<float> got = p.grad.to_vector();
    const std::vector<float> want = a.layer->params()[i].grad.to_vector();
    if (p.frozen()) {
      for (float v : got) ASSERT_EQ(v, start_grad) << p.name << ": a frozen gradient was written";
    } else {
      EXPECT_LE(relative_error(got, want), 1e-6) << p.name;
    }
  }
}

TEST(ConvolutionNhwcLayer, F32MatchesNchw) {
  const std::string head = "{name: c, type: Convolution, ";
  check_against_nchw(head + "num_output: 5, kernel_size: 3, stride: 2, pad: 1}", {2, 3, 7, 6},
                     0.0f);
  check_against_nchw(head + "num_output: 6, kernel_size: [3, 2], dilation: [1, 2], group: 3}",
                     {1, 9, 8, 7}, 0.0f);
  // Gradients accumulate onto what was there (micro-batches add up).
  check_against_nchw(head + "num_output: 4, kernel_size: 1}", {3, 5, 4, 5}, 0.5f);
  check_against_nchw(head + "num_output: 4, kernel_size: 3, pad: 1, param: {weight: {lr_mult: 0}}}",
                     {2, 3, 5, 4}, 7.0f);
  check_against_nchw(head + "num_output: 4, kernel_size: 3, pad: 1, param: {bias: {lr_mult: 0}}}",
                     {2, 3, 5, 4}, 7.0f);
}

TEST(ConvolutionNhwcLayer, WhatTheCpuDoesNotRunIsNamed) {
  const std::string yaml = "{name: c, type: Convolution, num_output: 4, kernel_size: 3}";
  Context ctx;
  // A 16-bit bottom: the CPU has no 16-bit convolution.
  LayerHarness h(yaml, {{1, 2, 5, 5}}, ctx);
  for (Blob* b : h.bottom) {
    b->value = ctx.empty(b->value.shape(), DType::bf16);
    b->grad = ctx.empty(b->grad.shape(), DType::bf16);
  }
  h.top[0]->value = ctx.empty(h.top[0]->value.shape(), DType::bf16);
  make_nhwc(h);
  EXPECT_CONTAINS(error_of([&] { h.forward(); }),
                  "conv2d_forward: no implementation for bf16 nhwc on cpu");
  // A top stored otherwise than the bottom (the Net makes tops in the bottom's format).
  LayerHarness m(yaml, {{1, 2, 5, 5}}, ctx);
  m.bottom[0]->value.set_layout(Layout::nhwc);
  m.layer->reshape(m.bottom, m.top, ctx);
  EXPECT_CONTAINS(error_of([&] { m.forward(); }),
                  "conv2d_forward: y is nchw (f32[1, 4, 3, 3] on cpu), expected nhwc as x is");
}

}  // namespace
}  // namespace crema::testing
