// Windows on the GPU (core/VIEWS.md): none yet. The GPU's convolutions take no image stride, so
// a Concat on CUDA keeps its copies whatever model.concat_views says, in f32 nchw and in bf16
// nhwc, and the step's bits do not depend on the key; kernels::concat refuses a skipped part
// there. These fail once a GPU path says it writes windows: then test its bits here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "kernels/concat/concat.h"
#include "layers/register_layers.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema {
namespace {

const char* kInception = R"(
inputs: {data: [8, 7, 6], label: []}
layers:
  - {name: conv_a, type: Convolution, bottom: data, top: a, num_output: 8, kernel_size: 1}
  - {name: conv_b, type: Convolution, bottom: data, top: b, num_output: 16, kernel_size: 3, pad: 1}
  - {name: cat, type: Concat, bottom: [a, b], top: cat}
  - {name: conv_d, type: Convolution, bottom: cat, top: d, num_output: 8, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: d, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

ConfigNode model(const std::string& precision, bool views) {
  return parse_config("precision: " + precision + "\nconcat_views: " + (views ? "true" : "false") +
                          "\n" + kInception,
                      "net.yaml");
}

// The loss and every parameter gradient of one step.
std::vector<float> step(Net& net, Context& ctx) {
  Tensor& data = net.blob("data").value;
  data.copy_from(
      Tensor::from_vector(data.shape(), testing::random_values(size_t(data.numel()), -1, 1, 7)));
  std::vector<float> labels;
  for (int64_t i = 0; i < net.batch_size(); ++i) labels.push_back(float(i % 5));
  net.blob("label").value.copy_from(Tensor::from_vector({net.batch_size()}, labels));
  net.zero_param_grads(ctx);
  net.forward(ctx);
  std::vector<float> seen{float(net.loss())};
  net.backward(ctx);
  for (const Param* p : net.learnable_params()) {
    const auto g = p->grad.to_vector();
    seen.insert(seen.end(), g.begin(), g.end());
  }
  return seen;
}

TEST(ConcatViewsCuda, NoWindowsYetAndTheSameBits) {
  CREMA_REQUIRE_CUDA();
  for (const char* precision : {"fp32", "bf16"}) {
    Context ctx(Device::cuda(0));
    Net on(model(precision, true), Phase::train, 3, builtin_layers(), ctx);
    Net off(model(precision, false), Phase::train, 3, builtin_layers(), ctx);
    off.share_params_from(on);  // one set of weights and gradients, used in turn
    for (size_t i = 0; i < on.num_layers(); ++i) {
      EXPECT_EQ(on.layer(i).top_window(0), nullptr) << precision << " " << on.layer(i).name();
    }
    EXPECT_EQ(step(on, ctx), step(off, ctx)) << precision;
  }
}

TEST(ConcatViewsCuda, ConcatRefusesASkippedPart) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Tensor part = ctx.empty({2, 3, 4});
  Tensor whole = ctx.empty({2, 5, 4});
  EXPECT_THROW(kernels::concat(ctx, {&part, nullptr}, 1, {3, 2}, whole), Error);
}

}  // namespace
}  // namespace crema
