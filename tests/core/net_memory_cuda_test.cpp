// The memory plan on the GPU, in bf16 channels-last: each convolution runs a bf16 compute copy of
// its weights and sums its filter gradient in an f32 scratch that the plan places in the arena for
// that layer's backward alone (layers/convolution_base.h), sharing bytes with values dead by then.
// The downsampling block's fused bn3+add2+relu3 masks its backward by y, so its residual (the
// shortcut's BatchNorm output) dies at its forward and its bytes are reused (layers/
// batch_norm_relu.cpp). The planned net must give the bits of the net that keeps everything, and
// a CUDA graph of its step must replay them (the places never move).
#include <gtest/gtest.h>

#include "tests/core/net_fusion_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::testing {
namespace {

// Two residual blocks, the second downsampling (a 1x1 stride-2 convolution and a BatchNorm in
// place on the shortcut), as ResNet's; C = 3 in, as a stem's.
const char* kBf16Net = R"(
precision: bf16
inputs: {data: [3, 12, 10], label: []}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 16, kernel_size: 3, pad: 1}
  - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: conv2, type: Convolution, bottom: conv1, top: conv2, num_output: 16, kernel_size: 3, pad: 1}
  - {name: bn2, type: BatchNorm, bottom: conv2, top: conv2}
  - {name: add1, type: Eltwise, bottom: [conv2, conv1], top: block1}
  - {name: relu2, type: ReLU, bottom: block1, top: block1}
  - {name: ds, type: Convolution, bottom: block1, top: ds, num_output: 32, kernel_size: 1, stride: 2,
     bias_term: false}
  - {name: ds_bn, type: BatchNorm, bottom: ds, top: ds}
  - {name: conv3, type: Convolution, bottom: block1, top: conv3, num_output: 32, kernel_size: 3,
     pad: 1, stride: 2, bias_term: false}
  - {name: bn3, type: BatchNorm, bottom: conv3, top: conv3}
  - {name: add2, type: Eltwise, bottom: [conv3, ds], top: block2}
  - {name: relu3, type: ReLU, bottom: block2, top: block2}
  - {name: pool, type: Pooling, bottom: block2, top: pool, global_pooling: true, pool: average}
  - {name: fc, type: InnerProduct, bottom: pool, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

ConfigNode bf16_model(bool plan) {
  return parse_config(std::string("memory_plan: ") + (plan ? "true" : "false") + "\n" + kBf16Net,
                      "net.yaml");
}

// The loss and every parameter gradient of one forward and backward on batch `seed`; the
// gradients are zeroed after.
std::vector<std::vector<uint32_t>> step_bits(Net& net, Context& ctx, uint64_t seed) {
  set_batch(net, seed);
  net.forward(ctx);
  net.backward(ctx);
  std::vector<std::vector<uint32_t>> out{bits_of(net.blob("loss").value)};
  for (const Param* p : net.learnable_params()) out.push_back(bits_of(p->grad));
  net.zero_param_grads(ctx);
  return out;
}

TEST(MemoryPlanCuda, Bf16NhwcPlannedGivesTheBitsOfKeepingEverything) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Net planned(bf16_model(true), Phase::train, 4, builtin_layers(), ctx);
  Net whole(bf16_model(false), Phase::train, 4, builtin_layers(), ctx);
  whole.share_params_from(planned);  // one set of weights and gradients, used in turn
  EXPECT_EQ(planned.blob("conv1").value.dtype(), DType::bf16);
  EXPECT_EQ(planned.blob("conv1").value.layout(), Layout::nhwc);
  for (uint64_t seed : {3, 4}) {
    EXPECT_EQ(step_bits(planned, ctx, seed), step_bits(whole, ctx, seed)) << "batch " << seed;
  }
}

TEST(MemoryPlanCuda, Bf16NhwcGraphReplaysTheEagerBits) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Net net(bf16_model(true), Phase::train, 4, builtin_layers(), ctx);
  const auto eager = step_bits(net, ctx, 5);  // also the warm-up: workspaces, algorithm choices
  set_batch(net, 5);
  gpu::begin_capture(ctx.stream());
  net.forward(ctx);
  net.backward(ctx);
  const gpu::Graph graph = gpu::end_capture(ctx.stream());
  for (int replay = 0; replay < 2; ++replay) {
    gpu::launch(graph, ctx.stream());
    ctx.synchronize();
    std::vector<std::vector<uint32_t>> replayed{bits_of(net.blob("loss").value)};
    for (const Param* p : net.learnable_params()) replayed.push_back(bits_of(p->grad));
    net.zero_param_grads(ctx);
    EXPECT_EQ(replayed, eager) << "replay " << replay;
  }
  gpu::destroy_graph(graph);
}

}  // namespace
}  // namespace crema::testing
