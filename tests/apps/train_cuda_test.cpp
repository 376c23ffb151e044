// `crema train` on a GPU: gradient accumulation with the CUDA-graph step, and a run stopped and
// resumed (the graph captured anew in the resumed process) logs the same losses as one that ran
// through, as GPU runs of the same seed are bit-identical.
#include <gtest/gtest.h>

#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "tests/apps/iter_size_check.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

TEST(TrainCuda, ResumeIsExactWithGraphAndIterSize) {
  CREMA_REQUIRE_CUDA();
  const std::string dir = testing::fresh_dir("train_cuda_resume");
  testing::write_synthetic_idx(dir, 200, 9);
  CommandOptions o;
  o.config = dir + "/net.yaml";
  testing::write_text(o.config, testing::synthetic_config(dir));
  o.device = "cuda:0";
  o.overrides = {"solver.max_iter=30",   "solver.display=4",        "solver.test_interval=10",
                 "++solver.iter_size=2", "data.train.batch_size=8", "++solver.cuda_graph=true"};
  std::ostringstream log;
  o.out_dir = dir + "/whole";
  const TrainSummary whole = train_command(o, log);
  EXPECT_LT(whole.last_loss, whole.first_loss) << log.str();
  o.out_dir = dir + "/pieces";
  o.stop_after = 13;
  EXPECT_TRUE(train_command(o, log).stopped);
  EXPECT_EQ(read_checkpoint(find_checkpoint(o.out_dir)).state.data_position, 26);
  o.stop_after = 0;
  o.resume = o.out_dir;
  o.out_dir.clear();
  train_command(o, log);
  EXPECT_EQ(testing::deterministic_metrics(dir + "/pieces/metrics.csv"),
            testing::deterministic_metrics(dir + "/whole/metrics.csv"))
      << log.str();
  EXPECT_EQ(testing::read_file(dir + "/pieces/final.safetensors"),
            testing::read_file(dir + "/whole/final.safetensors"));
}

// With iter_size passes of batch B the summed gradient is that of one batch of iter_size * B
// (the solver divides by iter_size): the first step's update matches, so the first losses agree.
TEST(TrainCuda, IterSizeMatchesTheLargerBatch) {
  CREMA_REQUIRE_CUDA();
  CommandOptions o;
  o.device = "cuda:0";
  testing::expect_iter_size_matches_larger_batch(testing::fresh_dir("train_cuda_iter_size"), o);
}

}  // namespace
}  // namespace crema
