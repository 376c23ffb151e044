#include "optim/param_groups.h"

#include <gtest/gtest.h>

#include <string>

#include "layers/register_layers.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

using testing::error_of;

// Two convolutions under torchvision-like dotted names, then a head: "layer1.0.conv" ... "fc".
const char* kNet = R"(
inputs: {data: [2, 6, 6], label: []}
layers:
  - {name: layer1.0.conv, type: Convolution, bottom: data, top: a, num_output: 3, kernel_size: 3}
  - {name: layer2.0.conv, type: Convolution, bottom: a, top: b, num_output: 3, kernel_size: 3,
     param: {bias: {lr_mult: 2, decay_mult: 0}}}
  - {name: fc, type: InnerProduct, bottom: b, top: fc, num_output: 4}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

struct Fixture {
  Context ctx;
  ConfigNode model = parse_config(kNet, "net.yaml");
  Net net{model, Phase::train, 2, builtin_layers(), ctx};

  const Param& param(const std::string& name) {
    for (const Param* p : net.learnable_params()) {
      if (p->name == name) return *p;
    }
    ADD_FAILURE() << "no parameter " << name;
    return *net.learnable_params()[0];
  }
  bool runs_backward(const std::string& layer) {
    for (size_t i = 0; i < net.num_layers(); ++i) {
      if (net.layer(i).name() == layer) return net.layer_runs_backward(i);
    }
    ADD_FAILURE() << "no layer " << layer;
    return false;
  }
  void apply(const std::string& solver_yaml) {
    apply_param_groups(parse_config(solver_yaml, "solver.yaml"), net);
  }
};

TEST(ParamGroups, FirstFullMatchWinsAndMultipliesTheLayersOwn) {
  Fixture f;
  f.apply(R"({param_groups: [{match: "layer2\\..*|fc\\..*", lr_mult: 0.5},
                              {match: ".*", lr_mult: 0.1, decay_mult: 3}]})");
  EXPECT_FLOAT_EQ(f.param("fc.weight").lr_mult, 0.5f);
  EXPECT_FLOAT_EQ(f.param("fc.weight").decay_mult, 1.0f);
  EXPECT_FLOAT_EQ(f.param("layer2.0.conv.weight").lr_mult, 0.5f);
  EXPECT_FLOAT_EQ(f.param("layer2.0.conv.bias").lr_mult, 1.0f);  // the layer's 2 times 0.5
  EXPECT_FLOAT_EQ(f.param("layer2.0.conv.bias").decay_mult, 0.0f);
  EXPECT_FLOAT_EQ(f.param("layer1.0.conv.weight").lr_mult, 0.1f);
  EXPECT_FLOAT_EQ(f.param("layer1.0.conv.weight").decay_mult, 3.0f);
  EXPECT_EQ(count_parameters(f.net).frozen, 0);
}

TEST(ParamGroups, UnmatchedParametersKeepTheirMultipliers) {
  Fixture f;
  f.apply(R"({param_groups: [{match: "fc\\.bias", lr_mult: 4}]})");
  EXPECT_FLOAT_EQ(f.param("fc.bias").lr_mult, 4.0f);
  EXPECT_FLOAT_EQ(f.param("fc.weight").lr_mult, 1.0f);
  EXPECT_FLOAT_EQ(f.param("layer2.0.conv.bias").lr_mult, 2.0f);
}

// lr_mult 0 freezes as `param: {lr_mult: 0}` does: the frozen layers no longer run backward, so
// their gradients are not computed (left as they were), and the counts move to "frozen".
TEST(ParamGroups, ZeroFreezesAndNoGradientIsComputed) {
  Fixture f;
  EXPECT_TRUE(f.runs_backward("layer1.0.conv"));
  const int64_t all = count_parameters(f.net).trainable;
  f.apply(R"({param_groups: [{match: "fc\\..*", lr_mult: 1}, {match: "layer.*", lr_mult: 0}]})");
  EXPECT_TRUE(f.param("layer1.0.conv.weight").frozen());
  EXPECT_FALSE(f.runs_backward("layer1.0.conv"));
  EXPECT_FALSE(f.runs_backward("layer2.0.conv"));
  EXPECT_TRUE(f.runs_backward("fc"));
  const ParameterCounts counts = count_parameters(f.net);
  EXPECT_EQ(counts.trainable, 3 * 2 * 2 * 4 + 4);  // fc: [4, 3*2*2] and its bias
  EXPECT_EQ(counts.trainable + counts.frozen, all);

  Param& frozen = f.net.layer(1).params()[0];  // layer2.0.conv.weight
  f.ctx.fill(frozen.grad, 7.0f);
  f.ctx.fill(f.net.blob("data").value, 0.5f);
  f.ctx.fill(f.net.blob("label").value, 1.0f);
  f.net.forward(f.ctx);
  f.net.backward(f.ctx);
  for (float g : frozen.grad.to_vector()) ASSERT_EQ(g, 7.0f);
  bool fc_gradient = false;
  for (float g : f.param("fc.weight").grad.to_vector()) fc_gradient = fc_gradient || g != 0.0f;
  EXPECT_TRUE(fc_gradient);
}

TEST(ParamGroups, Errors) {
  // A name must match whole: "fc" is not "fc.weight".
  std::string e =
      error_of([] { Fixture().apply(R"({param_groups: [{match: "fc", lr_mult: 0}]})"); });
  EXPECT_CONTAINS(e, "solver.yaml:1:25");
  EXPECT_CONTAINS(e, "'fc' matches no parameter");
  EXPECT_CONTAINS(e, "layer1.0.conv.weight");
  // A group that earlier groups leave nothing to.
  e = error_of([] {
    Fixture().apply(
        R"({param_groups: [{match: ".*", lr_mult: 1}, {match: "fc\\..*", lr_mult: 0}]})");
  });
  EXPECT_CONTAINS(e, "'fc\\..*' matches no parameter that an earlier group left");
  e = error_of([] { Fixture().apply(R"({param_groups: [{match: "fc(", lr_mult: 1}]})"); });
  EXPECT_CONTAINS(e, "'fc(' is not a regular expression");
  e = error_of([] { Fixture().apply(R"({param_groups: [{match: ".*", lr_mult: -1}]})"); });
  EXPECT_CONTAINS(e, "lr_mult must not be negative");
  e = error_of([] { Fixture().apply(R"({param_groups: [{match: ".*", lr: 1}]})"); });
  EXPECT_CONTAINS(e, "unknown key 'lr'");
  e = error_of([] { Fixture().apply(R"({param_groups: {match: ".*"}})"); });
  EXPECT_CONTAINS(e, "expected a list");
}

const char* kBatchNormConfig = R"(
model:
  inputs: {data: [2, 4, 4], label: []}
  layers:
    - {name: conv, type: Convolution, bottom: data, top: conv, num_output: 3, kernel_size: 3}
    - {name: bn, type: BatchNorm, bottom: conv, top: conv}
    - {name: fc, type: InnerProduct, bottom: conv, top: fc, num_output: 2}
    - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
solver: {base_lr: 0.1, freeze_batch_norm: FREEZE}
)";

// solver.freeze_batch_norm: the running statistics stay as they were through a training pass
// (true and stats), and the weight and bias are frozen (true only).
TEST(FreezeBatchNorm, StatisticsAndWeights) {
  for (const std::string freeze : {"true", "stats"}) {
    SCOPED_TRACE(freeze);
    std::string text = kBatchNormConfig;
    text.replace(text.find("FREEZE"), 6, freeze);
    const std::string path = testing::fresh_dir("freeze_bn_" + freeze) + "/net.yaml";
    testing::write_text(path, text);
    const std::vector<std::string> overrides = batch_norm_overrides(load_config(path));
    EXPECT_EQ(overrides, std::vector<std::string>{"++model.layers.1.use_global_stats=true"});
    const ConfigNode root = load_config(path, overrides);
    Context ctx;
    Net net(root.at("model"), Phase::train, 2, builtin_layers(), ctx);
    apply_param_groups(root.at("solver"), net);
    const Layer& bn = net.layer(1);
    ASSERT_EQ(bn.name(), "bn");
    EXPECT_EQ(bn.params()[0].frozen(), freeze == "true");
    EXPECT_EQ(bn.params()[1].frozen(), freeze == "true");
    EXPECT_FALSE(net.layer(0).params()[0].frozen());
    EXPECT_TRUE(net.layer_runs_backward(0));  // conv still trains through the frozen BN
    std::vector<float> data(size_t(net.blob("data").value.numel()));
    for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 7) - 2.5f;
    net.blob("data").value.copy_from(Tensor::from_vector(net.blob("data").value.shape(), data));
    ctx.fill(net.blob("label").value, 1.0f);
    net.forward(ctx);
    net.backward(ctx);
    EXPECT_EQ(bn.buffers()[0].value.to_vector(), (std::vector<float>{0, 0, 0}));  // running_mean
    EXPECT_EQ(bn.buffers()[1].value.to_vector(), (std::vector<float>{1, 1, 1}));  // running_var
    EXPECT_EQ(bn.buffers()[2].value.to_vector(), (std::vector<float>{0}));  // num_batches_tracked
  }
  const std::string path = testing::fresh_dir("freeze_bn_bad") + "/net.yaml";
  std::string text = kBatchNormConfig;
  testing::write_text(path, text.replace(text.find("FREEZE"), 6, "yes please"));
  EXPECT_CONTAINS(error_of([&] { batch_norm_overrides(load_config(path)); }),
                  "solver.freeze_batch_norm must be true (statistics and weights), stats");
  testing::write_text(path, text.replace(text.find("yes please"), 10, "false"));
  EXPECT_TRUE(batch_norm_overrides(load_config(path)).empty());
}

}  // namespace
}  // namespace crema
