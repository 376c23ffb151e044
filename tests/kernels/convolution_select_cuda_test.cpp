// Convolution algorithm selection on the GPU: find measures every version that applies, checks
// it, respects the workspace limit and caches its choice; get is deterministic; layers run what
// they were told to (and match the CPU).
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "kernels/convolution/select.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::kernels {
namespace {

constexpr size_t kAnyWorkspace = std::numeric_limits<size_t>::max();
constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

// Awkward sizes: odd channels and image sides, a batch that fills no tile; a 3x3 with padding
// (every general version applies), a pointwise one and a depthwise one.
std::vector<Conv2dGeometry> geometries() {
  Conv2dGeometry g3{3, 17, 13, 11, 23, 3, 3};
  g3.pad_h = g3.pad_w = 1;
  Conv2dGeometry g1{2, 33, 9, 7, 19, 1, 1};
  Conv2dGeometry dw{2, 12, 10, 9, 12, 3, 3};
  dw.pad_h = dw.pad_w = 1;
  dw.stride_h = 2;
  dw.groups = 12;
  return {g3, g1, dw};
}

TEST(ConvolutionSelectCuda, FindTimesAndChecksEverySupportingVersion) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Conv2dGeometry& g : geometries()) {
    for (ConvPass pass : kPasses) {
      SCOPED_TRACE(conv_algorithm_cache_key(pass, g, "", 0));
      const std::vector<ConvAlgorithmPerf> results =
          find_conv_algorithms(ctx, pass, g, kAnyWorkspace);
      std::set<const ConvAlgorithm*> listed;
      for (const ConvAlgorithmPerf& r : results) listed.insert(r.algorithm);
      for (const ConvAlgorithm* a : conv_algorithms()) {  // production only: no ladder rung
        EXPECT_EQ(listed.count(a), a->supports(pass, g) ? 1u : 0u) << a->name;
      }
      // Every crema version is correct, so all are ok, fastest first.
      for (size_t i = 0; i < results.size(); ++i) {
        EXPECT_EQ(results[i].status, ConvAlgorithmStatus::ok) << results[i].algorithm->name;
        EXPECT_GT(results[i].ms, 0.0);
        EXPECT_LE(results[i].rel_error, kConvFindTolerance);
        EXPECT_EQ(results[i].workspace_bytes,
                  conv_algorithm_workspace_bytes(*results[i].algorithm, pass, g));
        if (i > 0) {
          EXPECT_LE(results[i - 1].ms, results[i].ms);
        }
      }
      // The heuristic checks against itself exactly.
      for (const ConvAlgorithmPerf& r : results) {
        if (r.algorithm == &get_conv_algorithm(pass, g)) {
          EXPECT_EQ(r.rel_error, 0.0);
        }
      }
    }
  }
}

TEST(ConvolutionSelectCuda, FindRespectsTheWorkspaceLimit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Conv2dGeometry g{3, 17, 13, 11, 23, 3, 3};
  g.pad_h = g.pad_w = 1;
  for (ConvPass pass : kPasses) {
    // im2col + GEMM always needs a workspace; a limit of one byte less leaves it out.
    const size_t im2col =
        conv_algorithm_workspace_bytes(*conv_algorithm_named("im2col_gemm"), pass, g);
    ASSERT_GT(im2col, 0u);
    const std::vector<ConvAlgorithmPerf> results = find_conv_algorithms(ctx, pass, g, im2col - 1);
    bool saw_im2col = false;
    for (const ConvAlgorithmPerf& r : results) {
      if (r.workspace_bytes > im2col - 1) {
        EXPECT_EQ(r.status, ConvAlgorithmStatus::over_workspace_limit) << r.algorithm->name;
        EXPECT_EQ(r.ms, 0.0);
      } else {
        EXPECT_EQ(r.status, ConvAlgorithmStatus::ok);
      }
      saw_im2col |= r.algorithm == conv_algorithm_named("im2col_gemm");
    }
    EXPECT_TRUE(saw_im2col);
    EXPECT_EQ(results.back().status, ConvAlgorithmStatus::over_workspace_limit);
    const ConvAlgorithm& chosen = find_conv_algorithm_cached(ctx, pass, g, im2col - 1);
    EXPECT_LE(conv_algorithm_workspace_bytes(chosen, pass, g), im2col - 1);
  }
}

TEST(ConvolutionSelectCuda, FindIsCachedPerContext) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Conv2dGeometry g{2, 9, 8, 8, 5, 3, 3};
  const ConvAlgorithm& first = find_conv_algorithm_cached(ctx, ConvPass::forward, g, kAnyWorkspace);
  ASSERT_EQ(ctx.algorithm_cache().size(), 1u);
  const std::string& cached = ctx.algorithm_cache().begin()->second;
  EXPECT_EQ(cached, first.name);
  // Overwrite the entry with another valid version: the cache answers, nothing is re-measured.
  ctx.algorithm_cache().begin()->second = "im2col_gemm";
  EXPECT_STREQ(find_conv_algorithm_cached(ctx, ConvPass::forward, g, kAnyWorkspace).name,
               "im2col_gemm");
}

TEST(ConvolutionSelectCuda, GetIsDeterministicAndSupported) {
  CREMA_REQUIRE_CUDA();
  for (const Conv2dGeometry& g : geometries()) {
    for (ConvPass pass : kPasses) {
      const ConvAlgorithm& a = get_conv_algorithm(pass, g);
      EXPECT_TRUE(a.supports(pass, g));
      for (int i = 0; i < 3; ++i) EXPECT_EQ(&get_conv_algorithm(pass, g), &a);
    }
  }
}

// Layers with `algorithm:` on the GPU match the CPU (tops and every gradient) and say what ran.
TEST(ConvolutionSelectCuda, LayersRunTheirAlgorithms) {
  CREMA_REQUIRE_CUDA();
  const std::string conv = "{name: c, type: Convolution, num_output: 7, kernel_size: 3, pad: 1, ";
  const std::string deconv = "{name: d, type: Deconvolution, num_output: 7, kernel_size: 3, ";
  for (const char* algorithm :
       {"find", "im2col_gemm", "{forward: implicit_gemm, backward_data: find}"}) {
    SCOPED_TRACE(algorithm);
    testing::check_cuda_parity(conv + "algorithm: " + algorithm + "}", {{3, 5, 9, 8}});
    testing::check_cuda_parity(deconv + "stride: 2, algorithm: " + algorithm + "}", {{2, 5, 6, 7}});
  }
  Context ctx(Device::cuda(0));
  testing::LayerHarness h(conv + "algorithm: {forward: im2col_gemm, backward_filter: find}}",
                          {{3, 5, 9, 8}}, ctx);
  h.set_bottom(0, testing::random_values(3 * 5 * 9 * 8, -1, 1, 7));
  h.forward();
  // A pass is chosen at its first call: after a forward, only the forward pass is known.
  EXPECT_EQ(h.layer->describe_algorithm(), "forward im2col_gemm");
}

}  // namespace
}  // namespace crema::kernels
