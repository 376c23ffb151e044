// The Net's fusion pass (core/net_fusion.h): which layer lists it rewrites and which it leaves
// alone, the fused layers' names, and -- on the CPU -- fused and unfused nets giving the same bits
// forward and backward, train and test, with a weights file written unfused loaded fused.
#include "core/net_fusion.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/collective.h"
#include "core/error.h"
#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/core/net_fusion_test_util.h"
#include "tests/support/error_text.h"

namespace crema::testing {
namespace {

// "name:Type" for each layer of the net built from `layers` (on data [3, 5, 5]).
std::vector<std::string> layers_of(const std::string& layers, const std::string& extra = "") {
  Context ctx;
  const ConfigNode model =
      parse_config("inputs: {data: [3, 5, 5]}\n" + extra + "layers:\n" + layers, "net.yaml");
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  std::vector<std::string> out;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    out.push_back(net.layer(i).name() + ":" + net.layer(i).type());
  }
  return out;
}

using Names = std::vector<std::string>;

const std::string kBnRelu = R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: relu, type: ReLU, bottom: y, top: y}
)";

TEST(NetFusion, BatchNormThenReLU) {
  EXPECT_EQ(layers_of(kBnRelu), (Names{"bn+relu:BatchNormReLU"}));
  EXPECT_EQ(layers_of(kBnRelu, "fuse: false\n"), (Names{"bn:BatchNorm", "relu:ReLU"}));
  // In place on the BatchNorm's input too.
  EXPECT_EQ(layers_of(R"(
  - {name: s.bn1, type: BatchNorm, bottom: data, top: data}
  - {name: s.relu1, type: ReLU, bottom: data, top: data}
)"),
            (Names{"s.bn1+relu1:BatchNormReLU"}));
}

// model.sync_batch_norm: every spatial BatchNorm without its own `sync:` key becomes a
// SyncBatchNorm (a layer that takes the run's collective), which nothing fuses.
TEST(NetFusion, ModelSyncBatchNormMakesTheBatchNormsSyncAndUnfused) {
  EXPECT_EQ(layers_of(kBnRelu, "sync_batch_norm: true\n"), (Names{"bn:BatchNorm", "relu:ReLU"}));
  Context ctx;
  const ConfigNode model = parse_config(R"(inputs: {data: [3, 5, 5]}
sync_batch_norm: true
layers:
  - {name: a, type: BatchNorm, bottom: data, top: a}
  - {name: b, type: BatchNorm, bottom: a, top: b, sync: false}
  - {name: c, type: BatchNorm, bottom: b, top: c, mode: per_activation}
)",
                                        "net.yaml");
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  ASSERT_EQ(net.num_layers(), 3u);
  EXPECT_NE(dynamic_cast<UsesCollective*>(&net.layer(0)), nullptr);
  EXPECT_EQ(dynamic_cast<UsesCollective*>(&net.layer(1)), nullptr);  // its own key wins
  EXPECT_EQ(dynamic_cast<UsesCollective*>(&net.layer(2)), nullptr);  // no sync form
}

// The fused layer's bottom names, by layer name.
std::map<std::string, std::vector<std::string>> bottoms_of(const std::string& layers) {
  Context ctx;
  const ConfigNode model =
      parse_config("inputs: {data: [3, 5, 5]}\nlayers:\n" + layers, "net.yaml");
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  std::map<std::string, std::vector<std::string>> out;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    for (const Blob* b : net.layer_bottoms(i)) out[net.layer(i).name()].push_back(b->name);
  }
  return out;
}

// In place on a blob a convolution writes and only the BatchNorm reads: the convolution writes it
// apart and the fused layer runs out of place (no copy of x); the name still holds the output.
TEST(NetFusion, InPlaceInputWrittenApart) {
  const std::string conv =
      "  - {name: conv, type: Convolution, bottom: data, top: c, num_output: 3, kernel_size: 1}\n";
  const std::string bn_relu = R"(
  - {name: bn, type: BatchNorm, bottom: c, top: c}
  - {name: relu, type: ReLU, bottom: c, top: c}
  - {name: fc, type: InnerProduct, bottom: c, top: fc, num_output: 2}
)";
  auto apart = bottoms_of(conv + bn_relu);
  EXPECT_EQ(apart["bn+relu"], (std::vector<std::string>{"c/bn_input"}));
  EXPECT_EQ(apart["fc"], (std::vector<std::string>{"c"}));
  // Written in place itself (by the Sigmoid): the fused layer stays in place (and copies x).
  auto in_place =
      bottoms_of(conv + "  - {name: sig, type: Sigmoid, bottom: c, top: c}\n" + bn_relu);
  EXPECT_EQ(in_place["bn+relu"], (std::vector<std::string>{"c"}));
}

// A BatchNorm left alone in place on such a blob (a downsampling shortcut's, its sum absorbed by
// the other branch's BatchNorm) reads it apart too; in place after an in-place layer it copies.
TEST(NetFusion, LoneBatchNormInputWrittenApart) {
  const std::string net = R"(
  - {name: conv, type: Convolution, bottom: data, top: c, num_output: 3, kernel_size: 1}
  - {name: ds, type: Convolution, bottom: data, top: d, num_output: 3, kernel_size: 1}
  - {name: bn, type: BatchNorm, bottom: c, top: c}
  - {name: ds_bn, type: BatchNorm, bottom: d, top: d}
  - {name: add, type: Eltwise, bottom: [c, d], top: s}
  - {name: relu, type: ReLU, bottom: s, top: s}
)";
  auto bottoms = bottoms_of(net);
  EXPECT_EQ(bottoms["bn+add+relu"], (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(bottoms["ds_bn"], (std::vector<std::string>{"d/bn_input"}));
  auto in_place = bottoms_of(
      R"(
  - {name: sig, type: Sigmoid, bottom: data, top: d}
  - {name: sig2, type: Sigmoid, bottom: d, top: d}
  - {name: ds_bn, type: BatchNorm, bottom: d, top: d}
)");
  EXPECT_EQ(in_place["ds_bn"], (std::vector<std::string>{"d"}));
}

TEST(NetFusion, BatchNormAddReLU) {
  const std::string net = R"(
  - {name: conv, type: Convolution, bottom: data, top: c, num_output: 3, kernel_size: 1}
  - {name: layer1.0.bn3, type: BatchNorm, bottom: c, top: c}
  - {name: layer1.0.add, type: Eltwise, bottom: [data, c], top: s}
  - {name: layer1.0.relu3, type: ReLU, bottom: s, top: s}
)";
  // data feeds conv and the sum: a Split.
  EXPECT_EQ(layers_of(net), (Names{"data_split:Split", "conv:Convolution",
                                   "layer1.0.bn3+add+relu3:BatchNormReLU"}));
}

TEST(NetFusion, LeavesOtherPatternsAlone) {
  // The BatchNorm's output read by another layer too.
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: relu, type: ReLU, bottom: y, top: r}
  - {name: sig, type: Sigmoid, bottom: y, top: z}
)")
                .front(),
            "bn:BatchNorm");
  // A ReLU not in place: its input stays observable.
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: relu, type: ReLU, bottom: y, top: r}
)"),
            (Names{"bn:BatchNorm", "relu:ReLU"}));
  // A leaky ReLU; per-activation statistics.
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: relu, type: ReLU, bottom: y, top: y, negative_slope: 0.1}
)")
                .size(),
            2u);
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y, mode: per_activation}
  - {name: relu, type: ReLU, bottom: y, top: y}
)")
                .size(),
            2u);
  // Sums that are not a residual add: a product, other coefficients, three bottoms.
  for (const std::string eltwise : {"operation: PROD", "coeff: [1, -1]", "coeff: [2, 1]"}) {
    SCOPED_TRACE(eltwise);
    EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: add, type: Eltwise, bottom: [y, data], top: s, )" +
                        eltwise + R"(}
  - {name: relu, type: ReLU, bottom: s, top: s}
)")[1],
              "bn:BatchNorm");
  }
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: add, type: Eltwise, bottom: [y, data, data], top: s}
  - {name: relu, type: ReLU, bottom: s, top: s}
)")[1],
            "bn:BatchNorm");
  // (The sum read by another layer before an in-place ReLU is refused by the Net itself: the
  // ReLU then gets its own top, named as the sum's.) Read after the ReLU, it fuses.
  EXPECT_EQ(layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: add, type: Eltwise, bottom: [y, data], top: s}
  - {name: relu, type: ReLU, bottom: s, top: s}
  - {name: sig, type: Sigmoid, bottom: s, top: z}
)")[1],
            "bn+add+relu:BatchNormReLU");
}

TEST(NetFusion, AbsorbedLayersKeysStillChecked) {
  EXPECT_CONTAINS(error_of([] {
                    layers_of(R"(
  - {name: bn, type: BatchNorm, bottom: data, top: y}
  - {name: relu, type: ReLU, bottom: y, top: y, negative_slop: 0.1}
)");
                  }),
                  "unknown key 'negative_slop' in layer 'relu'");
}

TEST(NetFusion, SummaryNamesTheFusedLayer) {
  Context ctx;
  const ConfigNode model = residual_model(true);
  Net net(model, Phase::train, 2, builtin_layers(), ctx);
  const std::string summary = net.summary();
  for (const char* name : {"bn1+relu1", "bn2+relu2", "b.bn3+add+relu3", "ds_bn+add2+relu4"}) {
    EXPECT_NE(summary.find(name), std::string::npos) << name << "\n" << summary;
  }
  EXPECT_NE(summary.find("bn4 "), std::string::npos) << summary;
}

TEST(NetFusion, SameBitsAsUnfusedOnCpu) {
  for (int64_t batch : {1, 2}) {
    Context ctx;
    expect_fused_same_bits(ctx, batch);
  }
}

}  // namespace
}  // namespace crema::testing
