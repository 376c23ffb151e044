// `crema train` with batch mixing on a GPU: the soft targets go through the feeder's copy stream
// into the CUDA-graph step; the run starts where the CPU run starts (same batches, same first
// loss), learns, and `crema test` on the GPU reproduces its numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "apps/commands.h"
#include "tests/apps/batch_mix_run.h"
#include "tests/support/cuda_test_util.h"

namespace crema {
namespace {

TEST(BatchMixTrainingCuda, MatchesTheCpuStartAndLearns) {
  CREMA_REQUIRE_CUDA();
  const std::string dir = testing::fresh_dir("batch_mix_train_cuda");
  CommandOptions o;
  o.config = testing::mixing_run(dir, "[10]", "{mixup_alpha: 0.2, cutmix_alpha: 1.0}");
  o.overrides = {"solver.display=1"};  // first_loss: the first step's, before any update
  std::ostringstream log;
  o.out_dir = dir + "/cpu";
  o.threads = 2;
  const TrainSummary cpu = train_command(o, log);
  o.device = "cuda:0";
  o.overrides.push_back("++solver.cuda_graph=true");
  o.out_dir = dir + "/gpu";
  const TrainSummary gpu = train_command(o, log);
  // The same first batch (mixed alike) and weights, float32 on either device.
  EXPECT_NEAR(gpu.first_loss, cpu.first_loss, 1e-4 * std::abs(cpu.first_loss)) << log.str();
  ASSERT_EQ(gpu.final_test.size(), 2u) << log.str();
  EXPECT_GT(gpu.final_test[0].second, 0.6) << log.str();

  o.overrides.clear();
  o.weights = dir + "/gpu/final.safetensors";
  std::ostringstream test_log;
  const auto results = test_command(o, test_log);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NEAR(results[0].second, gpu.final_test[0].second, 1e-9);
  EXPECT_NEAR(results[1].second, gpu.final_test[1].second, 1e-6);
}

}  // namespace
}  // namespace crema
