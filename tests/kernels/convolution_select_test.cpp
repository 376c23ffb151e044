// Convolution algorithm selection without a device: the spellings of `algorithm:`, the cache and
// its key, the cache file's round trip and errors, and the layers' pin validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "kernels/convolution/select.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
constexpr size_t kAnyWorkspace = std::numeric_limits<size_t>::max();

Conv2dGeometry resnet_3x3() {
  Conv2dGeometry g{64, 64, 56, 56, 64, 3, 3};
  g.pad_h = g.pad_w = 1;
  return g;
}

// A path under the test's temporary directory, removed first.
std::string temp_path(const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("crema_select_" + std::to_string(::getpid()) + "_" + name))
                               .string();
  std::filesystem::remove(path);
  return path;
}

// The ladder's record called `name`.
const ConvAlgorithm& named(const std::string& name) {
  for (const ConvAlgorithm* a : conv_ladder()) {
    if (name == a->name) return *a;
  }
  throw Error("no record " + name);
}

TEST(ConvolutionSelect, ParsesEverySpelling) {
  EXPECT_EQ(parse_conv_algorithm("auto")->mode, ConvRequest::Mode::heuristic);
  EXPECT_EQ(parse_conv_algorithm("find")->mode, ConvRequest::Mode::measure);
  for (const ConvAlgorithm* a : conv_algorithms()) {
    const auto request = parse_conv_algorithm(a->name);
    ASSERT_TRUE(request.has_value()) << a->name;
    EXPECT_EQ(request->mode, ConvRequest::Mode::pinned);
    EXPECT_EQ(request->pinned, a);
    EXPECT_EQ(request->str(), a->name);
    EXPECT_NE(conv_algorithm_spellings().find(a->name), std::string::npos);
  }
  EXPECT_FALSE(parse_conv_algorithm("implicit").has_value());
  // The ladder's rungs are not production's: YAML cannot pin them.
  EXPECT_FALSE(parse_conv_algorithm("precomputed_gemm").has_value());
  EXPECT_FALSE(parse_conv_algorithm("").has_value());
  EXPECT_FALSE(parse_conv_algorithm("Auto").has_value());
}

TEST(ConvolutionSelect, CacheKeyNamesEveryPart) {
  const Conv2dGeometry g = resnet_3x3();
  const std::string key = conv_algorithm_cache_key(ConvPass::forward, g, "GPU X", kAnyWorkspace);
  EXPECT_EQ(key,
            "conv2d forward N64 C64 H56 W56 K64 R3 S3 pad1x1 stride1x1 dilation1x1 groups1 "
            "ws<=any on GPU X");
  // Each part changes the key.
  Conv2dGeometry strided = g;
  strided.stride_w = 2;
  EXPECT_NE(conv_algorithm_cache_key(ConvPass::forward, strided, "GPU X", kAnyWorkspace), key);
  EXPECT_NE(conv_algorithm_cache_key(ConvPass::backward_data, g, "GPU X", kAnyWorkspace), key);
  EXPECT_NE(conv_algorithm_cache_key(ConvPass::forward, g, "GPU Y", kAnyWorkspace), key);
  EXPECT_NE(conv_algorithm_cache_key(ConvPass::forward, g, "GPU X", 1 << 20), key);
  // The math: fp32 is the key above (cache files from before math modes still answer); tf32 and
  // bf16 have keys of their own.
  EXPECT_EQ(
      conv_algorithm_cache_key(ConvPass::forward, g, "GPU X", kAnyWorkspace, cuda::GemmMath::fp32),
      key);
  EXPECT_EQ(
      conv_algorithm_cache_key(ConvPass::forward, g, "GPU X", kAnyWorkspace, cuda::GemmMath::tf32),
      "conv2d forward N64 C64 H56 W56 K64 R3 S3 pad1x1 stride1x1 dilation1x1 groups1 "
      "math tf32 ws<=any on GPU X");
  EXPECT_NE(
      conv_algorithm_cache_key(ConvPass::forward, g, "GPU X", kAnyWorkspace, cuda::GemmMath::bf16),
      key);
}

TEST(ConvolutionSelect, FindToleranceFollowsTheMath) {
  EXPECT_EQ(conv_find_tolerance(cuda::GemmMath::fp32), kConvFindTolerance);
  EXPECT_EQ(conv_find_tolerance(cuda::GemmMath::tf32), 2e-3);
  EXPECT_EQ(conv_find_tolerance(cuda::GemmMath::bf16), 1e-2);
}

TEST(ConvolutionSelect, TensorCorePassesPerVersion) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  const cuda::GemmMath tf32 = cuda::GemmMath::tf32, bf16 = cuda::GemmMath::bf16;
  for (const ConvAlgorithm* a : conv_ladder()) {
    for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
      EXPECT_TRUE(a->computes_in(pass, cuda::GemmMath::fp32));
      EXPECT_EQ(a->computes_in(pass, tf32), a->computes_in(pass, bf16));
    }
  }
  EXPECT_TRUE(named("im2col_gemm").computes_in(ConvPass::backward_data, tf32));
  EXPECT_TRUE(named("pointwise_gemm").computes_in(ConvPass::forward, tf32));
  EXPECT_TRUE(named("winograd_2x2").computes_in(ConvPass::backward_filter, bf16));
  EXPECT_TRUE(named("implicit_gemm").computes_in(ConvPass::backward_filter, tf32));
  EXPECT_TRUE(named("implicit_gemm").computes_in(ConvPass::forward, tf32));
  EXPECT_TRUE(named("precomputed_gemm").computes_in(ConvPass::backward_data, bf16));
  EXPECT_TRUE(named("direct").computes_in(ConvPass::backward_filter, tf32));
  EXPECT_FALSE(named("direct").computes_in(ConvPass::forward, tf32));
  EXPECT_FALSE(named("winograd_4x4").computes_in(ConvPass::forward, tf32));
  EXPECT_FALSE(named("depthwise_direct").computes_in(ConvPass::backward_filter, bf16));
}

TEST(ConvolutionSelect, CachedChoiceIsUsedWithoutMeasuring) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  Context ctx;  // the CPU: measuring would throw, so a returned version came from the cache
  const Conv2dGeometry g = resnet_3x3();
  const std::string key = conv_algorithm_cache_key(ConvPass::backward_filter, g, "cpu", 4096);
  ctx.algorithm_cache()[key] = "im2col_gemm";
  EXPECT_STREQ(find_conv_algorithm_cached(ctx, ConvPass::backward_filter, g, 4096).name,
               "im2col_gemm");
  ConvRequest find;
  find.mode = ConvRequest::Mode::measure;
  find.workspace_limit = 4096;
  EXPECT_STREQ(select_conv_algorithm(ctx, ConvPass::backward_filter, g, find, "layer 'c'").name,
               "im2col_gemm");
  // Another limit is another key: not cached, so it would measure, which needs a GPU.
  EXPECT_NE(error_of([&] {
              find_conv_algorithm_cached(ctx, ConvPass::backward_filter, g, 8192);
            }).find("CUDA"),
            std::string::npos);
}

TEST(ConvolutionSelect, StaleCachedNameIsMeasuredAgain) {
  Context ctx;
  const Conv2dGeometry g = resnet_3x3();  // 3x3: the pointwise version does not apply
  ctx.algorithm_cache()[conv_algorithm_cache_key(ConvPass::forward, g, "cpu", kAnyWorkspace)] =
      "pointwise_gemm";
  ctx.algorithm_cache()[conv_algorithm_cache_key(ConvPass::backward_data, g, "cpu",
                                                 kAnyWorkspace)] = "a_version_since_removed";
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data}) {
    EXPECT_NE(
        error_of([&] { find_conv_algorithm_cached(ctx, pass, g, kAnyWorkspace); }).find("CUDA"),
        std::string::npos);
  }
}

TEST(ConvolutionSelect, PinnedVersionMustSupportThePass) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  Context ctx;
  const Conv2dGeometry g = resnet_3x3();
  ConvRequest pinned = ConvRequest::pin(named("implicit_gemm"));
  EXPECT_STREQ(select_conv_algorithm(ctx, ConvPass::forward, g, pinned, "layer 'c'").name,
               "implicit_gemm");
  pinned = ConvRequest::pin(named("pointwise_gemm"));
  const std::string message =
      error_of([&] { select_conv_algorithm(ctx, ConvPass::forward, g, pinned, "layer 'c'"); });
  EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;
  EXPECT_NE(message.find("pointwise_gemm does not implement forward"), std::string::npos)
      << message;
  EXPECT_NE(message.find("implicit_gemm"), std::string::npos) << message;  // a usable one
}

TEST(ConvolutionSelect, CacheFileRoundTrip) {
  const std::string path = temp_path("roundtrip.json");
  std::map<std::string, std::string> cache{{"conv2d forward a", "implicit_gemm"},
                                           {"conv2d backward_data b \"quoted\"", "im2col_gemm"}};
  save_algorithm_cache(path, cache);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::map<std::string, std::string> loaded{{"kept", "depthwise_direct"},
                                            {"conv2d forward a", "overwritten"}};
  load_algorithm_cache(path, loaded);
  EXPECT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded["conv2d forward a"], "implicit_gemm");
  EXPECT_EQ(loaded["conv2d backward_data b \"quoted\""], "im2col_gemm");
  EXPECT_EQ(loaded["kept"], "depthwise_direct");
  std::filesystem::remove(path);
}

TEST(ConvolutionSelect, MissingCacheFileAddsNothing) {
  std::map<std::string, std::string> cache{{"a", "implicit_gemm"}};
  load_algorithm_cache(temp_path("absent.json"), cache);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ConvolutionSelect, MalformedCacheFileIsAnErrorNamingIt) {
  const std::string path = temp_path("bad.json");
  for (const char* text : {"{not json", "{\"entries\": {}}",
                           "{\"crema_algorithm_cache\": 1, \"entries\": {\"k\": 3}}"}) {
    std::ofstream(path) << text;
    std::map<std::string, std::string> cache;
    const std::string message = error_of([&] { load_algorithm_cache(path, cache); });
    EXPECT_NE(message.find(path), std::string::npos) << text << ": " << message;
    EXPECT_TRUE(cache.empty()) << text;
  }
  std::filesystem::remove(path);
}

// The layers' `algorithm:` key, read and checked without a device.
std::string layer_error(const std::string& yaml, const Shape& x) {
  Context ctx;
  return error_of([&] { testing::LayerHarness h(yaml, {x}, ctx); });
}

TEST(ConvolutionSelect, LayerAcceptsEveryForm) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  Context ctx;
  for (const char* algorithm :
       {"auto", "find", "implicit_gemm", "{forward: im2col_gemm, backward_filter: find}",
        "{backward_data: implicit_gemm}"}) {
    SCOPED_TRACE(algorithm);
    testing::LayerHarness conv(std::string("{name: c, type: Convolution, num_output: 4, ") +
                                   "kernel_size: 3, algorithm: " + algorithm + "}",
                               {{2, 3, 7, 6}}, ctx);
    testing::LayerHarness deconv(std::string("{name: d, type: Deconvolution, num_output: 4, ") +
                                     "kernel_size: 3, algorithm: " + algorithm + "}",
                                 {{2, 3, 7, 6}}, ctx);
    // On the CPU nothing is chosen, so there is nothing to describe.
    conv.forward();
    EXPECT_EQ(conv.layer->describe_algorithm(), "");
  }
}

TEST(ConvolutionSelect, LayerRejectsUnknownNamesAndKeys) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  std::string message = layer_error(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 3, algorithm: implicit_gem}",
      {2, 3, 7, 6});
  EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;
  EXPECT_NE(message.find("algorithm: unknown algorithm 'implicit_gem'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("did you mean 'implicit_gemm'"), std::string::npos) << message;

  message = layer_error(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 3,"
      " algorithm: {forward: auto, backward_dat: find}}",
      {2, 3, 7, 6});
  EXPECT_NE(message.find("backward_dat"), std::string::npos) << message;
  EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;

  message =
      layer_error("{name: c, type: Convolution, num_output: 4, kernel_size: 3, algorithm: [find]}",
                  {2, 3, 7, 6});
  EXPECT_NE(message.find("algorithm: expected one algorithm"), std::string::npos) << message;
}

TEST(ConvolutionSelect, LayerRejectsAPinThatDoesNotFitTheGeometry) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  // A 3x3 convolution cannot run the pointwise version: the error names the layer, the key and
  // the pass, and lists what would work.
  std::string message = layer_error(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 3,"
      " algorithm: {backward_data: pointwise_gemm}}",
      {2, 3, 7, 6});
  EXPECT_NE(message.find("test:1:"), std::string::npos) << message;  // the key's place
  EXPECT_NE(message.find("layer 'c' (Convolution): algorithm.backward_data: pointwise_gemm"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("im2col_gemm"), std::string::npos) << message;

  // A depthwise pin on a Deconvolution without groups.
  message = layer_error(
      "{name: d, type: Deconvolution, num_output: 4, kernel_size: 3, algorithm: depthwise_direct}",
      {2, 3, 7, 6});
  EXPECT_NE(message.find("layer 'd' (Deconvolution): algorithm: depthwise_direct"),
            std::string::npos)
      << message;

  // The same pin fits a pointwise geometry.
  Context ctx;
  testing::LayerHarness fits(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 1,"
      " algorithm: {forward: pointwise_gemm, backward_data: pointwise_gemm}}",
      {{2, 3, 7, 6}}, ctx);
}

}  // namespace
}  // namespace crema::kernels
