// Math modes on the CPU (issue 8): the `math:` key of Convolution, Deconvolution and InnerProduct
// and the net's model.math parse, bad values are errors naming the layer (or model.math) and the
// key, a layer's own key wins over the net's, and the CPU path computes in fp32 in every math:
// the outputs and gradients of tf32 and bf16 layers are bit-identical to the fp32 layer's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/net.h"
#include "layers/layer_keys.h"
#include "layers/register_layers.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

using kernels::cuda::GemmMath;

// Forward then backward of `yaml` (math appended) on fixed inputs in a fresh CPU context (the
// same seed, so the same weights): every top value, bottom gradient and parameter gradient.
std::vector<float> run_layer(const std::string& yaml, const std::string& math, const Shape& x) {
  Context ctx;
  LayerHarness h(yaml + (math.empty() ? "}" : ", math: " + math + "}"), {x}, ctx);
  h.set_bottom(0, random_values(size_t(shape_numel(x)), -1, 1, 11));
  h.forward();
  Tensor& dy = h.top[0]->grad;
  dy.copy_from(Tensor::from_vector(dy.shape(), random_values(size_t(dy.numel()), -1, 1, 12)));
  h.bottom[0]->grad.fill(NAN);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  std::vector<float> out = h.top[0]->value.to_vector();
  const std::vector<float> dx = h.bottom[0]->grad.to_vector();
  out.insert(out.end(), dx.begin(), dx.end());
  for (Param& p : h.layer->params()) {
    const std::vector<float> v = p.grad.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(MathModeLayers, CpuComputesFp32InEveryMath) {
  const std::vector<std::pair<std::string, Shape>> layers = {
      {"{name: c, type: Convolution, num_output: 5, kernel_size: 3, pad: 1", {2, 3, 7, 6}},
      {"{name: c, type: Convolution, num_output: 6, kernel_size: 1", {2, 4, 5, 5}},
      {"{name: c, type: Deconvolution, num_output: 4, kernel_size: 3, stride: 2", {2, 3, 4, 5}},
      {"{name: c, type: InnerProduct, num_output: 7", {3, 2, 3, 5}},
  };
  for (const auto& [yaml, x] : layers) {
    SCOPED_TRACE(yaml);
    const std::vector<float> fp32 = run_layer(yaml, "", x);
    EXPECT_EQ(run_layer(yaml, "fp32", x), fp32);
    EXPECT_EQ(run_layer(yaml, "tf32", x), fp32);
    EXPECT_EQ(run_layer(yaml, "bf16", x), fp32);
  }
}

TEST(MathModeLayers, BadValueNamesTheLayerAndTheKey) {
  for (const std::string head : {"{name: c, type: Convolution, num_output: 4, kernel_size: 3",
                                 "{name: c, type: Deconvolution, num_output: 4, kernel_size: 3",
                                 "{name: c, type: InnerProduct, num_output: 4"}) {
    const std::string message = error_of([&] {
      Context ctx;
      LayerHarness h(head + ", math: fp16}", {{1, 4, 8, 8}}, ctx);
    });
    EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;
    EXPECT_NE(message.find("math: unknown math 'fp16'"), std::string::npos) << message;
    EXPECT_NE(message.find("fp32, tf32, bf16"), std::string::npos) << message;
  }
}

// read_math: the layer's own key, else the net's math in the spec.
TEST(MathModeLayers, LayerKeyWinsOverTheNets) {
  const ConfigNode own = parse_config("{name: c, type: InnerProduct, math: bf16}", "l.yaml");
  const ConfigNode none = parse_config("{name: c, type: InnerProduct}", "l.yaml");
  LayerSpec spec;
  spec.name = "c";
  spec.type = "InnerProduct";
  spec.node = &none;
  EXPECT_EQ(read_math(spec), GemmMath::fp32);  // the spec's default: fp32
  spec.math = "tf32";
  EXPECT_EQ(read_math(spec), GemmMath::tf32);
  spec.node = &own;
  EXPECT_EQ(read_math(spec), GemmMath::bf16);
  spec.node = &none;
  spec.math = "fp64";
  const std::string message = error_of([&] { read_math(spec); });
  EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;
  EXPECT_NE(message.find("(from model.math)"), std::string::npos) << message;
}

const char* kNet = R"(
inputs: {data: [3, 6, 6], label: []}
math: MATH
layers:
  - {name: conv, type: Convolution, bottom: data, top: conv, num_output: 4, kernel_size: 3}
  - {name: fc, type: InnerProduct, bottom: conv, top: fc, num_output: 5, math: fp32}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

std::string net_yaml(const std::string& math) {
  std::string yaml = kNet;
  yaml.replace(yaml.find("MATH"), 4, math);
  return yaml;
}

TEST(MathModeNet, ModelMathParsesAndBadValueIsAnError) {
  for (const std::string math : {"fp32", "tf32", "bf16"}) {
    Context ctx;
    const ConfigNode model = parse_config(net_yaml(math), "net.yaml");
    Net net(model, Phase::train, 2, builtin_layers(), ctx);
    EXPECT_EQ(net.num_layers(), 3u) << math;
  }
  const std::string message = error_of([] {
    Context ctx;
    const ConfigNode model = parse_config(net_yaml("fp16"), "net.yaml");
    Net net(model, Phase::train, 2, builtin_layers(), ctx);
  });
  EXPECT_NE(message.find("net.yaml:3"), std::string::npos) << message;
  EXPECT_NE(message.find("model.math: unknown math 'fp16'"), std::string::npos) << message;
}

}  // namespace
}  // namespace crema::testing
