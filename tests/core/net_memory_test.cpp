// The memory plan (core/net_memory.h, Net's model.memory_plan): the packing, what it saves, and
// that training with it gives the same bits as without it.
#include "core/net_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/net.h"
#include "layers/register_layers.h"
#include "optim/solver.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema {
namespace {

MemoryBlock block(size_t bytes, int first, int last) {
  MemoryBlock b;
  b.bytes = bytes;
  b.life.add(first);
  b.life.add(last);
  return b;
}

TEST(PackBlocks, ReusesBytesOnlyBetweenDisjointLives) {
  // a [0, 2] and b [3, 4] may share; c [1, 3] overlaps both.
  std::vector<MemoryBlock> blocks{block(1000, 0, 2), block(1000, 3, 4), block(300, 1, 3)};
  const size_t arena = pack_blocks(blocks);
  EXPECT_EQ(blocks[0].bytes, 1024u);  // rounded to kBlockAlignment
  EXPECT_EQ(blocks[0].offset, blocks[1].offset);
  EXPECT_EQ(blocks[2].offset, 1024u);
  EXPECT_EQ(arena, 1024u + 512u);
  EXPECT_EQ(peak_of_lives(blocks), 1024u + 512u);
}

TEST(PackBlocks, RandomLivesNeverOverlapInBytes) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<MemoryBlock> blocks;
    for (int i = 0; i < 60; ++i) {
      const int first = int(random() % 40);
      blocks.push_back(block(1 + random() % 5000, first, first + int(random() % 10)));
    }
    const size_t arena = pack_blocks(blocks);
    size_t sum = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      sum += blocks[i].bytes;
      EXPECT_EQ(blocks[i].offset % kBlockAlignment, 0u);
      EXPECT_LE(blocks[i].offset + blocks[i].bytes, arena);
      for (size_t j = 0; j < i; ++j) {
        if (!blocks[i].life.overlaps(blocks[j].life)) continue;
        const bool apart = blocks[i].offset + blocks[i].bytes <= blocks[j].offset ||
                           blocks[j].offset + blocks[j].bytes <= blocks[i].offset;
        EXPECT_TRUE(apart) << "trial " << trial << ": blocks " << j << " and " << i;
      }
    }
    EXPECT_GE(arena, peak_of_lives(blocks));
    EXPECT_LT(arena, sum);
  }
}

TEST(PlacedAllocator, HandsOutItsPlaceOrNothing) {
  PlacedAllocator place;
  Tensor shape_only({4, 5}, DType::f32, Device::cpu(), &place);
  EXPECT_EQ(shape_only.raw(), nullptr);  // unplaced: a shape, no storage
  float arena[32];
  place.place(arena, sizeof arena);
  Tensor placed({4, 8}, DType::f32, Device::cpu(), &place);
  EXPECT_EQ(placed.raw(), static_cast<void*>(arena));
}

// A training net with every case the plan must get right: in-place layers (BatchNorm copies x,
// ReLU reads y), Split (conv1 and flat feed two layers each), a view (Flatten) whose gradient
// aliases its top's, a loss in the middle, weights shared by two layers, a frozen first layer
// (so that conv1 runs with propagate_down false), Dropout, Concat, Slice (whose backward reads no
// value; its pieces along the channels are not contiguous: copies), a layer with the default
// declaration (Sigmoid), one whose backward reads neither its bottom nor its top (ChannelShuffle)
// and max pooling.
const char* kNet = R"(
inputs: {data: [3, 6, 6], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 4, kernel_size: 3,
     pad: 1, param: {weight: {lr_mult: 0}, bias: {lr_mult: 0}}}
  - {name: conv1, type: Convolution, bottom: conv0, top: conv1, num_output: 4, kernel_size: 3, pad: 1}
  - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: conv2, type: Convolution, bottom: conv1, top: conv2, num_output: 4, kernel_size: 3, pad: 1}
  - {name: shuffle, type: ChannelShuffle, bottom: conv2, top: shuffled, groups: 2}
  - {name: bn2, type: BatchNorm, bottom: shuffled, top: bn2}
  - {name: add, type: Eltwise, bottom: [bn2, conv1], top: add}
  - {name: relu2, type: ReLU, bottom: add, top: add}
  - {name: pool, type: Pooling, bottom: add, top: pool, pool: max, kernel_size: 2, stride: 2}
  - {name: flat, type: Flatten, bottom: pool, top: flat}
  - {name: aux, type: InnerProduct, bottom: flat, top: aux, num_output: 5, param: {weight: {name: w}}}
  - {name: aux_loss, type: SoftmaxWithLoss, bottom: [aux, label], top: aux_loss, loss_weight: 0.3}
  - {name: drop, type: Dropout, bottom: flat, top: drop, dropout_ratio: 0.25}
  - {name: fc, type: InnerProduct, bottom: drop, top: fc, num_output: 5, param: {weight: {name: w}}}
  - {name: squash, type: Sigmoid, bottom: fc, top: squash}
  - {name: cat, type: Concat, bottom: [squash, fc], top: cat}
  - {name: halves, type: Slice, bottom: cat, top: [half0, half1]}
  - {name: head0, type: InnerProduct, bottom: half0, top: head0, num_output: 5}
  - {name: head1, type: InnerProduct, bottom: half1, top: head1, num_output: 5}
  - {name: head, type: Eltwise, bottom: [head0, head1], top: head}
  - {name: loss, type: SoftmaxWithLoss, bottom: [head, label], top: loss}
  - {name: acc, type: Accuracy, bottom: [head, label], top: acc, phase: test}
)";

const char* kSolver = "{type: sgd, base_lr: 0.1, momentum: 0.9, weight_decay: 0.001, iter_size: 2}";

// The plan on or off; `fuse` as core/net_fusion.h's key (on, bn1 + relu1 run as one layer);
// `layout` model.layout's (nhwc: each convolution runs a compute copy of its weights and sums its
// filter gradient in a scratch the plan places: layers/convolution_base.h).
ConfigNode model_with_plan(const char* yaml, bool plan, bool fuse = true,
                           const char* layout = "nchw") {
  return parse_config(std::string("memory_plan: ") + (plan ? "true" : "false") + "\nfuse: " +
                          (fuse ? "true" : "false") + "\nlayout: " + layout + "\n" + yaml,
                      "net.yaml");
}

void fill_batch(Net& net, uint64_t seed) {
  const int64_t n = net.batch_size();
  const auto x = testing::random_values(size_t(n * 3 * 6 * 6), -1, 1, seed);
  std::copy(x.begin(), x.end(), net.blob("data").value.data<float>());
  for (int64_t i = 0; i < n; ++i) net.blob("label").value.data<float>()[i] = float((seed + i) % 5);
}

// Every loss of a few training steps, the test net's outputs at batch 3 and at a last batch of
// 2, and the trained weights.
std::vector<float> train(bool plan, const char* layout = "nchw") {
  Context ctx;
  const ConfigNode model = model_with_plan(kNet, plan, true, layout);
  Net net(model, Phase::train, 4, builtin_layers(), ctx);
  Net test(model, Phase::test, 3, builtin_layers(), ctx);
  test.share_params_from(net);
  std::unique_ptr<Solver> solver = make_solver(parse_config(kSolver, "solver.yaml"), 10);
  std::vector<float> seen;
  for (int64_t iter = 0; iter < 4; ++iter) {
    for (int k = 0; k < solver->iter_size(); ++k) {
      fill_batch(net, uint64_t(10 * iter + k));
      net.forward(ctx);
      seen.push_back(float(net.loss()));
      net.backward(ctx);
    }
    solver->step(net.learnable_params(), iter, ctx);
  }
  for (int64_t batch : {3, 2, 3}) {
    test.set_batch_size(batch, ctx);
    fill_batch(test, uint64_t(batch));
    test.forward(ctx);
    for (const auto& [name, value] : test.outputs()) seen.push_back(float(value));
  }
  for (const Param* p : net.learnable_params()) {
    const auto v = p->value.to_vector();
    seen.insert(seen.end(), v.begin(), v.end());
  }
  for (const Buffer* b : net.buffers()) {
    const auto v = b->value.to_vector();
    seen.insert(seen.end(), v.begin(), v.end());
  }
  return seen;
}

TEST(MemoryPlan, TrainingGivesTheSameBitsAsKeepingEverything) {
  const std::vector<float> planned = train(true), whole = train(false);
  ASSERT_EQ(planned.size(), whole.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    ASSERT_EQ(planned[i], whole[i]) << "value " << i;  // bit for bit, NaN excepted (none here)
  }
}

// In nhwc the convolutions' filter-gradient scratches live in the arena, each at its layer's
// backward alone, sharing bytes with what is dead by then: the bits must not change.
TEST(MemoryPlan, NhwcTrainingGivesTheSameBitsAsKeepingEverything) {
  const std::vector<float> planned = train(true, "nhwc"), whole = train(false, "nhwc");
  ASSERT_EQ(planned.size(), whole.size());
  for (size_t i = 0; i < planned.size(); ++i) ASSERT_EQ(planned[i], whole[i]) << "value " << i;
}

// A convolution's scratch is planned, not the layer's own state: in nhwc the convolutions keep
// only the compute copies of their weights beyond what they keep in nchw; the arena holds each
// scratch.
TEST(MemoryPlan, ConvolutionScratchesAreInTheArena) {
  const char* yaml = R"(
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 16, kernel_size: 3}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: conv2, type: Convolution, bottom: conv1, top: conv2, num_output: 32, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: conv2, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";
  Context ctx;
  Net net(model_with_plan(yaml, true, true, "nhwc"), Phase::train, 2, builtin_layers(), ctx);
  Net nchw(model_with_plan(yaml, true), Phase::train, 2, builtin_layers(), ctx);
  int64_t copies = 0;
  std::vector<const Tensor*> scratches;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    Layer& layer = net.layer(i);
    if (layer.type() != "Convolution") continue;
    copies += int64_t(layer.params()[0].value.nbytes());  // the f32 nhwc compute copy
    const Tensor* scratch = layer.backward_scratch();
    ASSERT_NE(scratch, nullptr) << layer.name();
    EXPECT_EQ(scratch->shape(), layer.params()[0].value.shape());
    EXPECT_EQ(scratch->layout(), Layout::nhwc);
    EXPECT_NE(scratch->raw(), nullptr) << layer.name() << ": placed";
    scratches.push_back(scratch);
  }
  ASSERT_EQ(scratches.size(), 2u);
  EXPECT_EQ(net.memory().layer_state - nchw.memory().layer_state, copies);

  // Without the plan each convolution takes its scratch from the context.
  Net whole(model_with_plan(yaml, false, true, "nhwc"), Phase::train, 2, builtin_layers(), ctx);
  for (size_t i = 0; i < whole.num_layers(); ++i) {
    if (whole.layer(i).type() != "Convolution") continue;
    const Tensor* scratch = whole.layer(i).backward_scratch();
    ASSERT_NE(scratch, nullptr);
    EXPECT_NE(scratch->raw(), nullptr);
  }
}

TEST(MemoryPlan, SharesBytesAndSaysSo) {
  Context ctx;
  // Unfused, so that bn1 runs in place and keeps its copy of x (the fused layer keeps none).
  Net planned(model_with_plan(kNet, true, false), Phase::train, 4, builtin_layers(), ctx);
  Net whole(model_with_plan(kNet, false, false), Phase::train, 4, builtin_layers(), ctx);
  const Net::Memory p = planned.memory(), w = whole.memory();
  EXPECT_TRUE(p.planned);
  EXPECT_FALSE(w.planned);
  EXPECT_EQ(p.activations, w.activations);  // what keeping everything would take, either way
  EXPECT_EQ(w.arena, 0);
  EXPECT_GT(p.arena, 0);
  EXPECT_LT(p.kept + p.arena, 2 * p.activations);
  // In place, BatchNorm keeps a copy of x (bn1 only: bn2 has its own top): 4 x 4 x 6 x 6 floats.
  EXPECT_EQ(p.layer_state % 4, 0);
  EXPECT_GE(p.layer_state, 4 * 4 * 6 * 6 * 4);
}

// ResNet's downsampling block: the fused bn+add+relu's residual r (d, the shortcut's BatchNorm
// output) has no reader after that layer's forward, since its backward takes the ReLU's mask from
// y (layers/batch_norm_relu.cpp). So r dies there and the gradients alive at that backward (of s,
// c and d) may take its bytes -- they could not while the backward read r -- and the bits are
// those of the net that keeps everything.
TEST(MemoryPlan, FusedResidualDiesAtTheForward) {
  const char* yaml = R"(
inputs: {data: [3, 6, 6], label: []}
layers:
  - {name: conv, type: Convolution, bottom: data, top: c, num_output: 4, kernel_size: 3, pad: 1}
  - {name: ds, type: Convolution, bottom: data, top: d, num_output: 4, kernel_size: 1}
  - {name: bn, type: BatchNorm, bottom: c, top: c}
  - {name: ds_bn, type: BatchNorm, bottom: d, top: d}
  - {name: add, type: Eltwise, bottom: [c, d], top: s}
  - {name: relu, type: ReLU, bottom: s, top: s}
  - {name: fc, type: InnerProduct, bottom: s, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";
  Context ctx;
  Net planned(model_with_plan(yaml, true), Phase::train, 4, builtin_layers(), ctx);
  Net whole(model_with_plan(yaml, false), Phase::train, 4, builtin_layers(), ctx);
  whole.share_params_from(planned);
  bool fused = false;
  for (size_t i = 0; i < planned.num_layers(); ++i) {
    fused = fused || planned.layer(i).name() == "bn+add+relu";
  }
  ASSERT_TRUE(fused);
  auto bytes_of = [](const Tensor& t) {
    const char* p = static_cast<const char*>(t.raw());
    return std::make_pair(p, p + t.nbytes());
  };
  const auto r = bytes_of(planned.blob("d").value);
  bool reused = false;
  for (const char* name : {"s", "c", "d"}) {
    const auto g = bytes_of(planned.blob(name).grad);
    reused = reused || (g.first < r.second && r.first < g.second);
  }
  EXPECT_TRUE(reused) << "no gradient alive at the fused backward took the residual's bytes";

  std::vector<std::vector<float>> grads[2];
  int k = 0;
  for (Net* net : {&planned, &whole}) {
    for (Param* p : net->learnable_params()) ctx.fill(p->grad, 0.0f);
    fill_batch(*net, 3);
    net->forward(ctx);
    net->backward(ctx);
    for (const Param* p : net->learnable_params()) grads[k].push_back(p->grad.to_vector());
    ++k;
  }
  EXPECT_EQ(grads[0], grads[1]);
}

// A test net runs forward only: each value dies at its last reader, so a chain of equal layers
// needs two places, whatever its length.
TEST(MemoryPlan, ForwardOnlyChainNeedsTwoPlaces) {
  std::string yaml = "inputs: {data: [64], label: []}\nlayers:\n";
  std::string bottom = "data";
  for (int i = 1; i <= 6; ++i) {
    const std::string top = "ip" + std::to_string(i);
    yaml += "  - {name: " + top + ", type: InnerProduct, bottom: " + bottom + ", top: " + top +
            ", num_output: 64}\n";
    bottom = top;
  }
  yaml += "  - {name: loss, type: SoftmaxWithLoss, bottom: [ip6, label], top: loss}\n";
  Context ctx;
  Net net(parse_config(yaml, "net.yaml"), Phase::test, 4, builtin_layers(), ctx);
  EXPECT_EQ(net.memory().arena, 2 * 4 * 64 * 4);  // 1 KiB each, a multiple of the alignment
  EXPECT_CONTAINS(testing::error_of([&] { net.backward(ctx); }), "backward on a test-phase net");
}

// Code that reads a blob after forward keeps it (predict, --extract); the rest may be reused.
TEST(MemoryPlan, KeptBlobsHoldTheirValuesAfterForward) {
  Context ctx;
  Net planned(model_with_plan(kNet, true), Phase::test, 3, builtin_layers(), ctx);
  Net whole(model_with_plan(kNet, false), Phase::test, 3, builtin_layers(), ctx);
  whole.share_params_from(planned);
  planned.keep("conv2");
  for (Net* net : {&planned, &whole}) {
    fill_batch(*net, 5);
    net->forward(ctx);
  }
  EXPECT_EQ(planned.blob("conv2").value.to_vector(), whole.blob("conv2").value.to_vector());
  EXPECT_EQ(planned.outputs(), whole.outputs());  // loss and accuracy: kept, being outputs
  EXPECT_CONTAINS(testing::error_of([&] { planned.keep("nope"); }), "no blob 'nope'");
}

// The plan's estimate against the bytes the allocator holds, on the CPU, sampled after
// construction and after every layer's forward and backward and the solver's update of two
// steps (the host heap's own high-water mark is the process's, other tests included; `crema
// time` prints it for one run). A net without convolutions: their shared workspace is not planned.
TEST(MemoryPlan, EstimateAgreesWithTheMeasuredPeak) {
  const char* yaml = R"(
inputs: {data: [256], label: []}
layers:
  - {name: ip1, type: InnerProduct, bottom: data, top: ip1, num_output: 512}
  - {name: bn1, type: BatchNorm, bottom: ip1, top: ip1}
  - {name: relu1, type: ReLU, bottom: ip1, top: ip1}
  - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 512}
  - {name: bn2, type: BatchNorm, bottom: ip2, top: bn2}
  - {name: add, type: Eltwise, bottom: [bn2, ip1], top: add}
  - {name: relu2, type: ReLU, bottom: add, top: add}
  - {name: ip3, type: InnerProduct, bottom: add, top: ip3, num_output: 512}
  - {name: relu3, type: ReLU, bottom: ip3, top: ip3}
  - {name: ip4, type: InnerProduct, bottom: ip3, top: ip4, num_output: 10}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip4, label], top: loss}
)";
  Context ctx;
  Allocator& heap = ctx.allocator();
  const int64_t before = int64_t(heap.current_bytes());
  int64_t measured = 0;
  auto sample = [&] { measured = std::max(measured, int64_t(heap.current_bytes()) - before); };
  Net net(parse_config(yaml, "net.yaml"), Phase::train, 512, builtin_layers(), ctx);
  sample();
  std::unique_ptr<Solver> solver = make_solver(parse_config(kSolver, "solver.yaml"), 10);
  for (int64_t iter = 0; iter < 2; ++iter) {
    ctx.fill(net.blob("data").value, 0.5f);
    ctx.fill(net.blob("label").value, 1.0f);
    for (size_t i = 0; i < net.num_layers(); ++i) net.forward_layer(i, ctx), sample();
    net.backward(ctx);  // the loss weights and zeroed gradients first, as each step does
    sample();
    solver->step(net.learnable_params(), iter, ctx);
    sample();
  }
  int64_t solver_bytes = 0;
  for (const auto& entry : solver->state(net.learnable_params(), ctx)) {
    solver_bytes += int64_t(entry.second.nbytes());
  }
  const Net::Memory m = net.memory();
  const double planned =
      double(2 * m.params + m.buffers + solver_bytes + m.kept + m.arena + m.layer_state);
  EXPECT_NEAR(double(measured), planned, 0.1 * planned)
      << "measured " << measured << ", planned " << planned;
  EXPECT_LT(planned, double(2 * m.params + m.buffers + solver_bytes + 2 * m.activations));
}

// With convolutions: the plan counts the context's shared workspace at its largest layer's size
// (Layer::workspace_bytes: the im2col columns on the CPU), which the Net takes before the first
// step, so that no pass grows it (an outgrown workspace stays alive with the context).
TEST(MemoryPlan, CountsTheConvolutionsSharedWorkspace) {
  const char* yaml = R"(
inputs: {data: [3, 32, 32], label: []}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 16, kernel_size: 5,
     pad: 2}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: conv2, type: Convolution, bottom: conv1, top: conv2, num_output: 32, kernel_size: 3,
     pad: 1, stride: 2}
  - {name: relu2, type: ReLU, bottom: conv2, top: conv2}
  - {name: conv3, type: Convolution, bottom: conv2, top: conv3, num_output: 32, kernel_size: 1}
  - {name: ip, type: InnerProduct, bottom: conv3, top: ip, num_output: 10}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}
)";
  Context ctx;
  Allocator& heap = ctx.allocator();
  const int64_t before = int64_t(heap.current_bytes());
  Net net(parse_config(yaml, "net.yaml"), Phase::train, 64, builtin_layers(), ctx);
  const int64_t built = int64_t(heap.current_bytes()) - before;
  const Net::Memory m = net.memory();
  // The im2col columns of the largest pass.
  ASSERT_GT(m.workspace, 0);
  std::unique_ptr<Solver> solver = make_solver(parse_config(kSolver, "solver.yaml"), 10);
  int64_t measured = built;
  for (int64_t iter = 0; iter < 2; ++iter) {
    ctx.fill(net.blob("data").value, 0.5f);
    ctx.fill(net.blob("label").value, 1.0f);
    net.forward(ctx);
    measured = std::max(measured, int64_t(heap.current_bytes()) - before);
    net.backward(ctx);
    measured = std::max(measured, int64_t(heap.current_bytes()) - before);
    solver->step(net.learnable_params(), iter, ctx);
    measured = std::max(measured, int64_t(heap.current_bytes()) - before);
  }
  // Taken at construction: the steps grew nothing.
  EXPECT_GE(built, m.workspace);
  int64_t solver_bytes = 0;
  for (const auto& entry : solver->state(net.learnable_params(), ctx)) {
    solver_bytes += int64_t(entry.second.nbytes());
  }
  const double planned = double(2 * m.params + m.buffers + solver_bytes + m.kept + m.arena +
                                m.layer_state + m.workspace);
  EXPECT_NEAR(double(measured), planned, 0.1 * planned)
      << "measured " << measured << ", planned " << planned << ", workspace " << m.workspace;
}

}  // namespace
}  // namespace crema
