// Windows (core/VIEWS.md): a Concat's bottoms written by their producers straight into its top.
// With model.concat_views on and off, training gives the same bits; the windows are the ones the
// rules allow; the plan's arena shrinks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/net.h"
#include "layers/register_layers.h"
#include "optim/solver.h"
#include "tests/core/net_windows_nets.h"
#include "tests/support/layer_harness.h"
#include "tests/support/numeric_gradient.h"

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

// Inception 3a's shape, small: four branches from one input (a 1x1, a 1x1 reduce + 3x3, a 1x1
// reduce + 5x5, a max pool + 1x1), joined, one ReLU in place on the join, a pooling head.
const char* kInception3a = R"(
inputs: {data: [6, 8, 8], label: []}
layers:
  - {name: b1, type: Convolution, bottom: data, top: b1, num_output: 4, kernel_size: 1}
  - {name: r3, type: Convolution, bottom: data, top: r3, num_output: 6, kernel_size: 1}
  - {name: relu_r3, type: ReLU, bottom: r3, top: r3}
  - {name: b3, type: Convolution, bottom: r3, top: b3, num_output: 8, kernel_size: 3, pad: 1}
  - {name: r5, type: Convolution, bottom: data, top: r5, num_output: 2, kernel_size: 1}
  - {name: relu_r5, type: ReLU, bottom: r5, top: r5}
  - {name: b5, type: Convolution, bottom: r5, top: b5, num_output: 2, kernel_size: 5, pad: 2}
  - {name: pool, type: Pooling, bottom: data, top: pool, pool: max, kernel_size: 3, stride: 1,
     pad: 1}
  - {name: bp, type: Convolution, bottom: pool, top: bp, num_output: 2, kernel_size: 1}
  - {name: cat, type: Concat, bottom: [b1, b3, b5, bp], top: cat}
  - {name: relu, type: ReLU, bottom: cat, top: cat}
  - {name: head, type: Pooling, bottom: cat, top: head, pool: ave, kernel_size: 8, stride: 8}
  - {name: fc, type: InnerProduct, bottom: head, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// Slices along the batch (axis 0: contiguous pieces, 1 KiB an image) into two convolutions,
// joined again along the batch: the Slice's tops are views of its bottom, the convolutions' tops
// windows of the Concat's.
const char* kSlices = R"(
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1], axis: 0, slice_point: [2]}
  - {name: conv_a, type: Convolution, bottom: s0, top: a, num_output: 2, kernel_size: 3, pad: 1}
  - {name: conv_b, type: Convolution, bottom: s1, top: b, num_output: 2, kernel_size: 1}
  - {name: cat, type: Concat, bottom: [a, b], top: cat, axis: 0}
  - {name: fc, type: InnerProduct, bottom: cat, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

const char* const kSlicesNoWindows = testing::kSlicesThroughReLUs;  // net_windows_nets.h

// The rules: s0 may be a view; s1 is flattened (Flatten's top is a view of its own: copied), s2
// read by nobody (an output, kept whole: copied), and the labels an input (copied).
const char* kSliceRules = R"(
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1, s2], axis: 0, slice_point: [2, 4]}
  - {name: flat, type: Flatten, bottom: s1, top: f}
  - {name: fc0, type: InnerProduct, bottom: s0, top: fc0, num_output: 5}
  - {name: fc1, type: InnerProduct, bottom: f, top: fc1, num_output: 5}
  - {name: scores, type: Concat, bottom: [fc0, fc1], top: scores, axis: 0}
  - {name: label_slice, type: Slice, bottom: label, top: [label4, label_rest], axis: 0,
     slice_point: [4]}
  - {name: loss, type: SoftmaxWithLoss, bottom: [scores, label4], top: loss}
)";

// Along the channels: s0 (3 channels of 8x8) a view at batch 1; s1 read by nobody, so its
// gradient is zeroed by the Net and copied by the Slice's backward, next to s0's in place.
const char* kSliceOutput = R"(
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1], axis: 1, slice_point: [3]}
  - {name: fc, type: InnerProduct, bottom: s0, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// 7x6 maps: s1 starts 42 floats in, not where a block may start (a kernel's vector loads).
const char* kSliceUnaligned = R"(
inputs: {data: [3, 7, 6], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1], axis: 1, slice_point: [1]}
  - {name: fc0, type: InnerProduct, bottom: s0, top: fc0, num_output: 5}
  - {name: fc1, type: InnerProduct, bottom: s1, top: fc1, num_output: 5}
  - {name: sum, type: Eltwise, bottom: [fc0, fc1], top: fc}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// model.concat_views: "true", "false" or "always".
ConfigNode model(const char* yaml, const std::string& views) {
  return parse_config("concat_views: " + views + "\n" + yaml, "net.yaml");
}
ConfigNode model(const char* yaml, bool views) {
  return model(yaml, std::string(views ? "true" : "false"));
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
std::vector<float> train(const char* yaml, const std::string& views,
                         const std::vector<std::string>& keep, int64_t batch) {
  Context ctx;
  Net net(model(yaml, views), Phase::train, batch, builtin_layers(), ctx);
  for (const std::string& name : keep) net.keep(name);
  EXPECT_EQ(net.view_blobs().empty(), views == "false") << "the test needs views to be kept";
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

void expect_same_bits(const char* yaml, const std::vector<std::string>& keep, int64_t batch = 5,
                      const std::string& views = "true") {
  const std::vector<float> on = train(yaml, views, keep, batch),
                           off = train(yaml, "false", keep, batch);
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) ASSERT_EQ(on[i], off[i]) << "value " << i;
}

TEST(ConcatViews, InceptionBlockTrainsToTheSameBits) {
  expect_same_bits(kInception3a, {"cat"});
}
TEST(ConcatViews, DenseChainTrainsToTheSameBits) {
  expect_same_bits(kDense, {"cat1", "cat2"});
}
TEST(ConcatViews, CopiesWhereNoWindowIsAllowedGiveTheSameBits) {
  expect_same_bits(kNoWindows, {"cat"});
}

TEST(ConcatViews, WindowsAreWhereTheRulesAllow) {
  Context ctx;
  Net inception(model(kInception3a, true), Phase::train, 2, builtin_layers(), ctx);
  const std::vector<std::string> branches{"b1", "b3", "b5", "bp"};
  EXPECT_EQ(inception.view_candidate_blobs(), branches);
  EXPECT_EQ(inception.view_blobs(), branches);
  EXPECT_EQ(windowed(inception), branches);  // the convolutions, named as their tops
  Net dense(model(kDense, true), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(dense.view_candidate_blobs(), (std::vector<std::string>{"g1", "g2"}));
  Net none(model(kNoWindows, true), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_EQ(none.view_candidate_blobs(), (std::vector<std::string>{"e"}));
  Net off(model(kInception3a, false), Phase::train, 2, builtin_layers(), ctx);
  EXPECT_TRUE(windowed(off).empty());
  EXPECT_TRUE(off.view_candidate_blobs().empty());
  // A kept bottom is read after forward: it gets its storage back.
  inception.keep("b3");
  EXPECT_EQ(inception.view_candidate_blobs(), (std::vector<std::string>{"b1", "b5", "bp"}));
}

// The window's offsets follow the batch size; the test net (forward only) has them too.
TEST(ConcatViews, BatchSizeChangesAndTheTestNetKeepTheSameBits) {
  std::vector<float> seen[2];
  for (bool views : {true, false}) {
    Context ctx;  // each net its own, so that both draw the same weights
    Net test(model(kInception3a, views), Phase::test, 4, builtin_layers(), ctx);
    for (int64_t batch : {4, 3, 6}) {
      test.set_batch_size(batch, ctx);
      EXPECT_EQ(test.view_blobs().size(), views ? 4u : 0u) << batch;
      fill_batch(test, uint64_t(batch));
      test.forward(ctx);
      seen[views].push_back(float(test.loss()));
    }
  }
  EXPECT_EQ(seen[0], seen[1]);
}

int64_t rounded(int64_t bytes) {
  const int64_t unit = int64_t(kBlockAlignment);
  return (bytes + unit - 1) / unit * unit;
}

// The bottoms' values and gradients leave the plan: 5 images of 4 + 8 + 2 + 2 channels of 8x8
// floats, each rounded up to kBlockAlignment, twice; the arena is not larger (the plan keeps
// windows only where it is not), here smaller, and so is the peak of the lives.
TEST(ConcatViews, TheBottomsLeaveThePlan) {
  Context ctx;
  Net on(model(kInception3a, true), Phase::train, 5, builtin_layers(), ctx);
  Net off(model(kInception3a, false), Phase::train, 5, builtin_layers(), ctx);
  const auto maps = [](int64_t channels) { return rounded(5 * channels * 8 * 8 * 4); };
  EXPECT_EQ(off.memory().blocks - on.memory().blocks, 2 * (maps(4) + maps(8) + maps(2) + maps(2)));
  EXPECT_LT(on.memory().arena, off.memory().arena);
  EXPECT_LE(on.memory().peak, off.memory().peak);
  EXPECT_EQ(on.memory().views, 4);
  EXPECT_EQ(on.memory().view_copies_saved, 2 * 5 * (4 + 8 + 2 + 2) * 8 * 8 * 4);
}

// Windows that would make the arena larger are dropped (core/VIEWS.md): in the small Inception
// block the greedy packing fits the Concat's longer-lived gradient worse; in the dense chain the
// windows are kept where they cost nothing. Either way the arena with the key on is not larger.
TEST(ConcatViews, WindowsNeverGrowTheArena) {
  for (int64_t batch : {1, 2, 5}) {
    for (const char* yaml : {kInception, kInception3a, kDense, kNoWindows}) {
      Context ctx;
      Net on(model(yaml, true), Phase::train, batch, builtin_layers(), ctx);
      Net off(model(yaml, false), Phase::train, batch, builtin_layers(), ctx);
      EXPECT_LE(on.memory().arena, off.memory().arena) << yaml << " at batch " << batch;
    }
  }
  Context ctx;
  Net small(model(kInception, true), Phase::train, 5, builtin_layers(), ctx);
  EXPECT_EQ(small.view_candidate_blobs(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(small.view_blobs().empty());
}

// DenseNet-121 (configs/zoo): each Concat's one window (the new 32 channels) keeps the running
// gradient alive longer; the plan keeps only the windows that cost no arena bytes.
TEST(ConcatViews, DenseNet121ArenaIsNotLarger) {
  const std::string path = std::string(CREMA_SOURCE_DIR) + "/configs/zoo/densenet121.yaml";
  const ConfigNode on_root = load_config(path),
                   off_root = load_config(path, {"+model.concat_views=false"});
  Context ctx;
  Net on(on_root.at("model"), Phase::train, 1, builtin_layers(), ctx);
  Net off(off_root.at("model"), Phase::train, 1, builtin_layers(), ctx);
  EXPECT_LE(on.memory().arena, off.memory().arena);
  EXPECT_EQ(on.memory().view_candidates, 58);
}

// --- Slice: tops as views of the bottom (core/VIEWS.md) ---

TEST(SliceViews, BatchSlicesTrainToTheSameBits) {
  expect_same_bits(kSlices, {});
  expect_same_bits(kSlices, {"cat"});
  expect_same_bits(kSliceOutput, {}, 1);
}

// Views that would make the arena larger are dropped, the Slice's too; `always` keeps them (and
// the bits stay the same).
TEST(SliceViews, AlwaysKeepsTheViewsThatCostBytes) {
  Context ctx;
  Net free(model(kSlicesNoWindows, true), Phase::train, 5, builtin_layers(), ctx);
  Net always(model(kSlicesNoWindows, std::string("always")), Phase::train, 5, builtin_layers(),
             ctx);
  Net off(model(kSlicesNoWindows, false), Phase::train, 5, builtin_layers(), ctx);
  const std::vector<std::string> pieces{"s0", "s1"};
  EXPECT_EQ(free.view_candidate_blobs(), pieces);
  EXPECT_TRUE(free.view_blobs().empty());
  EXPECT_EQ(free.memory().arena, off.memory().arena);
  EXPECT_EQ(always.view_blobs(), pieces);
  EXPECT_GT(always.memory().arena, off.memory().arena);  // the greedy packing fits it worse
  EXPECT_LE(always.memory().peak, off.memory().peak);
  expect_same_bits(kSlicesNoWindows, {}, 5, "always");
  expect_same_bits(kInception, {"cat"}, 5, "always");
}

// The gradient through the views (conv0's, reached only through the Slice's backward) against
// central differences of the loss, in f32 as tests/core/net_test.cpp's: steps of 1e-2, within 2e-3.
TEST(SliceViews, GradientThroughTheViewsMatchesCentralDifferences) {
  for (const auto& [yaml, batch] : {std::pair<const char*, int64_t>{kSlices, 5},
                                    std::pair<const char*, int64_t>{kSliceOutput, 1}}) {
    Context ctx;
    Net net(model(yaml, std::string("always")), Phase::train, batch, builtin_layers(), ctx);
    ASSERT_FALSE(net.view_blobs().empty());
    fill_batch(net, 3);
    net.forward(ctx);
    net.backward(ctx);
    Param& w = *net.learnable_params()[0];  // conv0.weight
    ASSERT_EQ(w.name, "conv0.weight");
    testing::expect_net_gradient(net, ctx, w, 7, "batch " + std::to_string(batch));
  }
}

TEST(SliceViews, ViewsAreWhereTheRulesAllow) {
  Context ctx;
  Net slices(model(kSlices, true), Phase::train, 5, builtin_layers(), ctx);
  // s0 and s1 views of conv0 (and the convolutions' tops windows of cat).
  EXPECT_EQ(slices.view_blobs(), (std::vector<std::string>{"s0", "s1", "a", "b"}));
  Net rules(model(kSliceRules, true), Phase::train, 5, builtin_layers(), ctx);
  EXPECT_EQ(rules.view_candidate_blobs(), (std::vector<std::string>{"s0"}));
  // Along the channels the pieces are contiguous only at batch 1; 3 channels of 8x8 floats start
  // where a block may, 1 of 7x6 does not.
  Net one(model(kSliceOutput, true), Phase::train, 1, builtin_layers(), ctx);
  EXPECT_EQ(one.view_candidate_blobs(), (std::vector<std::string>{"s0"}));
  one.set_batch_size(2, ctx);
  EXPECT_TRUE(one.view_candidate_blobs().empty());
  Net odd(model(kSliceUnaligned, true), Phase::train, 1, builtin_layers(), ctx);
  EXPECT_EQ(odd.view_candidate_blobs(), (std::vector<std::string>{"s0"}));
  // A kept top is read after the step: copied.
  slices.keep("s1");
  EXPECT_EQ(slices.view_candidate_blobs(), (std::vector<std::string>{"s0", "a", "b"}));
}

TEST(SliceViews, BatchSizeChangesAndTheTestNetKeepTheSameBits) {
  std::vector<float> seen[2];
  for (bool views : {true, false}) {
    Context ctx;
    Net test(model(kSlices, views), Phase::test, 5, builtin_layers(), ctx);
    for (int64_t batch : {5, 8, 6}) {
      test.set_batch_size(batch, ctx);
      EXPECT_EQ(test.view_blobs().size(), views ? 4u : 0u) << batch;
      fill_batch(test, uint64_t(batch));
      test.forward(ctx);
      seen[views].push_back(float(test.loss()));
      const auto top = test.blob("cat").value.to_vector();
      seen[views].insert(seen[views].end(), top.begin(), top.end());
    }
  }
  EXPECT_EQ(seen[0], seen[1]);
}

// The tops' values and gradients leave the plan (2 and 3 images of 4 channels of 8x8 floats), and
// so do the convolutions' (2 and 3 images of 2 channels); the arena is smaller here.
TEST(SliceViews, TheTopsLeaveThePlan) {
  Context ctx;
  Net on(model(kSlices, true), Phase::train, 5, builtin_layers(), ctx);
  Net off(model(kSlices, false), Phase::train, 5, builtin_layers(), ctx);
  const int64_t tops = rounded(2 * 1024) + rounded(3 * 1024);
  const int64_t branches = rounded(2 * 512) + rounded(3 * 512);  // a, b
  EXPECT_EQ(off.memory().blocks - on.memory().blocks, 2 * (tops + branches));
  EXPECT_LT(on.memory().arena, off.memory().arena);
  EXPECT_EQ(on.memory().view_copies_saved, 2 * (5 * 1024 + 5 * 512));
}

}  // namespace
}  // namespace crema
