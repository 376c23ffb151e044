// Convolutions through the Net's precision pass (core/net_precision.h) on the CPU: under
// model.layout nhwc the Net hands both convolutions channels-last f32 bottoms (one Convert after
// the data, one before the classifier, which runs nchw), and one training step gives the loss and
// every gradient of the nchw net within float rounding (the CPU's nhwc convolution is the nchw
// one between transposes; only the bias gradient sums in another order). The weight copies are
// the layers' state in the memory report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

const char* kNet = R"(
inputs: {data: [3, 9, 8], label: []}
layers:
  - {name: c1, type: Convolution, bottom: data, top: c1, num_output: 8, kernel_size: 3, pad: 1,
     bias_filler: {type: uniform, min: -1, max: 1}}
  - {name: c2, type: Convolution, bottom: c1, top: c2, num_output: 6, kernel_size: 3, stride: 2,
     group: 2, bias_filler: {type: uniform, min: -1, max: 1}}
  - {name: fc, type: InnerProduct, bottom: c2, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

void fill(Net& net) {
  const std::vector<float> x = random_values(size_t(net.blob("data").value.numel()), -1, 1, 3);
  std::copy(x.begin(), x.end(), net.blob("data").value.data<float>());
  for (int64_t i = 0; i < net.batch_size(); ++i) {
    net.blob("label").value.data<float>()[i] = float(i % 3);
  }
}

TEST(ConvolutionNhwcNet, NhwcLayoutTrainsLikeNchw) {
  Context ctx;
  const LayerRegistry& registry = builtin_layers();
  Net nhwc(parse_config(std::string("layout: nhwc\n") + kNet, "net.yaml"), Phase::train, 4,
           registry, ctx);
  Net nchw(parse_config(kNet, "net.yaml"), Phase::train, 4, registry, ctx);
  std::vector<std::string> names;
  for (size_t i = 0; i < nhwc.num_layers(); ++i) names.push_back(nhwc.layer(i).name());
  EXPECT_EQ(names, (std::vector<std::string>{"data@f32_nhwc", "c1", "c2", "c2@f32", "fc", "loss"}));
  EXPECT_EQ(nhwc.blob("c1").value.layout(), Layout::nhwc);
  // Each convolution keeps an f32 KRSC copy of its weight, counted as its state: 8*3*3*3 +
  // 6*4*3*3 floats (its filter-gradient scratch of the same size is planned in the arena).
  EXPECT_EQ(nhwc.memory().layer_state - nchw.memory().layer_state,
            int64_t((8 * 3 * 3 * 3 + 6 * 4 * 3 * 3) * sizeof(float)));
  nchw.share_params_from(nhwc);  // the same weights (and gradient tensors: one step at a time)
  std::vector<double> losses;
  std::vector<std::vector<float>> grads[2];
  for (int run = 0; run < 2; ++run) {
    Net& net = run == 0 ? nhwc : nchw;
    fill(net);
    net.zero_param_grads(ctx);
    net.forward(ctx);
    net.backward(ctx);
    losses.push_back(net.loss());
    for (const Param* p : net.learnable_params()) grads[run].push_back(p->grad.to_vector());
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-6 * std::abs(losses[1]));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const Param& p = *nhwc.learnable_params()[i];
    EXPECT_EQ(p.value.layout(), Layout::nchw) << p.name << ": the master stays KCRS";
    EXPECT_LE(relative_error(grads[0][i], grads[1][i]), 1e-6) << p.name;
  }
}

}  // namespace
}  // namespace crema::testing
