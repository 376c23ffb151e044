// Test support for the Net's fusion pass: a small residual net with every fused pattern (BatchNorm
// in place and not, the BatchNorm's output first and second in the Eltwise, a blob the block
// shares through a Split), built fused and unfused on one context; the unfused net's weights go
// into the fused one through a weights file (a checkpoint written unfused, loaded fused), both run
// forward and backward on the same batch, and every output, blob, gradient and buffer must be
// the same bits.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {

// data [3, 7, 9]: C = 3, odd H and W. Fused: bn1+relu1 (in place), bn2+relu2 (not in place),
// bn3+add+relu3 (BatchNorm first in the sum), ds_bn+add2+relu4 (second; bn4 stays a BatchNorm).
inline const char* kResidualNet = R"(
inputs: {data: [3, 7, 9], label: []}
layers:
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 5, kernel_size: 3, pad: 1}
  - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: conv2, type: Convolution, bottom: conv1, top: conv2, num_output: 5, kernel_size: 3, pad: 1}
  - {name: bn2, type: BatchNorm, bottom: conv2, top: bn2, momentum: 0.2}
  - {name: relu2, type: ReLU, bottom: bn2, top: bn2}
  - {name: conv3, type: Convolution, bottom: bn2, top: conv3, num_output: 5, kernel_size: 1}
  - {name: b.bn3, type: BatchNorm, bottom: conv3, top: conv3}
  - {name: b.add, type: Eltwise, bottom: [conv3, conv1], top: block}
  - {name: b.relu3, type: ReLU, bottom: block, top: block}
  - {name: ds, type: Convolution, bottom: block, top: ds, num_output: 4, kernel_size: 1, stride: 2}
  - {name: ds_bn, type: BatchNorm, bottom: ds, top: ds, eps: 1e-3}
  - {name: conv4, type: Convolution, bottom: block, top: conv4, num_output: 4, kernel_size: 3, pad: 1, stride: 2}
  - {name: bn4, type: BatchNorm, bottom: conv4, top: conv4}
  - {name: add2, type: Eltwise, bottom: [conv4, ds], top: out, coeff: [1, 1]}
  - {name: relu4, type: ReLU, bottom: out, top: out}
  - {name: pool, type: Pooling, bottom: out, top: pool, global_pooling: true, pool: average}
  - {name: fc, type: InnerProduct, bottom: pool, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

inline std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// Parameter gradients and buffers by name (the fused net holds them in another layer order).
inline std::map<std::string, std::vector<uint32_t>> grads_by_name(const Net& net) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const Param* p : net.learnable_params()) out[p->name] = bits_of(p->grad);
  return out;
}
inline std::map<std::string, std::vector<uint32_t>> buffers_by_name(const Net& net) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const Buffer* b : net.buffers()) out[b->name] = bits_of(b->value);
  return out;
}

inline ConfigNode residual_model(bool fuse) {
  return parse_config(std::string(kResidualNet) + "fuse: " + (fuse ? "true" : "false") + "\n",
                      "net.yaml");
}

// Fills the inputs of `net` from `seed` (labels in [0, 3)).
inline void set_batch(Net& net, uint64_t seed) {
  Tensor& data = net.blob("data").value;
  set_values(data, random_values(size_t(data.numel()), -1.0f, 1.0f, seed));
  Tensor& label = net.blob("label").value;
  std::vector<float> labels(size_t(label.numel()));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = float((i * 7 + seed) % 3);
  set_values(label, labels);
}

// The fused and the unfused net give the same bits: outputs and blobs after forward, parameter
// gradients after backward, buffers after two training steps' forwards; and in the test phase.
inline void expect_fused_same_bits(Context& ctx, int64_t batch) {
  SCOPED_TRACE("batch " + std::to_string(batch));
  const ConfigNode unfused_model = residual_model(false), fused_model = residual_model(true);
  Net unfused(unfused_model, Phase::train, batch, builtin_layers(), ctx);
  Net fused(fused_model, Phase::train, batch, builtin_layers(), ctx);
  EXPECT_EQ(unfused.num_layers(), fused.num_layers() + 6);  // 4 BatchNorms, 2 Eltwise, 4 ReLUs
  const std::string path = ::testing::TempDir() + "/net_fusion_" +
                           (ctx.device().is_cuda() ? "cuda" : "cpu") + std::to_string(batch) +
                           ".safetensors";
  unfused.save_weights(path);
  fused.load_weights(path, true);
  // The memory plan reuses a value's bytes once nothing later reads it: the blobs compared after
  // backward are kept whole in both nets.
  for (const char* blob : {"conv1", "bn2", "block", "out", "fc"}) {
    unfused.keep(blob);
    fused.keep(blob);
  }
  for (int step = 0; step < 2; ++step) {
    set_batch(unfused, 3 + step);
    set_batch(fused, 3 + step);
    unfused.forward(ctx);
    fused.forward(ctx);
    unfused.backward(ctx);
    fused.backward(ctx);
    EXPECT_EQ(bits_of(unfused.blob("loss").value), bits_of(fused.blob("loss").value));
    for (const char* blob : {"conv1", "bn2", "block", "out", "fc"}) {
      EXPECT_EQ(bits_of(unfused.blob(blob).value), bits_of(fused.blob(blob).value)) << blob;
    }
    EXPECT_EQ(grads_by_name(unfused), grads_by_name(fused));
    unfused.zero_param_grads(ctx);
    fused.zero_param_grads(ctx);
  }
  EXPECT_EQ(buffers_by_name(unfused), buffers_by_name(fused));
  Net unfused_test(unfused_model, Phase::test, batch, builtin_layers(), ctx);
  Net fused_test(fused_model, Phase::test, batch, builtin_layers(), ctx);
  unfused_test.share_params_from(unfused);
  fused_test.share_params_from(fused);
  set_batch(unfused_test, 9);
  set_batch(fused_test, 9);
  unfused_test.forward(ctx);
  fused_test.forward(ctx);
  EXPECT_EQ(bits_of(unfused_test.blob("fc").value), bits_of(fused_test.blob("fc").value));
}

}  // namespace crema::testing
