// crema time on the CPU: every layer of the train net timed, and the algorithm cache file
// (--algo-cache) read at the start and written back at the end. (On a GPU the convolutions also
// say which algorithms they ran: tests/kernels/convolution_select_cuda_test.cpp.)
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "apps/commands.h"
#include "core/error.h"
#include "kernels/convolution/select.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

TEST(TimeCommand, TimesEveryLayerAndKeepsTheAlgorithmCache) {
  const std::string dir = testing::fresh_dir("time");
  testing::write_text(dir + "/net.yaml", testing::synthetic_config(dir));
  const std::string cache = dir + "/algorithms.json";
  kernels::save_algorithm_cache(cache, {{"conv2d forward (another run)", "implicit_gemm"}});
  CommandOptions options;
  options.config = dir + "/net.yaml";
  options.overrides = {"+model.layers.conv1.algorithm=find"};
  options.iterations = 1;
  options.threads = 2;
  options.algo_cache = cache;
  std::ostringstream out;
  const TimeSummary summary = time_command(options, out);
  ASSERT_EQ(summary.layers.size(), 5u) << out.str();  // the test-phase Accuracy is left out
  EXPECT_EQ(summary.layers[0].name, "conv1");
  EXPECT_EQ(summary.layers[0].algorithm, "");  // the CPU has no versions to choose among
  EXPECT_GT(summary.step_ms, 0.0);
  EXPECT_NE(out.str().find("training step:"), std::string::npos) << out.str();
  std::map<std::string, std::string> kept;
  kernels::load_algorithm_cache(cache, kept);
  EXPECT_EQ(
      kept,
      (std::map<std::string, std::string>{{"conv2d forward (another run)", "implicit_gemm"}}));

  testing::write_text(cache, "[1, 2]");
  try {
    time_command(options, out);
    ADD_FAILURE() << "a malformed cache file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cache), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema
