// Views on the GPU (core/VIEWS.md). A Concat's windows: none yet (the GPU's convolutions take no
// image stride), so a Concat on CUDA keeps its copies whatever model.concat_views says, in f32
// nchw and in bf16 nhwc, and the step's bits do not depend on the key. A Slice's contiguous tops:
// views on every device, so the Slice copies nothing, and backward copies only the tops that are
// not views (kernels::concat skips the null parts on CUDA too). The bits match the key off.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "kernels/cast/cast.h"
#include "kernels/concat/concat.h"
#include "layers/register_layers.h"
#include "tests/core/net_windows_nets.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema {
namespace {

const char* kInception = R"(
inputs: {data: [8, 7, 6], label: []}
layers:
  - {name: conv_a, type: Convolution, bottom: data, top: a, num_output: 8, kernel_size: 1}
  - {name: conv_b, type: Convolution, bottom: data, top: b, num_output: 16, kernel_size: 3, pad: 1}
  - {name: cat, type: Concat, bottom: [a, b], top: cat}
  - {name: conv_d, type: Convolution, bottom: cat, top: d, num_output: 8, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: d, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// With concat_views `always` s0 and s1 are views (the default drops them, as their packing costs
// bytes: SliceViews.AlwaysKeepsTheViews...).
const char* const kSlices = testing::kSlicesThroughReLUs;  // net_windows_nets.h

// Along the channels at batch 1: s0 a view, s1 read by nobody (copied, its gradient
// zeroed by the Net): the Slice's backward copies s1's gradient next to s0's, in place.
const char* kSliceOutput = R"(
inputs: {data: [8, 8, 8], label: []}
layers:
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 8, kernel_size: 3, pad: 1}
  - {name: slice, type: Slice, bottom: conv0, top: [s0, s1], axis: 1, slice_point: [6]}
  - {name: fc, type: InnerProduct, bottom: s0, top: fc, num_output: 5}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

// views: model.concat_views ("true", "false" or "always").
ConfigNode model(const char* yaml, const std::string& precision, const std::string& views) {
  return parse_config("precision: " + precision + "\nconcat_views: " + views + "\n" + yaml,
                      "net.yaml");
}

// The loss and every parameter gradient of one step.
std::vector<float> step(Net& net, Context& ctx) {
  Tensor& data = net.blob("data").value;
  data.copy_from(
      Tensor::from_vector(data.shape(), testing::random_values(size_t(data.numel()), -1, 1, 7)));
  std::vector<float> labels;
  for (int64_t i = 0; i < net.batch_size(); ++i) labels.push_back(float(i % 5));
  net.blob("label").value.copy_from(Tensor::from_vector({net.batch_size()}, labels));
  net.zero_param_grads(ctx);
  net.forward(ctx);
  std::vector<float> seen{float(net.loss())};
  net.backward(ctx);
  for (const Param* p : net.learnable_params()) {
    const auto g = p->grad.to_vector();
    seen.insert(seen.end(), g.begin(), g.end());
  }
  return seen;
}

TEST(ConcatViewsCuda, NoWindowsYetAndTheSameBits) {
  CREMA_REQUIRE_CUDA();
  for (const char* precision : {"fp32", "bf16"}) {
    Context ctx(Device::cuda(0));
    Net on(model(kInception, precision, "true"), Phase::train, 3, builtin_layers(), ctx);
    Net off(model(kInception, precision, "false"), Phase::train, 3, builtin_layers(), ctx);
    off.share_params_from(on);  // one set of weights and gradients, used in turn
    for (size_t i = 0; i < on.num_layers(); ++i) {
      EXPECT_EQ(on.layer(i).top_window(0), nullptr) << precision << " " << on.layer(i).name();
    }
    EXPECT_EQ(step(on, ctx), step(off, ctx)) << precision;
  }
}

// kernels::concat and kernels::slice leave a null part's place as it is, f32 and bf16, on parts
// whose rows (3 * 5 elements) are not a multiple of the 16-byte unit.
TEST(ConcatViewsCuda, SkippedPartsAreLeftAsTheyAre) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Shape part_shape{2, 3, 5}, whole_shape{2, 9, 5};
    const auto values = [&](const Shape& shape, uint64_t seed) {  // on the device, in dtype
      Context cpu;
      const Tensor host = kernels::cast_to(
          cpu,
          Tensor::from_vector(shape,
                              testing::random_values(size_t(shape_numel(shape)), -1, 1, seed)),
          dtype);
      Tensor t = ctx.empty(shape, dtype);
      t.copy_from(host);
      return t;
    };
    const Tensor p0 = values(part_shape, 1), p2 = values(part_shape, 3);
    Tensor whole = values(whole_shape, 4);
    const std::vector<float> before = whole.to_vector();
    kernels::concat(ctx, {&p0, nullptr, &p2}, 1, {3, 3, 3}, whole);
    const std::vector<float> after = whole.to_vector(), a = p0.to_vector(), c = p2.to_vector();
    for (int64_t o = 0; o < 2; ++o) {
      for (int64_t k = 0; k < 9; ++k) {
        for (int64_t i = 0; i < 5; ++i) {
          const size_t w = size_t((o * 9 + k) * 5 + i), p = size_t((o * 3 + k % 3) * 5 + i);
          const float want = k < 3 ? a[p] : k < 6 ? before[w] : c[p];
          ASSERT_EQ(after[w], want) << dtype_name(dtype) << " at " << o << ", " << k << ", " << i;
        }
      }
    }
    // slice back into the first and last parts only: the middle part is not touched.
    Tensor q0 = values(part_shape, 6), q1 = values(part_shape, 5), q2 = values(part_shape, 7);
    const std::vector<float> middle = q1.to_vector();
    kernels::slice(ctx, whole, 1, {3, 3, 3}, {&q0, nullptr, &q2});
    EXPECT_EQ(q0.to_vector(), a) << dtype_name(dtype);
    EXPECT_EQ(q1.to_vector(), middle) << dtype_name(dtype);
    EXPECT_EQ(q2.to_vector(), c) << dtype_name(dtype);
  }
}

// A Slice's tops as views on CUDA: the same bits as the copies, in fp32 and in bf16 (where the
// Slice runs f32 nchw between Convert layers: its pieces are views all the same).
TEST(SliceViewsCuda, BatchSlicesTrainToTheSameBits) {
  CREMA_REQUIRE_CUDA();
  for (const char* precision : {"fp32", "bf16"}) {
    Context ctx(Device::cuda(0));
    Net on(model(kSlices, precision, "always"), Phase::train, 5, builtin_layers(), ctx);
    Net off(model(kSlices, precision, "false"), Phase::train, 5, builtin_layers(), ctx);
    off.share_params_from(on);
    EXPECT_EQ(on.view_blobs(), (std::vector<std::string>{"s0", "s1"})) << precision;
    EXPECT_TRUE(off.view_blobs().empty());
    EXPECT_EQ(step(on, ctx), step(off, ctx)) << precision;
    EXPECT_EQ(step(on, ctx), step(off, ctx)) << precision << ", a second step";
  }
}

TEST(SliceViewsCuda, AnUnreadTopNextToAViewGivesTheSameBits) {
  CREMA_REQUIRE_CUDA();
  for (const char* precision : {"fp32", "bf16"}) {
    Context ctx(Device::cuda(0));
    Net on(model(kSliceOutput, precision, "always"), Phase::train, 1, builtin_layers(), ctx);
    Net off(model(kSliceOutput, precision, "false"), Phase::train, 1, builtin_layers(), ctx);
    off.share_params_from(on);
    // The Slice runs f32 nchw (behind Convert layers in bf16): s0 is a view in both.
    EXPECT_EQ(on.view_blobs(), (std::vector<std::string>{"s0"})) << precision;
    EXPECT_EQ(step(on, ctx), step(off, ctx)) << precision;
  }
}

}  // namespace
}  // namespace crema
