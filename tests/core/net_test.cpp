#include "core/net.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "layers/register_layers.h"
#include "tests/support/layer_harness.h"
#include "tests/support/numeric_gradient.h"

namespace crema {
namespace {

const char* kSmallNet = R"(
inputs: {data: [2, 5, 5], label: []}
layers:
  - {name: conv, type: Convolution, bottom: data, top: conv, num_output: 3, kernel_size: 3}
  - {name: relu, type: ReLU, bottom: conv, top: conv}
  - {name: fc, type: InnerProduct, bottom: conv, top: fc, num_output: 4}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
  - {name: acc, type: Accuracy, bottom: [fc, label], top: acc, phase: test}
)";

std::string error_of(const std::string& yaml, Phase phase = Phase::train) {
  Context ctx;
  const ConfigNode model = parse_config(yaml, "net.yaml");
  try {
    Net net(model, phase, 2, builtin_layers(), ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Net, ShapesPhasesAndInPlace) {
  Context ctx;
  const ConfigNode model = parse_config(kSmallNet, "net.yaml");
  Net train(model, Phase::train, 4, builtin_layers(), ctx);
  EXPECT_EQ(train.blob("conv").value.shape(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(train.blob("fc").value.shape(), (Shape{4, 4}));
  EXPECT_FALSE(train.has_blob("acc"));
  EXPECT_EQ(train.num_layers(), 4u);  // no split: fc has one consumer in train
  Net test(model, Phase::test, 4, builtin_layers(), ctx);
  EXPECT_TRUE(test.has_blob("acc"));
  EXPECT_EQ(test.num_layers(), 7u);  // + accuracy + the splits of fc and label
  EXPECT_NE(test.summary().find("fc_fc_split"), std::string::npos) << test.summary();
  test.set_batch_size(1, ctx);
  EXPECT_EQ(test.blob("fc").value.shape(), (Shape{1, 4}));
}

TEST(Net, BackwardSkipsInputsAndAccuracy) {
  Context ctx;
  const ConfigNode model = parse_config(kSmallNet, "net.yaml");
  Net net(model, Phase::test, 2, builtin_layers(), ctx);
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const std::string& name = net.layer(i).name();
    EXPECT_EQ(net.layer_runs_backward(i), name != "acc" && name != "label_split") << name;
  }
}

// The gradient through a split (fc feeds two losses) equals the sum of the two paths'.
// The outputs' names come without reading a value (before the first forward the tops hold
// none: on a GPU, reading them copied uninitialized memory); outputs() reads them after it.
TEST(Net, OutputNamesBeforeForwardAndValuesAfter) {
  Context ctx;
  const ConfigNode model = parse_config(kSmallNet, "net.yaml");
  Net net(model, Phase::test, 2, builtin_layers(), ctx);
  EXPECT_EQ(net.output_names(), (std::vector<std::string>{"acc", "loss"}));
  net.blob("data").value.fill(0.5f);
  net.blob("label").value.fill(1.0f);
  net.forward(ctx);
  const auto outputs = net.outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].first, "acc");
  EXPECT_EQ(outputs[1].first, "loss");
  EXPECT_EQ(outputs[1].second, double(net.blob("loss").value.to_vector()[0]));
}

TEST(Net, SplitSumsGradients) {
  const char* yaml = R"(
inputs: {data: [3], label: []}
layers:
  - {name: fc, type: InnerProduct, bottom: data, top: fc, num_output: 4}
  - {name: loss_a, type: SoftmaxWithLoss, bottom: [fc, label], top: loss_a}
  - {name: loss_b, type: SoftmaxWithLoss, bottom: [fc, label], top: loss_b, loss_weight: 0.5}
)";
  Context ctx;
  const ConfigNode model = parse_config(yaml, "net.yaml");
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  const auto x = testing::random_values(6, -1, 1, 1);
  std::copy(x.begin(), x.end(), net.blob("data").value.data<float>());
  net.blob("label").value.data<float>()[0] = 1;
  net.blob("label").value.data<float>()[1] = 3;
  net.forward(ctx);
  const double loss = net.loss();
  net.backward(ctx);
  // 1.5 x the single-loss objective: compare with central differences of the net's objective.
  testing::expect_net_gradient(net, ctx, *net.learnable_params()[0]);
  EXPECT_GT(loss, 0.0);
}

TEST(Net, SharedParametersByName) {
  const char* yaml = R"(
inputs: {data: [3], label: []}
layers:
  - {name: a, type: InnerProduct, bottom: data, top: a, num_output: 3, param: {weight: {name: w}}}
  - {name: b, type: InnerProduct, bottom: a, top: b, num_output: 3, param: {weight: {name: w}}}
  - {name: loss, type: SoftmaxWithLoss, bottom: [b, label], top: loss}
)";
  Context ctx;
  const ConfigNode model = parse_config(yaml, "net.yaml");
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(net.learnable_params().size(), 3u);  // a.weight (shared), a.bias, b.bias
  EXPECT_TRUE(net.layer(0).params()[0].value.shares_storage(net.layer(1).params()[0].value));
  // A test net sharing the train net's weights gets the shared one in both of its layers.
  Net test(model, Phase::test, 2, builtin_layers(), ctx);
  test.share_params_from(net);
  EXPECT_TRUE(test.layer(0).params()[0].value.shares_storage(net.layer(0).params()[0].value));
  EXPECT_TRUE(test.layer(1).params()[0].value.shares_storage(net.layer(0).params()[0].value));
}

TEST(Net, ErrorsNameThePlace) {
  const std::string missing = error_of(R"(
inputs: {data: [1, 8, 8]}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 2, kernel_size: 3}
  - {name: pool2, type: Pooling, bottom: conv9, top: pool2, kernel_size: 2})");
  EXPECT_NE(missing.find("net.yaml:5:"), std::string::npos) << missing;
  EXPECT_NE(missing.find("bottom 'conv9' is not produced by any earlier layer (known: conv1, data)"),
            std::string::npos) << missing;

  const std::string type = error_of(R"(
inputs: {data: [1, 8, 8]}
layers:
  - {name: conv1, type: Convolutoin, bottom: data, top: conv1})");
  EXPECT_NE(type.find("unknown layer type 'Convolutoin' (did you mean 'Convolution'?)"), std::string::npos) << type;
  EXPECT_NE(type.find("InnerProduct"), std::string::npos) << type;

  const std::string key = error_of(R"(
inputs: {data: [1, 8, 8]}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 2, kernel_size: 3, strid: 2})");
  EXPECT_NE(key.find("unknown key 'strid'"), std::string::npos) << key;
  EXPECT_NE(key.find("did you mean 'stride'"), std::string::npos) << key;

  const std::string big = error_of(R"(
inputs: {data: [1, 4, 4]}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 2, kernel_size: 7})");
  EXPECT_NE(big.find("net.yaml:4:"), std::string::npos) << big;
  EXPECT_NE(big.find("conv1"), std::string::npos) << big;

  const std::string count = error_of(R"(
inputs: {data: [4]}
layers:
  - {name: loss, type: SoftmaxWithLoss, bottom: data, top: loss})");
  EXPECT_NE(count.find("takes 2 bottom(s), got 1"), std::string::npos) << count;

  const std::string dup = error_of(R"(
inputs: {data: [4]}
layers:
  - {name: a, type: ReLU, bottom: data, top: a}
  - {name: a, type: ReLU, bottom: a, top: b})");
  EXPECT_NE(dup.find("duplicate layer name 'a'"), std::string::npos) << dup;
}

TEST(Net, SaveAndLoadWeights) {
  Context ctx;
  const ConfigNode model = parse_config(kSmallNet, "net.yaml");
  Net a(model, Phase::train, 2, builtin_layers(), ctx);
  const std::string path = ::testing::TempDir() + "/net_weights.safetensors";
  a.save_weights(path);
  Context other(Device::cpu(), 99);
  Net b(model, Phase::test, 2, builtin_layers(), other);
  EXPECT_NE(b.learnable_params()[0]->value.to_vector(), a.learnable_params()[0]->value.to_vector());
  b.load_weights(path, true);
  for (size_t i = 0; i < a.learnable_params().size(); ++i) {
    EXPECT_EQ(b.learnable_params()[i]->value.to_vector(), a.learnable_params()[i]->value.to_vector());
  }
  const ConfigNode wider = parse_config(std::string(kSmallNet).replace(
      std::string(kSmallNet).find("num_output: 4"), 13, "num_output: 6"), "wide.yaml");
  Net c(wider, Phase::train, 2, builtin_layers(), ctx);
  try {
    c.load_weights(path, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'fc' expects [6, 27]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema
