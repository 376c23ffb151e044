// The training loop's gradient accumulation: iter_size passes of batch B make the step of one
// batch of iter_size * B (the solver divides the summed gradients by iter_size), so with the same
// samples in the same order the logged losses agree to rounding.
#include <gtest/gtest.h>

#include <sstream>

#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

TEST(TrainLoop, IterSizeMatchesTheLargerBatch) {
  const std::string dir = testing::fresh_dir("train_loop_iter_size");
  testing::write_synthetic_idx(dir, 64, 10);
  CommandOptions o;
  o.config = dir + "/net.yaml";
  testing::write_text(o.config, testing::synthetic_config(dir));
  o.threads = 1;
  o.overrides = {"solver.max_iter=3", "solver.display=1", "solver.test_interval=0",
                 "data.train.batch_size=16", "++data.train.shuffle=false"};
  std::ostringstream log;
  o.out_dir = dir + "/one";
  train_command(o, log);
  o.overrides.push_back("++solver.iter_size=4");
  o.overrides.push_back("data.train.batch_size=4");
  o.out_dir = dir + "/four";
  train_command(o, log);
  const auto one = testing::read_csv(dir + "/one/metrics.csv");
  const auto four = testing::read_csv(dir + "/four/metrics.csv");
  ASSERT_EQ(one.size(), 5u);  // the header, 3 training rows and the final test
  ASSERT_EQ(four.size(), 5u);
  for (size_t r = 1; r < 4; ++r) {
    const double a = std::stod(one[r][2]), b = std::stod(four[r][2]);
    EXPECT_NEAR(a, b, 1e-5 * std::abs(a)) << "iteration " << r << "\n" << log.str();
  }
  // Four batches per iteration: the data stream moved 12 batches.
  EXPECT_EQ(read_checkpoint(find_checkpoint(dir + "/four")).state.data_position, 12);
  EXPECT_NE(log.str().find("iterations of batch 4 x 4 passes"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace crema
