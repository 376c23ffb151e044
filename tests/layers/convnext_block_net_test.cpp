// A ConvNeXt block planned for a GPU under model.precision bf16 (channels-last by default there;
// `crema summary --device cuda:0` plans the same way on a host): every layer of the block runs
// bf16 -- LayerNorm over the channels of the nhwc stem and over the last axis after the Permute,
// GELU, LayerScale, StochasticDepth, the sum, the global pooling -- and the Permutes are views
// (no copy, the top relabelled), so the only Convert layers are the input's and those next to an
// InnerProduct (its own bf16 path is another change).
#include <gtest/gtest.h>

#include <string>

#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/layers/convnext_block_net.h"

namespace crema::testing {
namespace {

TEST(ConvNeXtBlockNet, Bf16ChannelsLastHasNoConvertsInsideTheBlock) {
  Context ctx;
  const Device gpu = Device::cuda(0);
  const LayerRegistry registry = builtin_layers();
  Net net(parse_config("precision: bf16\n" + convnext_block_net("0.2"), "net.yaml"), Phase::train,
          2, registry, ctx, &gpu);
  auto type_of = [&](const Blob* blob, bool producer) {
    for (size_t i = 0; i < net.num_layers(); ++i) {
      const auto& blobs = producer ? net.layer_tops(i) : net.layer_bottoms(i);
      for (const Blob* b : blobs) {
        if (b == blob) return net.layer(i).type();
      }
    }
    return std::string("(input)");
  };
  int converts = 0;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    if (net.layer(i).type() != "Convert") continue;
    ++converts;
    const std::string from = type_of(net.layer_bottoms(i)[0], true);
    const std::string to = type_of(net.layer_tops(i)[0], false);
    EXPECT_TRUE(from == "(input)" || from == "InnerProduct" || to == "InnerProduct")
        << net.layer(i).name() << ": from " << from << " to " << to;
  }
  EXPECT_GE(converts, 1);  // the input's
  for (const char* blob : {"stem_norm", "norm", "fc1", "scaled", "out", "pool"}) {
    EXPECT_EQ(net.blob(blob).value.dtype(), DType::bf16) << blob;
  }
  // The views: the same bytes, the layout relabelled.
  EXPECT_TRUE(net.blob("to_last").value.shares_storage(net.blob("dw").value));
  EXPECT_EQ(net.blob("dw").value.layout(), Layout::nhwc);
  EXPECT_EQ(net.blob("to_last").value.layout(), Layout::nchw);
  EXPECT_EQ(net.blob("to_first").value.layout(), Layout::nhwc);
  EXPECT_EQ(net.blob("out").value.layout(), Layout::nhwc);
}

// In f32 on the CPU (nchw) the Permutes stay copies and nothing converts.
TEST(ConvNeXtBlockNet, F32NchwHasNoConverts) {
  Context ctx;
  const LayerRegistry registry = builtin_layers();
  Net net(parse_config(convnext_block_net("0.2"), "net.yaml"), Phase::train, 2, registry, ctx);
  for (size_t i = 0; i < net.num_layers(); ++i) EXPECT_NE(net.layer(i).type(), "Convert");
  EXPECT_FALSE(net.blob("to_last").value.shares_storage(net.blob("dw").value));
}

}  // namespace
}  // namespace crema::testing
