// The convolution registry (kernels/convolution/algorithm.h) and the workspace limit, without a
// device: every record complete and uniquely named, the ladder extending production, and the
// limit's spellings, YAML keys, flag and the heuristic's fallback.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "kernels/convolution/convolution.h"
#include "layers/conv_algorithms.h"

namespace crema::kernels {
namespace {

constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

TEST(ConvolutionRegistry, EveryRecordIsCompleteAndUniquelyNamed) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  std::set<std::string> names;
  int last_rung = 0;
  for (const ConvAlgorithm* a : conv_ladder()) {
    ASSERT_NE(a->name, nullptr);
    EXPECT_TRUE(names.insert(a->name).second) << "duplicate name " << a->name;
    EXPECT_GT(a->rung, last_rung) << a->name << ": the ladder is in rung order, one per rung";
    last_rung = a->rung;
    EXPECT_EQ(a->dtype, DType::f32) << a->name;
    EXPECT_EQ(a->layout, Layout::nchw) << a->name;
    EXPECT_NE(a->requirement, nullptr) << a->name;
    EXPECT_TRUE(a->supports && a->computes_in && a->workspace) << a->name;
    EXPECT_TRUE(a->forward && a->backward_data && a->backward_filter) << a->name;
    const Conv2dGeometry g{2, 8, 9, 9, 8, 3, 3, 1, 1};
    for (ConvPass pass : kPasses) {
      EXPECT_TRUE(a->computes_in(pass, cuda::GemmMath::fp32)) << a->name;
      if (a->supports(pass, g)) (void)a->workspace(pass, g, pass == ConvPass::backward_filter);
    }
  }
}

TEST(ConvolutionRegistry, LadderExtendsProductionWithTheRungsProductionNeverPicks) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  std::set<const ConvAlgorithm*> production(conv_algorithms().begin(), conv_algorithms().end());
  std::set<std::string> ladder_only;
  for (const ConvAlgorithm* a : conv_ladder()) {
    if (!production.count(a)) ladder_only.insert(a->name);
  }
  EXPECT_EQ(ladder_only, (std::set<std::string>{"precomputed_gemm"}));
  EXPECT_EQ(conv_ladder().size(), conv_algorithms().size() + 1);
  EXPECT_EQ(conv_algorithm_named("precomputed_gemm"), nullptr);  // not pinnable from YAML
  EXPECT_NE(conv_algorithm_named("implicit_gemm"), nullptr);
}

TEST(ConvolutionWorkspaceLimit, ParsesSizes) {
  EXPECT_EQ(parse_workspace_limit("1048576"), size_t(1048576));
  EXPECT_EQ(parse_workspace_limit("512KiB"), size_t(512) << 10);
  EXPECT_EQ(parse_workspace_limit("256MiB"), size_t(256) << 20);
  EXPECT_EQ(parse_workspace_limit("2GiB"), size_t(2) << 30);
  EXPECT_EQ(parse_workspace_limit("3MB"), size_t(3000000));
  EXPECT_EQ(parse_workspace_limit("0"), size_t(0));
  EXPECT_EQ(parse_workspace_limit("none"), kNoWorkspaceLimit);
  for (const char* bad : {"", "MiB", "12XB", "-1", "1.5GiB", "256 MiB", "99999999999999999999"}) {
    EXPECT_FALSE(parse_workspace_limit(bad).has_value()) << bad;
  }
}

// The heuristic's first choice for ResNet's 3x3 layer is Winograd F(4x4,3x3), which needs a
// workspace; under a limit it falls back to the first production algorithm that fits.
TEST(ConvolutionWorkspaceLimit, GetFallsBackToAnAlgorithmThatFits) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  const Conv2dGeometry g{64, 128, 28, 28, 128, 3, 3, 1, 1};
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data}) {
    const ConvAlgorithm& first = get_conv_algorithm(pass, g);
    EXPECT_STREQ(first.name, "winograd_4x4");
    const size_t need = conv_algorithm_workspace_bytes(first, pass, g);
    ASSERT_GT(need, 0u);
    EXPECT_EQ(&get_conv_algorithm(pass, g, cuda::GemmMath::fp32, need), &first);
    const ConvAlgorithm& fallback = get_conv_algorithm(pass, g, cuda::GemmMath::fp32, need - 1);
    EXPECT_STREQ(fallback.name, "implicit_gemm");  // needs none for forward and data
    EXPECT_LE(conv_algorithm_workspace_bytes(fallback, pass, g), need - 1);
  }
  // Nothing fits no workspace for the filter gradient of a split GEMM: an error naming the limit.
  const Conv2dGeometry deep{256, 512, 7, 7, 512, 3, 3, 1, 1};
  bool any_fits = false;
  for (const ConvAlgorithm* a : conv_algorithms()) {
    any_fits |= a->supports(ConvPass::backward_filter, deep) &&
                conv_algorithm_workspace_bytes(*a, ConvPass::backward_filter, deep) == 0;
  }
  if (!any_fits) {
    EXPECT_THROW(get_conv_algorithm(ConvPass::backward_filter, deep, cuda::GemmMath::fp32, 0),
                 Error);
  }
}

// The fp32 heuristic's rules from the broad suite (kernels/convolution/select.cpp), one layer of
// each kind the suite measured: the rule's algorithm, and one that implements the pass.
TEST(ConvolutionHeuristic, Fp32RulesPerKind) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  using P = ConvPass;
  struct Case {
    Conv2dGeometry g;
    P pass;
    const char* name;
  };
  const Conv2dGeometry resnext{16, 128, 56, 56, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32};
  const Conv2dGeometry deep_7x7{16, 512, 7, 7, 512, 3, 3, 1, 1};
  const Conv2dGeometry resnet_28{64, 128, 28, 28, 128, 3, 3, 1, 1};
  const Conv2dGeometry resnet_14{64, 256, 14, 14, 256, 3, 3, 1, 1};  // 1024 F(4x4) tiles
  const Conv2dGeometry strided{16, 512, 14, 14, 512, 3, 3, 1, 1, 2, 2};
  const Conv2dGeometry alexnet_g2{16, 96, 27, 27, 256, 5, 5, 2, 2, 1, 1, 1, 1, 2};
  const Conv2dGeometry bottleneck_7x7{16, 2048, 7, 7, 512, 1, 1};
  // DeepSpeech2's conv2: im2col would want 1.5 GB, direct takes at most 16 taps a side.
  const Conv2dGeometry speech{8, 32, 81, 150, 32, 21, 11, 10, 5, 2, 1};
  const Conv2dGeometry stem{64, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2};  // im2col: 0.7 GB
  const Case cases[] = {
      {resnext, P::forward, "direct"},           {resnext, P::backward_data, "direct"},
      {resnext, P::backward_filter, "winograd_4x4"}, {deep_7x7, P::forward, "winograd_2x2"},
      {deep_7x7, P::backward_data, "winograd_2x2"}, {deep_7x7, P::backward_filter, "winograd_4x4"},
      {resnet_28, P::forward, "winograd_4x4"},   {resnet_14, P::backward_data, "winograd_4x4"},   {strided, P::forward, "im2col_gemm"},
      {strided, P::backward_data, "im2col_gemm"}, {strided, P::backward_filter, "im2col_gemm"},
      {alexnet_g2, P::forward, "nhwc_implicit_gemm"},
      {alexnet_g2, P::backward_filter, "nhwc_implicit_gemm"},
      {bottleneck_7x7, P::backward_filter, "im2col_gemm"},
      {speech, P::backward_data, "nhwc_implicit_gemm"},
      {{128, 64, 32, 32, 128, 3, 3, 1, 1, 2, 2}, P::backward_data, "im2col_gemm"},
      {{128, 64, 32, 32, 128, 3, 3, 1, 1, 2, 2}, P::forward, "implicit_gemm"}, {stem, P::backward_data, "im2col_gemm"},
  };
  for (const Case& c : cases) {
    const ConvAlgorithm& chosen = get_conv_algorithm(c.pass, c.g);
    EXPECT_STREQ(chosen.name, c.name) << conv_algorithm_cache_key(c.pass, c.g, "", 0);
    EXPECT_TRUE(chosen.supports(c.pass, c.g)) << chosen.name;
  }
}

// The layer's workspace_limit key wins over the net's model.workspace_limit; a bad size is an
// error at the file, line and column of the value.
TEST(ConvolutionWorkspaceLimit, LayerKeyAndModelKey) {
  const ConfigNode model = parse_config("{workspace_limit: 1MiB, bad: 12XB}", "model.yaml");
  const ConfigNode layer = parse_config(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 3, workspace_limit: 2KiB}",
      "layer.yaml");
  const ConfigNode plain =
      parse_config("{name: c, type: Convolution, num_output: 4, kernel_size: 3}", "plain.yaml");
  const ConfigNode bad = parse_config(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 3,\n workspace_limit: lots}",
      "bad.yaml");
  LayerSpec spec;
  spec.name = "c";
  spec.type = "Convolution";
  spec.workspace_limit = &model.at("workspace_limit");

  spec.node = &layer;
  EXPECT_EQ(ConvAlgorithms(spec, false).request(ConvAlgorithms::forward).workspace_limit, 2048u);
  spec.node = &plain;
  EXPECT_EQ(ConvAlgorithms(spec, false).request(ConvAlgorithms::backward_filter).workspace_limit,
            size_t(1) << 20);
  spec.workspace_limit = nullptr;
  EXPECT_EQ(ConvAlgorithms(spec, false).request(ConvAlgorithms::forward).workspace_limit,
            kNoWorkspaceLimit);

  spec.node = &bad;
  try {
    ConvAlgorithms(spec, false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad.yaml:2:"), std::string::npos) << message;
    EXPECT_NE(message.find("workspace_limit"), std::string::npos) << message;
    EXPECT_NE(message.find("'lots'"), std::string::npos) << message;
  }
  spec.node = &plain;
  spec.workspace_limit = &model.at("bad");
  try {
    ConvAlgorithms(spec, false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model.yaml:1:"), std::string::npos) << message;
    EXPECT_NE(message.find("model.workspace_limit"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace crema::kernels
