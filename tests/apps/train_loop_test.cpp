// The training loop's gradient accumulation: iter_size passes of batch B make the step of one
// batch of iter_size * B (the solver divides the summed gradients by iter_size), so with the same
// samples in the same order the logged losses agree to rounding.
#include <gtest/gtest.h>

#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "tests/apps/iter_size_check.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

TEST(TrainLoop, IterSizeMatchesTheLargerBatch) {
  const std::string dir = testing::fresh_dir("train_loop_iter_size");
  CommandOptions o;
  o.threads = 1;
  const std::string log = testing::expect_iter_size_matches_larger_batch(dir, o);
  // Four batches per iteration: the data stream moved 12 batches.
  EXPECT_EQ(read_checkpoint(find_checkpoint(dir + "/four")).state.data_position, 12);
  EXPECT_NE(log.find("iterations of batch 4 x 4 passes"), std::string::npos) << log;
}

}  // namespace
}  // namespace crema
