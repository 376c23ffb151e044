// Divergence (solver.on_nonfinite): a NaN injected into the input batch of iteration 8 through the
// test hook (CREMA_TEST_NAN_AT, CREMA_TEST_NAN_TIMES: apps/training/loop.cpp) makes the loss and
// every gradient non-finite. `stop` exits with 3 naming the layer and the iteration and keeps
// the last good checkpoint; `skip` drops the step and goes on; `rollback` reloads the last
// checkpoint with a lower learning rate, and stops after solver.max_rollbacks; bad values of the
// keys are one error naming file:line:col.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "core/error.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

class TrainNonfinite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("nonfinite_" + testing::test_name());
    options_.config = testing::write_synthetic_run(dir_, 200, 3);
    options_.out_dir = dir_ + "/run";
    options_.threads = 1;
    options_.overrides = {"solver.max_iter=20", "solver.display=1", "solver.test_interval=0",
                          "++solver.snapshot_interval=5"};
  }
  TrainSummary train(const std::string& mode, std::ostringstream& log) {
    options_.overrides.push_back("++solver.on_nonfinite=" + mode);
    return train_command(options_, log);
  }
  // The last training row's learning rate in metrics.csv.
  double last_lr() const {
    const auto rows = testing::read_csv(options_.out_dir + "/metrics.csv");
    size_t lr = 0;
    while (rows[0][lr] != "lr") ++lr;
    for (size_t r = rows.size() - 1; r > 0; --r) {
      if (rows[r].size() > lr && !rows[r][lr].empty()) return std::stod(rows[r][lr]);
    }
    return 0.0;
  }
  std::string dir_;
  CommandOptions options_;
};

TEST_F(TrainNonfinite, StopNamesLayerAndIterationExitsWith3AndKeepsTheLastCheckpoint) {
  const std::string run = dir_ + "/run";
  testing::Background crema(
      {"train", options_.config, "--threads", "1", "--set", "solver.max_iter=20", "--set",
       "solver.display=1", "--set", "solver.test_interval=0", "--set",
       "++solver.snapshot_interval=5", "--out", run},
      dir_ + "/stop", {"CREMA_TEST_NAN_AT=8"});
  EXPECT_EQ(crema.wait(), 3) << crema.out() << crema.err();
  const std::string out = crema.out();
  EXPECT_CONTAINS(out, "stopped: the loss is not finite at iteration 8");
  EXPECT_CONTAINS(out, "layer 'conv1' is the first whose output is not finite");
  EXPECT_CONTAINS(out, "/run/checkpoints/iter_000005. Lower solver.base_lr");
  EXPECT_CONTAINS(testing::read_file(run + "/train.log"), "stopped: ");

  // The kept checkpoint loads, and the run resumes from it to the end.
  const Checkpoint kept = read_checkpoint(find_checkpoint(run));
  EXPECT_EQ(kept.state.iteration, 5);
  for (const auto& [name, tensor] : kept.model) {
    for (float v : tensor.to_vector()) ASSERT_TRUE(std::isfinite(v)) << name;
  }
  options_.resume = run;
  std::ostringstream log;
  const TrainSummary resumed = train_command(options_, log);
  EXPECT_EQ(resumed.iterations, 20);
  EXPECT_FALSE(resumed.diverged);
  EXPECT_FALSE(std::filesystem::exists(run + "/FAILED"));  // it had a checkpoint to go back to
}

// Diverged before the first checkpoint: nothing to resume, so the run directory is marked FAILED.
TEST_F(TrainNonfinite, StopBeforeAnyCheckpointMarksTheRunFailed) {
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "3");
  std::ostringstream log;
  const TrainSummary s = train("stop", log);
  EXPECT_TRUE(s.diverged);
  EXPECT_CONTAINS(log.str(), "no checkpoint was written before");
  const std::string failed = testing::read_file(options_.out_dir + "/FAILED");
  EXPECT_CONTAINS(failed, "error: stopped: the loss is not finite at iteration 3");
  EXPECT_CONTAINS(failed, "no checkpoint was written");
}

TEST_F(TrainNonfinite, SkipDropsTheStepLogsItAndGoesOn) {
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  std::ostringstream log;
  const TrainSummary s = train("skip", log);
  EXPECT_FALSE(s.diverged);
  EXPECT_EQ(s.iterations, 20);
  EXPECT_EQ(s.skipped_steps, 1);
  EXPECT_TRUE(std::isfinite(s.last_loss));
  EXPECT_CONTAINS(log.str(),
                  "skipped: the loss or a gradient is not finite at iteration 8: "
                  "layer 'conv1' is the first whose output is not finite");
  EXPECT_CONTAINS(log.str(), "(1 step(s) skipped so far)");
  EXPECT_CONTAINS(log.str(), "final test: ");
}

// Batch norm's running statistics, updated by the NaN batch's forward pass, are put back too:
// the test net and the checkpoints stay finite.
TEST_F(TrainNonfinite, SkipKeepsTheBatchNormStatistics) {
  options_.config = testing::write_variant(
      dir_, testing::read_file(options_.config), "    - {name: relu1,",
      "    - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}\n    - {name: relu1,");
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  std::ostringstream log;
  const TrainSummary s = train("skip", log);
  EXPECT_EQ(s.skipped_steps, 1) << log.str();
  EXPECT_FALSE(s.diverged) << log.str();
  ASSERT_EQ(s.final_test.size(), 2u) << log.str();
  EXPECT_TRUE(std::isfinite(s.final_test[1].second)) << log.str();
  for (const auto& [name, tensor] : read_checkpoint(find_checkpoint(options_.out_dir)).model) {
    for (float v : tensor.to_vector()) ASSERT_TRUE(std::isfinite(v)) << name;
  }
}

TEST_F(TrainNonfinite, RollbackReloadsTheLastCheckpointWithALowerLearningRate) {
  std::ostringstream plain_log;
  train("stop", plain_log);
  const double plain_lr = last_lr();
  options_.overrides.pop_back();

  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  std::ostringstream log;
  const TrainSummary s = train("rollback", log);
  EXPECT_FALSE(s.diverged);
  EXPECT_EQ(s.iterations, 20);
  EXPECT_EQ(s.rollbacks, 1);
  EXPECT_CONTAINS(log.str(),
                  "rolled back: the loss or a gradient is not finite at "
                  "iteration 8: layer 'conv1'");
  EXPECT_CONTAINS(log.str(), "/run/checkpoints/iter_000005, learning rate x 0.5 (rollback 1 of 3)");
  EXPECT_DOUBLE_EQ(last_lr(), 0.5 * plain_lr);

  // The checkpoints carry the lowered rate: a resumed run goes on with it.
  const TrainingState saved = read_checkpoint(find_checkpoint(options_.out_dir)).state;
  EXPECT_EQ(saved.rollbacks, 1);
  EXPECT_EQ(saved.lr_scale, 0.5);
  options_.resume = options_.out_dir;
  options_.overrides.push_back("solver.max_iter=25");
  std::ostringstream resumed_log;
  train_command(options_, resumed_log);
  // The synthetic config's inv policy, base_lr 0.05, at the 25th iteration (iter 24).
  EXPECT_NEAR(last_lr(), 0.5 * 0.05 * std::pow(1.0 + 1e-4 * 24, -0.75), 1e-12) << resumed_log.str();
}

TEST_F(TrainNonfinite, RollbackGivesUpAfterMaxRollbacks) {
  // No snapshot before the NaN: the run goes back to the checkpoint it wrote at iteration 0.
  options_.overrides = {"solver.max_iter=20", "solver.display=1", "solver.test_interval=0",
                        "++solver.max_rollbacks=2", "++solver.rollback_lr_factor=0.25"};
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  const testing::ScopedEnv times("CREMA_TEST_NAN_TIMES", "5");
  std::ostringstream log;
  const TrainSummary s = train("rollback", log);
  EXPECT_TRUE(s.diverged);
  EXPECT_EQ(s.rollbacks, 2);
  EXPECT_CONTAINS(log.str(), "checkpoints/iter_000000, learning rate x 0.25 (rollback 2 of 2)");
  EXPECT_CONTAINS(log.str(), "stopped: the loss or a gradient is not finite at iteration 8");
  EXPECT_EQ(read_checkpoint(find_checkpoint(options_.out_dir)).state.iteration, 0);
}

TEST_F(TrainNonfinite, BadKeysNameTheirPlace) {
  const std::pair<const char*, const char*> cases[] = {
      {"on_nonfinite: maybe", "solver.on_nonfinite is stop, skip or rollback, got 'maybe'"},
      {"rollback_lr_factor: 2", "solver.rollback_lr_factor must be in (0, 1]"},
      {"rollback_lr_factor: 0", "solver.rollback_lr_factor must be in (0, 1]"},
      {"max_rollbacks: -1", "solver.max_rollbacks must not be negative"}};
  for (const auto& [line, message] : cases) {
    options_.config =
        testing::write_variant(dir_, testing::read_file(options_.config), "  momentum: 0.9",
                               std::string("  ") + line + "\n  momentum: 0.9");
    try {
      std::ostringstream log;
      train_command(options_, log);
      ADD_FAILURE() << line << " was accepted";
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.what(), message);
      EXPECT_CONTAINS(e.what(), "variant.yaml:");
    }
    options_.config = dir_ + "/net.yaml";
  }
}

}  // namespace
}  // namespace crema
