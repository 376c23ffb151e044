// The Convolution layer on channels-last bottoms on the GPU -- f32 nhwc (cuda::conv2d_*_nhwc)
// and bf16 and f16 nhwc (the tensor-core passes) -- against the same layer in f64 nchw on the CPU
// on the same values: tops, bottom gradients and the f32 KCRS master gradients (accumulated onto
// what was there; frozen parameters untouched), and what describe_algorithm names.
//
// The inputs, the top gradients and the weights are values of the tested dtype, so both sides
// convolve the same numbers (the compute copy of a bf16 run is then exact). Tolerances (relative
// norms): tops and bottom gradients of 16-bit runs are rounded once to the type, 2^-8 (bf16) or
// 2^-11 (f16) per element, plus fp32 sums: 5e-3 bf16, 1e-3 f16; f32 runs and every parameter
// gradient (fp32 sums of exact products, fp32 results) 1e-5.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/layout/layout.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_checks.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

float representable(float v, DType dtype) {
  if (dtype == DType::bf16) return to_f32(to_bf16(v));
  if (dtype == DType::f16) return to_f32(to_f16(v));
  return v;
}
std::vector<float> rounded(std::vector<float> v, DType dtype) {
  for (float& x : v) x = representable(x, dtype);
  return v;
}

// `values` (nchw order, f32) into the GPU tensor t, in t's dtype and layout.
void set_nchw_values(Context& ctx, Tensor& t, const std::vector<float>& values) {
  Tensor staged = ctx.empty(t.shape(), DType::f32);
  staged.copy_from(Tensor::from_vector(t.shape(), values));
  kernels::convert(ctx, staged, t);
}
// The GPU tensor t as f32 values in nchw order.
std::vector<float> nchw_values(Context& ctx, const Tensor& t) {
  Tensor out = ctx.empty(t.shape(), DType::f32);
  kernels::convert(ctx, t, out);
  ctx.synchronize();
  return out.to_vector();
}

struct Tolerance {
  double activations, parameters;
};
Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::bf16) return {5e-3, 1e-5};
  if (dtype == DType::f16) return {1e-3, 1e-5};
  return {1e-5, 1e-5};
}

void check_nhwc_parity(const std::string& yaml, const Shape& x, DType dtype,
                       float start_grad = 0.0f) {
  SCOPED_TRACE(yaml + " " + dtype_name(dtype));
  Context cpu, gpu(Device::cuda(0));
  LayerHarness c(yaml, {x}, cpu, 1, Phase::train, DType::f64);
  LayerHarness g(yaml, {x}, gpu);
  const Shape y = c.top[0]->value.shape();
  for (Blob* b : g.bottom) {
    b->value = gpu.empty(x, dtype);
    b->grad = gpu.empty(x, dtype);
    b->value.set_layout(Layout::nhwc);
    b->grad.set_layout(Layout::nhwc);
  }
  g.top[0]->value = gpu.empty(y, dtype);
  g.top[0]->grad = gpu.empty(y, dtype);
  g.top[0]->value.set_layout(Layout::nhwc);
  g.top[0]->grad.set_layout(Layout::nhwc);
  g.layer->reshape(g.bottom, g.top, gpu);

  // The CPU's parameters (the filler's), the weight rounded to the dtype, on both sides.
  for (size_t i = 0; i < c.layer->params().size(); ++i) {
    Param& p = c.layer->params()[i];
    const std::vector<float> v = rounded(p.value.to_vector(), i == 0 ? dtype : DType::f32);
    set_values(p.value, v);
    g.layer->params()[i].value.copy_from(Tensor::from_vector(p.value.shape(), v));
  }
  const std::vector<float> input = rounded(random_input(x, 7), dtype);
  c.set_bottom(0, input);
  set_nchw_values(gpu, g.bottom[0]->value, input);
  set_nchw_values(gpu, g.top[0]->value, std::vector<float>(size_t(shape_numel(y)), NAN));
  c.forward();
  g.forward();
  const Tolerance tol = tolerance_for(dtype);
  EXPECT_LE(relative_error(nchw_values(gpu, g.top[0]->value), c.top[0]->value.to_vector()),
            tol.activations)
      << "top";

  const std::vector<float> dy = rounded(random_input(y, 8), dtype);
  set_values(c.top[0]->grad, dy);
  set_nchw_values(gpu, g.top[0]->grad, dy);
  cpu.fill(c.bottom[0]->grad, NAN);
  set_nchw_values(gpu, g.bottom[0]->grad, std::vector<float>(input.size(), NAN));
  for (Param& p : c.layer->params()) p.grad.fill(start_grad);
  for (Param& p : g.layer->params()) gpu.fill(p.grad, start_grad);
  c.layer->backward(c.top, {true}, c.bottom, cpu);
  g.layer->backward(g.top, {true}, g.bottom, gpu);
  EXPECT_LE(relative_error(nchw_values(gpu, g.bottom[0]->grad), c.bottom[0]->grad.to_vector()),
            tol.activations)
      << "bottom gradient";
  for (size_t i = 0; i < c.layer->params().size(); ++i) {
    const Param& p = g.layer->params()[i];
    const std::vector<float> got = nchw_values(gpu, p.grad);
    if (p.frozen()) {
      for (float v : got) ASSERT_EQ(v, start_grad) << p.name << ": a frozen gradient was written";
      continue;
    }
    EXPECT_LE(relative_error(got, c.layer->params()[i].grad.to_vector()), tol.parameters)
        << p.name << " gradient";
  }
}

const std::string kConv =
    "{name: c, type: Convolution, bias_filler: {type: uniform, min: -1, max: 1}, ";

// Odd sizes and 3 channels (the element path), stride 2, padding, dilation, groups, depthwise,
// 1x1, and channel counts that are multiples of 8 (the 16-byte paths), in each dtype.
void check_every_option(DType dtype) {
  check_nhwc_parity(kConv + "num_output: 5, kernel_size: 3, stride: 2, pad: 1}", {2, 3, 9, 7},
                    dtype);
  check_nhwc_parity(kConv +
                        "num_output: 7, kernel_size: [3, 5], stride: [1, 2], pad: [2, 1],"
                        " dilation: [2, 1]}",
                    {1, 5, 11, 13}, dtype);
  check_nhwc_parity(kConv + "num_output: 6, kernel_size: 3, pad: 1, group: 3}", {2, 9, 7, 6},
                    dtype);
  check_nhwc_parity(kConv + "num_output: 8, kernel_size: 3, stride: 2, pad: 1, group: 8}",
                    {3, 8, 11, 9}, dtype);
  check_nhwc_parity(kConv + "num_output: 24, kernel_size: 1}", {2, 16, 7, 5}, dtype);
  check_nhwc_parity(kConv + "num_output: 40, kernel_size: 3, pad: 1}", {2, 32, 10, 9}, dtype, 0.5f);
  check_nhwc_parity(kConv + "num_output: 16, kernel_size: 3, pad: 1, bias_term: false}",
                    {1, 8, 6, 6}, dtype);
}

TEST(ConvolutionNhwcLayerCuda, F32MatchesCpuF64) {
  CREMA_REQUIRE_CUDA();
  check_every_option(DType::f32);
}

TEST(ConvolutionNhwcLayerCuda, Bf16MatchesCpuF64) {
  CREMA_REQUIRE_CUDA();
  check_every_option(DType::bf16);
}

TEST(ConvolutionNhwcLayerCuda, F16MatchesCpuF64) {
  CREMA_REQUIRE_CUDA();
  check_every_option(DType::f16);
}

TEST(ConvolutionNhwcLayerCuda, FrozenParameters) {
  CREMA_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_nhwc_parity(kConv + "num_output: 4, kernel_size: 3, param: {weight: {lr_mult: 0}}}",
                      {2, 3, 6, 5}, dtype, 7.0f);
    check_nhwc_parity(kConv + "num_output: 4, kernel_size: 3, param: {bias: {lr_mult: 0}}}",
                      {2, 3, 6, 5}, dtype, 7.0f);
  }
}

// What describe_algorithm says after a reshape on nhwc bottoms of `dtype`.
std::string described(Context& gpu, const std::string& yaml, const Shape& x, DType dtype) {
  LayerHarness h(yaml, {x}, gpu);
  h.bottom[0]->value = gpu.empty(x, dtype);
  h.bottom[0]->value.set_layout(Layout::nhwc);
  h.top[0]->value = gpu.empty(h.top[0]->value.shape(), dtype);
  h.top[0]->value.set_layout(Layout::nhwc);
  h.layer->reshape(h.bottom, h.top, gpu);
  return h.layer->describe_algorithm();
}

TEST(ConvolutionNhwcLayerCuda, DescribesTheNhwcKernels) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  // A 3x3 on a 5x5 map: too few output rows for wgmma's tiles, forward and filter gradient on
  // mma.sync (bf16 and f16: the forward from 8 channels on the stem kernel); backward data onto
  // its 8 channels on the few-channel kernel on mma.sync.
  const std::string small =
      "{name: c, type: Convolution, num_output: 8, kernel_size: 3, math: tf32}";
  EXPECT_EQ(described(gpu, small, {1, 8, 5, 5}, DType::f32),
            "forward nhwc_implicit_gemm, backward_data direct_mma_few_channels, backward_filter "
            "nhwc_implicit_gemm (f32 nhwc), math tf32");
  for (DType dtype : {DType::bf16, DType::f16}) {
    EXPECT_EQ(described(gpu, small, {1, 8, 5, 5}, dtype),
              "forward stem_mma, backward_data direct_mma_few_channels, backward_filter "
              "tc_implicit_gemm (" +
                  std::string(dtype_name(dtype)) + " nhwc)");
  }
  // A 1x1 with 64 channels: every pass on wgmma on Hopper (sm_90), on mma.sync elsewhere.
  const bool hopper = gpu::device_description(0).find("sm_90") != std::string::npos;
  const std::string kernel = hopper ? "tc_wgmma" : "tc_implicit_gemm";
  EXPECT_EQ(described(gpu, "{name: c, type: Convolution, num_output: 64, kernel_size: 1}",
                      {2, 64, 8, 8}, DType::bf16),
            "forward " + kernel + ", backward_data " + kernel + ", backward_filter " + kernel +
                " (bf16 nhwc)");
  // f32 in tf32 math: every pass of a 1x1 on wgmma on Hopper (the filter gradient since session
  // 22); fp32 math always on the implicit-GEMM kernels.
  const std::string f32 = hopper ? "tc_wgmma" : "nhwc_implicit_gemm";
  EXPECT_EQ(
      described(gpu, "{name: c, type: Convolution, num_output: 36, kernel_size: 1, math: tf32}",
                {2, 12, 8, 8}, DType::f32),
      "forward " + f32 + ", backward_data " + f32 + ", backward_filter " + f32 +
          " (f32 nhwc), math tf32");
  EXPECT_EQ(described(gpu, "{name: c, type: Convolution, num_output: 36, kernel_size: 1}",
                      {2, 12, 8, 8}, DType::f32),
            "forward nhwc_implicit_gemm, backward_data nhwc_implicit_gemm, backward_filter "
            "nhwc_implicit_gemm (f32 nhwc)");
}

}  // namespace
}  // namespace crema::testing
