// Divergence on a GPU with the CUDA-graph step: the per-step check of skip and rollback (a loss
// sum and a gradient sum read back after the graph's replay) and the rollback's restore into the
// tensors the graph was captured with. The NaN comes from the test hook (CREMA_TEST_NAN_AT) in
// iteration 8, long after the capture at iteration 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

CommandOptions graph_run(const std::string& dir, const std::string& mode) {
  std::filesystem::create_directories(dir);  // the run's data and config files go there
  CommandOptions o;
  o.config = testing::write_synthetic_run(dir, 200, 4);
  o.device = "cuda:0";
  o.out_dir = dir + "/run";
  o.overrides = {"solver.max_iter=20",       "solver.display=1",
                 "solver.test_interval=0",   "++solver.snapshot_interval=5",
                 "++solver.cuda_graph=true", "++solver.on_nonfinite=" + mode};
  return o;
}

TEST(TrainNonfiniteCuda, StopWithTheGraph) {
  CREMA_REQUIRE_CUDA();
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  const std::string dir = testing::fresh_dir("train_nonfinite_cuda");
  std::ostringstream log;

  const TrainSummary stopped = train_command(graph_run(dir + "/stop", "stop"), log);
  EXPECT_TRUE(stopped.diverged) << log.str();
  EXPECT_NE(log.str().find("at iteration 8: layer 'conv1'"), std::string::npos) << log.str();
  EXPECT_EQ(read_checkpoint(find_checkpoint(dir + "/stop/run")).state.iteration, 5);
}

TEST(TrainNonfiniteCuda, SkipAndRollbackWithTheGraph) {
  CREMA_REQUIRE_CUDA();
  const std::string dir = testing::fresh_dir("train_nonfinite_cuda_modes");
  std::ostringstream log;
  {
    const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
    const TrainSummary skipped = train_command(graph_run(dir + "/skip", "skip"), log);
    EXPECT_EQ(skipped.skipped_steps, 1) << log.str();
    EXPECT_EQ(skipped.iterations, 20);
    EXPECT_TRUE(std::isfinite(skipped.last_loss)) << log.str();
  }
  {
    const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
    const TrainSummary rolled = train_command(graph_run(dir + "/rollback", "rollback"), log);
    EXPECT_EQ(rolled.rollbacks, 1) << log.str();
    EXPECT_FALSE(rolled.diverged);
    EXPECT_TRUE(std::isfinite(rolled.last_loss)) << log.str();
  }
}

}  // namespace
}  // namespace crema
