// A ConvNeXt block (tests/layers/convnext_block_net.h) trained one step on the GPU in bf16
// channels-last against the f32 nchw net on the same weights and data: the loss and every
// parameter gradient within bf16's roundings. Each stored activation and gradient is rounded to 8
// bits (2^-8 relative), several in a row, and the LayerNorms divide by a standard deviation of 16
// rounded values: 5e-2 relative (norm-wise), as the convolutions' bf16 net test allows 3e-2 for
// fewer roundings. StochasticDepth p = 0 so that both nets keep every sample (its bf16 kernel is
// checked in half_scale_depth_cuda_test.cpp); the same step twice gives the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/layers/convnext_block_net.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

void fill(Net& net) {
  const Shape& shape = net.blob("data").value.shape();
  net.blob("data").value.copy_from(
      Tensor::from_vector(shape, random_values(size_t(shape_numel(shape)), -1, 1, 3)));
  std::vector<float> labels(size_t(net.batch_size()));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = float(i % 3);
  net.blob("label").value.copy_from(Tensor::from_vector({net.batch_size()}, labels));
}

// One step: the loss and the parameter gradients.
std::pair<double, std::vector<std::vector<float>>> step(Net& net, Context& ctx) {
  fill(net);
  net.zero_param_grads(ctx);
  net.forward(ctx);
  net.backward(ctx);
  ctx.synchronize();
  std::vector<std::vector<float>> grads;
  for (const Param* p : net.learnable_params()) grads.push_back(p->grad.to_vector());
  return {net.loss(), grads};
}

TEST(ConvNeXtBlockNetCuda, Bf16ChannelsLastTrainsLikeF32) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const LayerRegistry registry = builtin_layers();
  const std::string block = convnext_block_net("0.0");
  Net low(parse_config("precision: bf16\n" + block, "net.yaml"), Phase::train, 4, registry, ctx);
  Net ref(parse_config("layout: nchw\n" + block, "net.yaml"), Phase::train, 4, registry, ctx);
  EXPECT_EQ(low.blob("norm").value.dtype(), DType::bf16);
  EXPECT_EQ(low.blob("to_first").value.layout(), Layout::nhwc);
  ref.share_params_from(low);  // the same weights (and gradient tensors: one step at a time)
  const auto [low_loss, low_grads] = step(low, ctx);
  const auto [again_loss, again_grads] = step(low, ctx);
  const auto [ref_loss, ref_grads] = step(ref, ctx);
  EXPECT_NEAR(low_loss, ref_loss, 5e-2 * std::abs(ref_loss));
  ASSERT_EQ(low_grads.size(), ref_grads.size());
  for (size_t i = 0; i < low_grads.size(); ++i) {
    EXPECT_LE(relative_error(low_grads[i], ref_grads[i]), 5e-2) << low.learnable_params()[i]->name;
    EXPECT_EQ(again_grads[i], low_grads[i]) << low.learnable_params()[i]->name;
  }
  EXPECT_EQ(again_loss, low_loss);
}

}  // namespace
}  // namespace crema::testing
