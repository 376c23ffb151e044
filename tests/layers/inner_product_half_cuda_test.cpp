// The InnerProduct layer on bf16 and f16 tensors on the GPU (cuda::gemm_16bit through a 16-bit
// compute copy of the f32 master weight) against the same layer in f64 on the CPU, on the same
// values: the top, the bottom gradient and the f32 master gradients (accumulated onto what was
// there; frozen ones untouched). Also: a bf16 net of axis -1 inner products on 4-D maps
// ([N, H, W, C], as ConvNeXt's MLP) has no Convert between its layers.
//
// The inputs, the top gradients and the weights are values of the tested dtype, so both sides
// multiply the same numbers. Tolerances (relative norms), as the nhwc convolution layer's test:
// the top and the bottom gradient are rounded once to the dtype, 2^-8 (bf16) or 2^-11 (f16) per
// element, plus fp32 sums: 5e-3 bf16, 1e-3 f16; the parameter gradients (fp32 sums of exact
// products into f32) 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/net.h"
#include "kernels/layout/layout.h"
#include "layers/register_layers.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_checks.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

std::vector<float> rounded(std::vector<float> v, DType dtype) {
  for (float& x : v) {
    if (dtype == DType::bf16) x = to_f32(to_bf16(x));
    if (dtype == DType::f16) x = to_f32(to_f16(x));
  }
  return v;
}

// `values` (f32) into the GPU tensor t in t's dtype, and back.
void set_device_values(Context& ctx, Tensor& t, const std::vector<float>& values) {
  Tensor staged = ctx.empty(t.shape(), DType::f32);
  staged.copy_from(Tensor::from_vector(t.shape(), values));
  kernels::convert(ctx, staged, t);
}
std::vector<float> device_values(Context& ctx, const Tensor& t) {
  Tensor out = ctx.empty(t.shape(), DType::f32);
  kernels::convert(ctx, t, out);
  ctx.synchronize();
  return out.to_vector();
}

void check_half_parity(const std::string& yaml, const Shape& x, DType dtype,
                       float start_grad = 0.0f) {
  SCOPED_TRACE(yaml + " " + dtype_name(dtype) + " x " + shape_str(x));
  Context cpu, gpu(Device::cuda(0));
  LayerHarness c(yaml, {x}, cpu, 1, Phase::train, DType::f64);
  LayerHarness g(yaml, {x}, gpu);
  const Shape y = c.top[0]->value.shape();
  g.bottom[0]->value = gpu.empty(x, dtype);
  g.bottom[0]->grad = gpu.empty(x, dtype);
  g.top[0]->value = gpu.empty(y, dtype);
  g.top[0]->grad = gpu.empty(y, dtype);
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
  set_device_values(gpu, g.bottom[0]->value, input);
  set_device_values(gpu, g.top[0]->value, std::vector<float>(size_t(shape_numel(y)), NAN));
  c.forward();
  g.forward();
  const double activations = dtype == DType::bf16 ? 5e-3 : 1e-3;
  EXPECT_LE(relative_error(device_values(gpu, g.top[0]->value), c.top[0]->value.to_vector()),
            activations)
      << "top";

  const std::vector<float> dy = rounded(random_input(y, 8), dtype);
  set_values(c.top[0]->grad, dy);
  set_device_values(gpu, g.top[0]->grad, dy);
  cpu.fill(c.bottom[0]->grad, NAN);
  set_device_values(gpu, g.bottom[0]->grad, std::vector<float>(input.size(), NAN));
  for (Param& p : c.layer->params()) p.grad.fill(start_grad);
  for (Param& p : g.layer->params()) gpu.fill(p.grad, start_grad);
  c.layer->backward(c.top, {true}, c.bottom, cpu);
  g.layer->backward(g.top, {true}, g.bottom, gpu);
  EXPECT_LE(relative_error(device_values(gpu, g.bottom[0]->grad), c.bottom[0]->grad.to_vector()),
            activations)
      << "bottom gradient";
  for (size_t i = 0; i < c.layer->params().size(); ++i) {
    const Param& p = g.layer->params()[i];
    ASSERT_EQ(p.grad.dtype(), DType::f32) << p.name << ": master gradients stay f32";
    const std::vector<float> got = device_values(gpu, p.grad);
    if (p.frozen()) {
      for (float v : got) ASSERT_EQ(v, start_grad) << p.name << ": a frozen gradient was written";
      continue;
    }
    EXPECT_LE(relative_error(got, c.layer->params()[i].grad.to_vector()), 1e-5)
        << p.name << " gradient";
  }
}

const std::string kFc = "{name: fc, type: InnerProduct, bias_filler: {type: uniform}, ";

TEST(InnerProductHalfLayerCuda, MatchesCpuF64) {
  CREMA_REQUIRE_CUDA();
  for (DType dtype : {DType::bf16, DType::f16}) {
    check_half_parity(kFc + "num_output: 500}", {5, 50, 4, 4}, dtype);        // axis 1, flattened
    check_half_parity(kFc + "num_output: 7, axis: 2}", {3, 4, 5, 2}, dtype);  // K = 10: ragged
    check_half_parity(kFc + "num_output: 3, bias_term: false}", {1, 9}, dtype, 0.5f);
    check_half_parity(kFc + "num_output: 13, axis: -1}", {1, 7, 5, 12}, dtype);
    // ConvNeXt's MLP on [N, H, W, C]: 96 -> 384 -> 96; 3,136 rows make dW split K.
    check_half_parity(kFc + "num_output: 384, axis: -1}", {4, 28, 28, 96}, dtype, 0.5f);
    check_half_parity(kFc + "num_output: 96, axis: 3}", {2, 14, 14, 384}, dtype);
  }
}

TEST(InnerProductHalfLayerCuda, FrozenParametersStayUntouched) {
  CREMA_REQUIRE_CUDA();
  check_half_parity(kFc + "num_output: 6, param: {weight: {lr_mult: 0}}}", {4, 11}, DType::bf16,
                    0.25f);
  check_half_parity(kFc + "num_output: 6, param: {bias: {lr_mult: 0}}}", {4, 11}, DType::f16,
                    0.25f);
}

TEST(InnerProductHalfLayerCuda, Bf16NhwcNetHasNoConvertAroundAxisMinusOne) {
  CREMA_REQUIRE_CUDA();
  // The net's layout is nhwc, but [N, H, W, C] maps are contiguous (flagged nchw): the inner
  // products and the ReLU between them keep that, in bf16, with no Convert among them. The data
  // (f32) is converted once before ip1, the loss's input once after ip2.
  const char* text = R"(
precision: bf16
layout: nhwc
inputs: {data: [6, 5, 8], target: [6, 5, 4]}
layers:
  - {name: ip1, type: InnerProduct, bottom: data, top: ip1, num_output: 32, axis: -1}
  - {name: relu, type: ReLU, bottom: ip1, top: ip1}
  - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 4, axis: -1}
  - {name: loss, type: EuclideanLoss, bottom: [ip2, target], top: loss}
)";
  Context ctx(Device::cuda(0));
  const LayerRegistry registry = builtin_layers();
  Net net(parse_config(text, "net.yaml"), Phase::train, 2, registry, ctx);
  std::vector<std::string> names;
  for (size_t i = 0; i < net.num_layers(); ++i) names.push_back(net.layer(i).name());
  EXPECT_EQ(names, (std::vector<std::string>{"data@bf16", "ip1", "relu", "ip2", "ip2@f32", "loss"}))
      << "layers: " << ::testing::PrintToString(names);
  EXPECT_EQ(net.blob("ip1").value.dtype(), DType::bf16);
  EXPECT_EQ(net.blob("ip2").value.dtype(), DType::bf16);
  for (const char* blob : {"ip1", "ip2"}) {
    EXPECT_EQ(net.blob(blob).value.layout(), Layout::nchw) << blob;
  }
  for (const char* input : {"data", "target"}) {
    Tensor& t = net.blob(input).value;
    t.copy_from(Tensor::from_vector(t.shape(), random_values(size_t(t.numel()), -1, 1, 5)));
  }
  net.forward(ctx);
  net.backward(ctx);
  ctx.synchronize();
  for (const Param* p : net.learnable_params()) {
    EXPECT_EQ(p->grad.dtype(), DType::f32) << p->name;
    for (float v : p->grad.to_vector()) ASSERT_TRUE(std::isfinite(v)) << p->name;
  }
}

}  // namespace
}  // namespace crema::testing
