// Convolutions through the Net's precision pass on the GPU: under model.layout nhwc (f32) and
// model.precision bf16 (nhwc by default on a GPU) the Net hands both convolutions their bottoms in
// that format, and one training step gives the loss and every gradient of the f32 nchw net on the
// same weights and data: within fp32 rounding for f32 nhwc (1e-5; the sums run in other orders),
// and within bf16's roundings for bf16 (the data, the weight copies and each stored activation
// and gradient rounded to 8 bits, 2^-8 relative each, a few in a row: 3e-2).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

const char* kNet = R"(
inputs: {data: [3, 9, 8], label: []}
layers:
  - {name: c1, type: Convolution, bottom: data, top: c1, num_output: 16, kernel_size: 3, pad: 1,
     bias_filler: {type: uniform, min: -1, max: 1}}
  - {name: c2, type: Convolution, bottom: c1, top: c2, num_output: 8, kernel_size: 3, stride: 2,
     group: 2, bias_filler: {type: uniform, min: -1, max: 1}}
  - {name: fc, type: InnerProduct, bottom: c2, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

void fill(Net& net) {
  const Shape& shape = net.blob("data").value.shape();
  net.blob("data").value.copy_from(
      Tensor::from_vector(shape, random_values(size_t(shape_numel(shape)), -1, 1, 3)));
  std::vector<float> labels(size_t(net.batch_size()));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = float(i % 3);
  net.blob("label").value.copy_from(Tensor::from_vector({net.batch_size()}, labels));
}

// One step of the net under `precision_keys` against the f32 nchw net.
void check_step(const std::string& precision_keys, DType dtype, double tolerance) {
  SCOPED_TRACE(precision_keys);
  Context ctx(Device::cuda(0));
  const LayerRegistry registry = builtin_layers();
  Net low(parse_config(precision_keys + kNet, "net.yaml"), Phase::train, 4, registry, ctx);
  Net ref(parse_config(kNet, "net.yaml"), Phase::train, 4, registry, ctx);
  for (const char* blob : {"c1", "c2"}) {
    EXPECT_EQ(low.blob(blob).value.dtype(), dtype) << blob;
    EXPECT_EQ(low.blob(blob).value.layout(), Layout::nhwc) << blob;
  }
  ref.share_params_from(low);  // the same weights (and gradient tensors: one step at a time)
  std::vector<double> losses;
  std::vector<std::vector<float>> grads[2];
  for (int run = 0; run < 2; ++run) {
    Net& net = run == 0 ? low : ref;
    fill(net);
    net.zero_param_grads(ctx);
    net.forward(ctx);
    net.backward(ctx);
    ctx.synchronize();
    losses.push_back(net.loss());
    for (const Param* p : net.learnable_params()) grads[run].push_back(p->grad.to_vector());
  }
  EXPECT_NEAR(losses[0], losses[1], tolerance * std::abs(losses[1]));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_LE(relative_error(grads[0][i], grads[1][i]), tolerance)
        << low.learnable_params()[i]->name;
  }
}

TEST(ConvolutionNhwcNetCuda, F32NhwcTrainsLikeNchw) {
  CREMA_REQUIRE_CUDA();
  check_step("layout: nhwc\n", DType::f32, 1e-5);
}

TEST(ConvolutionNhwcNetCuda, Bf16TrainsLikeF32) {
  CREMA_REQUIRE_CUDA();
  check_step("precision: bf16\n", DType::bf16, 3e-2);
}

}  // namespace
}  // namespace crema::testing
