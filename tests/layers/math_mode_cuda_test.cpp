// Math modes through the layers on a GPU: InnerProduct and Convolution with `math: tf32` or
// `bf16` stay within the math's tolerance of the fp32 layer yet differ from it (the math reached
// the kernels), and a Net's model.math reaches every layer without a `math:` key of its own while
// a layer's own key wins.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

double relative_difference(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

// The top of `yaml` (math appended) on fixed inputs, on the GPU, the same seed every time.
std::vector<float> layer_top(const std::string& yaml, const std::string& math, const Shape& x) {
  Context ctx(Device::cuda(0));
  LayerHarness h(yaml + ", math: " + math + "}", {x}, ctx);
  h.set_bottom(0, random_values(size_t(shape_numel(x)), -1, 1, 21));
  h.forward();
  return h.top[0]->value.to_vector();
}

void expect_math_applied(const std::string& yaml, const Shape& x) {
  SCOPED_TRACE(yaml);
  const std::vector<float> fp32 = layer_top(yaml, "fp32", x);
  for (const auto& [math, tolerance] : {std::pair<std::string, double>{"tf32", 2e-3},
                                        std::pair<std::string, double>{"bf16", 1e-2}}) {
    const double diff = relative_difference(layer_top(yaml, math, x), fp32);
    EXPECT_LT(diff, tolerance) << math;
    EXPECT_GT(diff, 1e-6) << math << ": as exact as fp32, so the math was not applied";
  }
}

TEST(InnerProductMathCuda, Tf32AndBf16WithinToleranceOfFp32) {
  CREMA_REQUIRE_CUDA();
  expect_math_applied("{name: fc, type: InnerProduct, num_output: 37", {9, 3, 5, 7});
}

TEST(ConvolutionMathLayerCuda, Tf32AndBf16WithinToleranceOfFp32) {
  CREMA_REQUIRE_CUDA();
  expect_math_applied(
      "{name: c, type: Convolution, num_output: 12, kernel_size: 3, pad: 1, algorithm: im2col_gemm",
      {3, 10, 9, 11});
  expect_math_applied(
      "{name: c, type: Deconvolution, num_output: 6, kernel_size: 3, stride: 2, "
      "algorithm: im2col_gemm",
      {2, 7, 5, 6});
}

const char* kNet = R"(
inputs: {data: [6, 9, 9]}
math: tf32
layers:
  - {name: a, type: Convolution, bottom: data, top: a, num_output: 8, kernel_size: 3,
     algorithm: im2col_gemm}
  - {name: b, type: Convolution, bottom: data, top: b, num_output: 8, kernel_size: 3,
     algorithm: im2col_gemm, math: fp32}
)";

// The net and its twin with model.math fp32 fill the same weights (same context seed, same
// layers): layer a differs between them only by its math, layer b not at all.
TEST(ConvolutionMathLayerCuda, ModelMathReachesLayersAndLayerKeyWins) {
  CREMA_REQUIRE_CUDA();
  auto run = [](const std::string& yaml) {
    Context ctx(Device::cuda(0));
    const ConfigNode model = parse_config(yaml, "net.yaml");
    Net net(model, Phase::test, 2, builtin_layers(), ctx);
    Blob& data = net.blob("data");
    data.value.copy_from(Tensor::from_vector(data.value.shape(),
                                             random_values(size_t(data.value.numel()), -1, 1, 31)));
    net.forward(ctx);
    return std::make_pair(net.blob("a").value.to_vector(), net.blob("b").value.to_vector());
  };
  std::string fp32_yaml = kNet;
  fp32_yaml.replace(fp32_yaml.find("math: tf32"), 10, "math: fp32");
  const auto [a_tf32, b_tf32] = run(kNet);
  const auto [a_fp32, b_fp32] = run(fp32_yaml);
  EXPECT_EQ(b_tf32, b_fp32);  // b's own math: fp32 wins over model.math
  const double diff = relative_difference(a_tf32, a_fp32);
  EXPECT_LT(diff, 2e-3);
  EXPECT_GT(diff, 1e-6) << "model.math tf32 did not reach layer a";
}

}  // namespace
}  // namespace crema::testing
