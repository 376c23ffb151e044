// The memory-bound layers of a CNN in channels-last (nhwc) on the CPU: numerical gradient checks
// in float64 with every blob nhwc (BatchNorm, BatchNormReLU, Pooling, Concat), the nhwc layer's
// outputs and gradients equal to the nchw layer's at the same logical positions (float32), and
// the dtypes and layouts each layer says it runs (Layer::runs), per device.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/cast/cast.h"
#include "kernels/layout/layout.h"
#include "tests/kernels/layout_test_util.h"
#include "tests/support/layer_checks.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

using kernels::testing::in_layout;

// Distinct values spaced far more than the finite-difference step: no perturbation changes which
// element of a window is the maximum.
std::vector<float> spaced_values(size_t count, uint64_t seed) {
  std::vector<float> v(count);
  std::iota(v.begin(), v.end(), 0.0f);
  Random random(seed);
  for (size_t i = count; i > 1; --i) std::swap(v[i - 1], v[random.below(i)]);
  for (float& x : v) x = x * 0.1f - float(count) * 0.05f;
  return v;
}

// Parameters and running statistics that are neither the fillers' 1 and 0 nor each other.
void set_state(LayerHarness& h, uint64_t seed) {
  for (Param& p : h.layer->params()) {
    set_values(p.value, random_values(size_t(p.value.numel()), 0.5f, 1.5f, seed++));
  }
  const size_t C = size_t(h.layer->buffers()[0].value.numel());
  set_values(h.layer->buffers()[0].value, random_values(C, -0.5f, 0.5f, seed++));
  set_values(h.layer->buffers()[1].value, random_values(C, 0.5f, 2.0f, seed++));
}

// `yaml` on `bottoms`, every blob nhwc and float64, checked against central differences.
void nhwc_gradient_check(const std::string& yaml, const std::vector<Shape>& bottoms,
                         Phase phase = Phase::train, bool spaced = false) {
  SCOPED_TRACE(yaml + " nhwc " + phase_name(phase));
  Context ctx;
  LayerHarness h(yaml, bottoms, ctx, 1, phase, DType::f64, Layout::nhwc);
  for (size_t b = 0; b < bottoms.size(); ++b) {
    const size_t n = size_t(shape_numel(bottoms[b]));
    h.set_bottom(b, spaced ? spaced_values(n, 3 + b) : random_values(n, -1.5f, 1.5f, 3 + b));
  }
  if (!h.layer->buffers().empty()) set_state(h, 11);
  check_gradients(h);
}

TEST(NhwcLayers, BatchNormGradients) {
  nhwc_gradient_check("{name: bn, type: BatchNorm}", {{2, 3, 3, 4}});
  nhwc_gradient_check("{name: bn, type: BatchNorm, eps: 1e-3}", {{1, 5, 3, 3}});  // N = 1
  nhwc_gradient_check("{name: bn, type: BatchNorm, affine: false}", {{3, 2, 1, 3}});
  nhwc_gradient_check("{name: bn, type: BatchNorm}", {{2, 3, 2, 3}}, Phase::test);
}

TEST(NhwcLayers, BatchNormReLUGradients) {
  nhwc_gradient_check("{name: bn, type: BatchNormReLU}", {{2, 3, 3, 5}});
  nhwc_gradient_check("{name: bn, type: BatchNormReLU}", {{2, 3, 3, 3}, {2, 3, 3, 3}});
  nhwc_gradient_check("{name: bn, type: BatchNormReLU}", {{1, 4, 3, 2}, {1, 4, 3, 2}}, Phase::test);
}

TEST(NhwcLayers, PoolingGradients) {
  nhwc_gradient_check("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2, pad: 1}",
                      {{2, 3, 5, 7}}, Phase::train, true);
  nhwc_gradient_check("{name: p, type: Pooling, pool: average, kernel_size: [2, 3], stride: 2}",
                      {{1, 5, 5, 6}});
  nhwc_gradient_check(
      "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
      " count_include_pad: false}",
      {{2, 3, 6, 5}});
  nhwc_gradient_check("{name: p, type: Pooling, pool: average, global_pooling: true}",
                      {{2, 5, 3, 3}});
}

TEST(NhwcLayers, ConcatGradients) {
  nhwc_gradient_check("{name: c, type: Concat}", {{2, 3, 2, 3}, {2, 5, 2, 3}});
  nhwc_gradient_check("{name: c, type: Concat, axis: 3}", {{1, 2, 3, 1}, {1, 2, 3, 4}});
}

// The layer on nhwc float32 blobs gives the nchw layer's top and bottom gradients, element for
// element at the same logical positions (within float32 rounding: batch norm's sums run in
// another order).
void expect_nhwc_like_nchw(const std::string& yaml, const std::vector<Shape>& bottoms,
                           double tolerance) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness nchw(yaml, bottoms, ctx);
  LayerHarness nhwc(yaml, bottoms, ctx, 1, Phase::train, DType::f32, Layout::nhwc);
  for (size_t b = 0; b < bottoms.size(); ++b) {
    nchw.set_bottom(b, spaced_values(size_t(shape_numel(bottoms[b])), 5 + b));
    nhwc.bottom[b]->value = in_layout(nchw.bottom[b]->value, Layout::nhwc);
  }
  nchw.forward();
  nhwc.forward();
  const Tensor& y = nchw.top[0]->value;
  EXPECT_LE(relative_error(in_layout(nhwc.top[0]->value, Layout::nchw).to_vector(), y.to_vector()),
            tolerance);
  set_values(nchw.top[0]->grad, random_values(size_t(y.numel()), -1.0f, 1.0f, 9));
  nhwc.top[0]->grad = in_layout(nchw.top[0]->grad, Layout::nhwc);
  const std::vector<bool> all(bottoms.size(), true);
  nchw.layer->backward(nchw.top, all, nchw.bottom, ctx);
  nhwc.layer->backward(nhwc.top, all, nhwc.bottom, ctx);
  for (size_t b = 0; b < bottoms.size(); ++b) {
    EXPECT_LE(relative_error(in_layout(nhwc.bottom[b]->grad, Layout::nchw).to_vector(),
                             nchw.bottom[b]->grad.to_vector()),
              tolerance);
  }
  for (size_t p = 0; p < nchw.layer->params().size(); ++p) {
    EXPECT_LE(relative_error(nhwc.layer->params()[p].grad.to_vector(),
                             nchw.layer->params()[p].grad.to_vector()),
              tolerance);
  }
}

TEST(NhwcLayers, Float32MatchesNchw) {
  expect_nhwc_like_nchw("{name: bn, type: BatchNorm}", {{3, 13, 5, 7}}, 1e-6);
  expect_nhwc_like_nchw("{name: bn, type: BatchNormReLU}", {{2, 9, 3, 5}, {2, 9, 3, 5}}, 1e-6);
  // Copies and the reference's own order of comparisons and sums: the same bits.
  expect_nhwc_like_nchw("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2}",
                        {{2, 5, 7, 9}}, 0.0);
  expect_nhwc_like_nchw("{name: p, type: Pooling, pool: average, kernel_size: 2, stride: 2}",
                        {{1, 3, 6, 4}}, 1e-6);
  expect_nhwc_like_nchw("{name: c, type: Concat}", {{2, 3, 3, 2}, {2, 1, 3, 2}}, 0.0);
  // LayerNorm's channels are rows in nhwc, columns in nchw: other kernels, other sum orders.
  expect_nhwc_like_nchw("{name: ln, type: LayerNorm, axis: 1}", {{2, 13, 3, 5}}, 1e-5);
  expect_nhwc_like_nchw("{name: ls, type: LayerScale, filler: {type: constant, value: 0.7}}",
                        {{2, 13, 3, 5}}, 1e-6);
}

// Permute's channels-last views: [0, 2, 3, 1] of an nhwc x is x's storage as a contiguous
// [N, H, W, C] (stored nchw) holding x.permute(0, 2, 3, 1); [0, 3, 1, 2] of a bf16 [N, H, W, C]
// back is its storage as [N, C, H, W] stored nhwc; the gradient passes through the same views.
TEST(NhwcLayers, PermuteViewsChannelsLast) {
  nhwc_gradient_check("{name: p, type: Permute, order: [0, 2, 3, 1]}", {{2, 3, 4, 5}});
  Context ctx;
  LayerHarness to_last("{name: p, type: Permute, order: [0, 2, 3, 1]}", {{2, 3, 4, 5}}, ctx, 1,
                       Phase::train, DType::f32, Layout::nhwc);
  to_last.set_bottom(0, random_values(120, -1.0f, 1.0f, 4));
  to_last.forward();
  const Tensor& y = to_last.top[0]->value;
  EXPECT_TRUE(y.shares_storage(to_last.bottom[0]->value));
  EXPECT_EQ(y.layout(), Layout::nchw);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 5, 3}));
  Tensor want(y.shape());
  kernels::permute(ctx, in_layout(to_last.bottom[0]->value, Layout::nchw), {0, 2, 3, 1}, want);
  EXPECT_EQ(y.to_vector(), want.to_vector());

  LayerHarness back("{name: p, type: Permute, order: [0, 3, 1, 2]}", {{2, 4, 5, 3}}, ctx, 1,
                    Phase::train, DType::bf16, Layout::nchw);
  back.bottom[0]->value.copy_from(kernels::cast_to(
      ctx, Tensor::from_vector({2, 4, 5, 3}, random_values(120, -1.0f, 1.0f, 5)), DType::bf16));
  back.forward();
  const Tensor& z = back.top[0]->value;
  EXPECT_TRUE(z.shares_storage(back.bottom[0]->value));
  EXPECT_EQ(z.layout(), Layout::nhwc);
  ASSERT_EQ(z.shape(), (Shape{2, 3, 4, 5}));
  Tensor x_f32 = kernels::cast_to(ctx, back.bottom[0]->value, DType::f32), want_back(z.shape());
  kernels::permute(ctx, x_f32, {0, 3, 1, 2}, want_back);
  const Tensor z_f32 = kernels::cast_to(ctx, in_layout(z, Layout::nchw), DType::f32);
  EXPECT_EQ(z_f32.to_vector(), want_back.to_vector());
}

// Scale in nhwc: the learned per-channel form (with a bias) and squeeze-excitation's gate, a
// second bottom [N, C] at axis 0 (x's channels-last rows scaled per (n, c)).
TEST(NhwcLayers, ScaleGradients) {
  nhwc_gradient_check("{name: s, type: Scale, bias_term: true}", {{2, 3, 3, 4}});
  nhwc_gradient_check("{name: s, type: Scale, axis: 0}", {{2, 3, 4, 5}, {2, 3}});
  nhwc_gradient_check("{name: s, type: Scale}", {{2, 5, 3, 2}, {5}});
}

TEST(NhwcLayers, LayerNormAndLayerScaleGradients) {
  nhwc_gradient_check("{name: ln, type: LayerNorm, axis: 1}", {{2, 5, 3, 4}});
  nhwc_gradient_check("{name: ln, type: LayerNorm, axis: 3}", {{1, 3, 2, 5}});
  nhwc_gradient_check("{name: ln, type: LayerNorm, axis: 1, elementwise_affine: false}",
                      {{2, 3, 1, 3}});
  nhwc_gradient_check("{name: ls, type: LayerScale, filler: {type: constant, value: 0.7}}",
                      {{2, 3, 3, 4}});
}

// runs(dtype, layout, device) for a layer made from `yaml` on `bottoms`.
bool runs(const std::string& yaml, const std::vector<Shape>& bottoms, DType dtype, Layout layout,
          const Device& device, int num_tops = 1) {
  Context ctx;
  LayerHarness h(yaml, bottoms, ctx, num_tops);
  return h.layer->runs(dtype, layout, device);
}

TEST(NhwcLayers, RunsSaysWhatTheKernelsServe) {
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  const std::vector<Shape> x = {{2, 3, 4, 4}};
  for (const char* yaml :
       {"{name: l, type: BatchNorm}", "{name: l, type: ReLU}", "{name: l, type: GELU}",
        "{name: l, type: Dropout}", "{name: l, type: Concat}",
        "{name: l, type: Pooling, pool: max, kernel_size: 2}",
        "{name: l, type: Pooling, pool: average, global_pooling: true}",
        "{name: l, type: Pooling, pool: average, output_size: 1}", "{name: l, type: LayerNorm}",
        "{name: l, type: LayerNorm, axis: 1}", "{name: l, type: LayerScale}",
        "{name: l, type: StochasticDepth, p: 0.2}"}) {
    SCOPED_TRACE(yaml);
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      EXPECT_TRUE(runs(yaml, x, DType::bf16, layout, gpu));
      EXPECT_TRUE(runs(yaml, x, DType::f16, layout, gpu));
      EXPECT_TRUE(runs(yaml, x, DType::f32, layout, gpu));
      EXPECT_FALSE(runs(yaml, x, DType::f64, layout, gpu));
      EXPECT_TRUE(runs(yaml, x, DType::f32, layout, cpu));
      EXPECT_TRUE(runs(yaml, x, DType::f64, layout, cpu));
      EXPECT_FALSE(runs(yaml, x, DType::bf16, layout, cpu));
    }
  }
  EXPECT_TRUE(runs("{name: l, type: BatchNormReLU}", {x[0], x[0]}, DType::bf16, Layout::nhwc, gpu));
  EXPECT_TRUE(runs("{name: l, type: Eltwise}", {x[0], x[0]}, DType::f16, Layout::nhwc, gpu));
  EXPECT_TRUE(runs("{name: l, type: Split}", x, DType::bf16, Layout::nhwc, gpu, 2));
  // Per activation keeps its statistics in [C, H, W] order: nchw, f32 and f64.
  EXPECT_FALSE(
      runs("{name: l, type: BatchNorm, mode: per_activation}", x, DType::f32, Layout::nhwc, cpu));
  EXPECT_FALSE(
      runs("{name: l, type: BatchNorm, mode: per_activation}", x, DType::bf16, Layout::nchw, gpu));
  // Scale: the channels, or squeeze-excitation's gate [N, C] at axis 0; Bias stays f32 nchw.
  EXPECT_TRUE(runs("{name: l, type: Scale}", x, DType::bf16, Layout::nhwc, gpu));
  EXPECT_TRUE(
      runs("{name: l, type: Scale, axis: 0}", {x[0], {2, 3}}, DType::bf16, Layout::nhwc, gpu));
  EXPECT_FALSE(
      runs("{name: l, type: Scale, axis: 0, num_axes: 2}", x, DType::bf16, Layout::nhwc, gpu));
  EXPECT_FALSE(runs("{name: l, type: Bias}", x, DType::bf16, Layout::nhwc, gpu));
  // Permute: f32 nchw through its kernel; the channels-last views in every dtype a net runs.
  const char* to_last = "{name: l, type: Permute, order: [0, 2, 3, 1]}";
  const char* from_last = "{name: l, type: Permute, order: [0, 3, 1, 2]}";
  EXPECT_TRUE(runs(to_last, x, DType::bf16, Layout::nhwc, gpu));
  EXPECT_TRUE(runs(to_last, x, DType::f32, Layout::nhwc, gpu));
  EXPECT_FALSE(runs(to_last, x, DType::bf16, Layout::nchw, gpu));
  EXPECT_TRUE(runs(from_last, x, DType::f16, Layout::nchw, gpu));
  EXPECT_FALSE(runs(from_last, x, DType::bf16, Layout::nhwc, gpu));
  EXPECT_TRUE(runs(from_last, x, DType::f32, Layout::nchw, cpu));
  // An argmax top (float32 indices), adaptive windows and 3-D windows: f32 and f64 nchw.
  const char* argmax_top = "{name: l, type: Pooling, pool: max, kernel_size: 2}";
  EXPECT_FALSE(runs(argmax_top, x, DType::bf16, Layout::nchw, gpu, 2));
  EXPECT_FALSE(runs(argmax_top, x, DType::f32, Layout::nhwc, gpu, 2));
  EXPECT_FALSE(runs("{name: l, type: Pooling, pool: max, output_size: 3}", x, DType::f32,
                    Layout::nhwc, cpu));
  EXPECT_FALSE(runs("{name: l, type: Pooling, pool: max, kernel_size: [2, 2, 2]}",
                    {{1, 2, 4, 4, 4}}, DType::bf16, Layout::nchw, gpu));
}

}  // namespace
}  // namespace crema::testing
