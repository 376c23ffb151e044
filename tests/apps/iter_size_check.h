// Shared by the CPU and CUDA train-loop tests: iter_size passes of batch B train like one batch
// of iter_size * B (the solver divides the summed gradient by iter_size), so the first losses of
// the two runs agree.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "apps/commands.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema::testing {

// Trains the synthetic net for 3 iterations at batch 16 into DIR/one, then with iter_size 4 at
// batch 4 into DIR/four, with `o`'s device and threads, and compares the losses. Returns the log.
inline std::string expect_iter_size_matches_larger_batch(const std::string& dir, CommandOptions o) {
  write_synthetic_idx(dir, 64, 10);
  o.config = dir + "/net.yaml";
  write_text(o.config, synthetic_config(dir));
  o.overrides = {"solver.max_iter=3", "solver.display=1", "solver.test_interval=0",
                 "data.train.batch_size=16", "++data.train.shuffle=false"};
  std::ostringstream log;
  o.out_dir = dir + "/one";
  train_command(o, log);
  o.overrides.push_back("++solver.iter_size=4");
  o.overrides.push_back("data.train.batch_size=4");
  o.out_dir = dir + "/four";
  train_command(o, log);
  const auto one = read_csv(dir + "/one/metrics.csv");
  const auto four = read_csv(dir + "/four/metrics.csv");
  EXPECT_EQ(one.size(), 5u);  // the header, 3 training rows and the final test
  EXPECT_EQ(four.size(), 5u);
  for (size_t r = 1; r < 4 && r < one.size() && r < four.size(); ++r) {
    const double a = std::stod(one[r][2]), b = std::stod(four[r][2]);
    EXPECT_NEAR(a, b, 1e-5 * std::abs(a)) << "iteration " << r << "\n" << log.str();
  }
  return log.str();
}

}  // namespace crema::testing
