// Windows (core/VIEWS.md): a Concat's bottoms written by their producers straight into its top.
// With model.concat_views on and off, training gives the same bits; the windows are the ones the
// rules allow; the plan's arena shrinks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/net.h"
#include "layers/register_layers.h"
#include "optim/solver.h"
#include "tests/support/layer_harness.h"

namespace crema {
namespace {

// Inception-style: one input, three convolutions of different widths (1x1 pointwise, 3x3 in
// two groups, 5x5 with stride 1), joined, then a convolution and a loss. conv0 first, so that
// the windows' backward data reaches a parameter gradient. 7x6 maps: chunks of several images.
const char* kInception = R"(
inputs: {data: [3, 7, 6], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: conv_a, type: Convolution, bottom: conv0, top: a, num_output: 2, kernel_size: 1}
  - {name: conv_b, type: Convolution, bottom: conv0, top: b, num_output: 6, kernel_size: 3, pad: 1,
     group: 2}
  - {name: conv_c, type: Convolution, bottom: conv0, top: c, num_output: 3, kernel_size: 5, pad: 2}
  - {name: cat, type: Concat, bottom: [a, b, c], top: cat}
  - {name: conv_d, type: Convolution, bottom: cat, top: d, num_output: 4, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: d, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// DenseNet-style: each Concat joins the running features (read by the next convolution too, so
// a Split's top: copied) and one new convolution's (a window). 16x17 maps: one image per chunk.
const char* kDense = R"(
inputs: {data: [3, 16, 17], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: conv1, type: Convolution, bottom: conv0, top: g1, num_output: 2, kernel_size: 3, pad: 1}
  - {name: cat1, type: Concat, bottom: [conv0, g1], top: cat1}
  - {name: conv2, type: Convolution, bottom: cat1, top: g2, num_output: 3, kernel_size: 1}
  - {name: cat2, type: Concat, bottom: [cat1, g2], top: cat2}
  - {name: pool, type: Pooling, bottom: cat2, top: pool, pool: max, kernel_size: 4, stride: 4}
  - {name: fc, type: InnerProduct, bottom: pool, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// Producers that cannot write windows: b through an in-place ReLU (two writers), c through a
// ReLU of its own (a producer without windows), a also read by the loss branch (two readers).
const char* kNoWindows = R"(
inputs: {data: [3, 7, 6], label: []}
layers:
  - {name: conv_a, type: Convolution, bottom: data, top: a, num_output: 2, kernel_size: 1}
  - {name: conv_b, type: Convolution, bottom: data, top: b, num_output: 3, kernel_size: 3, pad: 1}
  - {name: relu_b, type: ReLU, bottom: b, top: b}
  - {name: conv_c, type: Convolution, bottom: data, top: c0, num_output: 3, kernel_size: 3, pad: 1}
  - {name: relu_c, type: ReLU, bottom: c0, top: c}
  - {name: conv_e, type: Convolution, bottom: data, top: e, num_output: 2, kernel_size: 3, pad: 1}
  - {name: cat, type: Concat, bottom: [a, b, c, e], top: cat}
  - {name: fc, type: InnerProduct, bottom: cat, top: fc, num_output: 5}
  - {name: fc_a, type: InnerProduct, bottom: a, top: fc_a, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
  - {name: loss_a, type: SoftmaxWithLoss, bottom: [fc_a, label], top: loss_a}
)";

ConfigNode model(const char* yaml, bool views) {
  return parse_config(std::string("concat_views: ") + (views ? "true" : "false") + "\n" + yaml,
                      "net.yaml");
}

void fill_batch(Net& net, uint64_t seed) {
  Tensor& data = net.blob("data").value;
  const auto x = testing::random_values(size_t(data.numel()), -1, 1, seed);
  std::copy(x.begin(), x.end(), data.data<float>());
  for (int64_t i = 0; i < net.batch_size(); ++i) {
    net.blob("label").value.data<float>()[i] = float((seed + i) % 5);
  }
}

// The convolutions whose top is a window, by name.
std::vector<std::string> windowed(Net& net) {
  std::vector<std::string> names;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    if (net.layer(i).top_window(0) != nullptr) names.push_back(net.layer(i).name());
  }
  return names;
}

// Losses of three SGD steps at batch 5, the kept Concat tops after the last forward, every
// parameter gradient of the last backward and the trained weights.
std::vector<float> train(const char* yaml, bool views, const std::vector<std::string>& keep) {
  Context ctx;
  Net net(model(yaml, views), Phase::train, 5, builtin_layers(), ctx);
  for (const std::string& name : keep) net.keep(name);
  std::unique_ptr<Solver> solver =
      make_solver(parse_config("{type: sgd, base_lr: 0.1, momentum: 0.9}", "solver.yaml"), 10);
  std::vector<float> seen;
  for (int64_t iter = 0; iter < 3; ++iter) {
    fill_batch(net, uint64_t(iter + 1));
    net.forward(ctx);
    seen.push_back(float(net.loss()));
    for (const std::string& name : keep) {
      const auto v = net.blob(name).value.to_vector();
      seen.insert(seen.end(), v.begin(), v.end());
    }
    net.backward(ctx);
    for (const Param* p : net.learnable_params()) {
      const auto g = p->grad.to_vector();
      seen.insert(seen.end(), g.begin(), g.end());
    }
    solver->step(net.learnable_params(), iter, ctx);
  }
  for (const Param* p : net.learnable_params()) {
    const auto v = p->value.to_vector();
    seen.insert(seen.end(), v.begin(), v.end());
  }
  return seen;
}

void expect_same_bits(const char* yaml, const std::vector<std::string>& keep) {
  const std::vector<float> on = train(yaml, true, keep), off = train(yaml, false, keep);
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) ASSERT_EQ(on[i], off[i]) << "value " << i;
}

TEST(ConcatViews, InceptionBlockTrainsToTheSameBits) {
  expect_same_bits(kInception, {"cat"});
}
TEST(ConcatViews, DenseChainTrainsToTheSameBits) {
  expect_same_bits(kDense, {"cat1", "cat2"});
}
TEST(ConcatViews, CopiesWhereNoWindowIsAllowedGiveTheSameBits) {
  expect_same_bits(kNoWindows, {"cat"});
}

TEST(ConcatViews, WindowsAreWhereTheRulesAllow) {
  Context ctx;
  Net inception(model(kInception, true), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(windowed(inception), (std::vector<std::string>{"conv_a", "conv_b", "conv_c"}));
  Net dense(model(kDense, true), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(windowed(dense), (std::vector<std::string>{"conv1", "conv2"}));
  Net none(model(kNoWindows, true), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(windowed(none), (std::vector<std::string>{"conv_e"}));
  Net off(model(kInception, false), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_TRUE(windowed(off).empty());
  // A kept bottom is read after forward: it gets its storage back.
  inception.keep("b");
  EXPECT_EQ(windowed(inception), (std::vector<std::string>{"conv_a", "conv_c"}));
}

// The window's offsets follow the batch size; the test net (forward only) has them too.
TEST(ConcatViews, BatchSizeChangesAndTheTestNetKeepTheSameBits) {
  std::vector<float> seen[2];
  for (bool views : {true, false}) {
    Context ctx;  // each net its own, so that both draw the same weights
    Net test(model(kInception, views), Phase::test, 4, builtin_layers(), ctx);
    for (int64_t batch : {4, 3, 6}) {
      test.set_batch_size(batch, ctx);
      fill_batch(test, uint64_t(batch));
      test.forward(ctx);
      seen[views].push_back(float(test.loss()));
    }
  }
  EXPECT_EQ(seen[0], seen[1]);
}

// The bottoms' values and gradients leave the plan: 5 images of 2 + 6 + 3 channels of 7x6
// floats, each rounded up to kBlockAlignment, twice. The peak of the lives does not grow (here
// it stays: the backward's peak, where the Concat's gradient now lives until its first
// producer's backward, is the net's); the greedy packing may then do worse or better.
TEST(ConcatViews, TheBottomsLeaveThePlan) {
  Context ctx;
  Net on(model(kInception, true), Phase::train, 5, builtin_layers(), ctx);
  Net off(model(kInception, false), Phase::train, 5, builtin_layers(), ctx);
  const auto rounded = [](int64_t channels) {
    const int64_t bytes = 5 * channels * 7 * 6 * int64_t(sizeof(float));
    return (bytes + int64_t(kBlockAlignment) - 1) / int64_t(kBlockAlignment) *
           int64_t(kBlockAlignment);
  };
  EXPECT_EQ(off.memory().blocks - on.memory().blocks, 2 * (rounded(2) + rounded(6) + rounded(3)));
  EXPECT_LE(on.memory().peak, off.memory().peak);
}

}  // namespace
}  // namespace crema
