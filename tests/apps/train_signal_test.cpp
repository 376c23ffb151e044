// Signals sent to a running `crema train`: Ctrl-C (SIGINT) checkpoints and exits 130 (SIGTERM
// the same, 143), and the run resumes exactly; a second Ctrl-C exits at once; SIGKILL in the
// middle of a checkpoint write, or at any moment, leaves the previous checkpoint whole and the
// run resumable.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

int64_t lines_in(const std::string& path) {
  const std::string text = testing::read_file(path);
  return std::count(text.begin(), text.end(), '\n');
}

// The name of a checkpoint being written (checkpoints/.tmp-iter_*), or "".
std::string temp_checkpoint(const std::string& run) {
  std::error_code error;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints", error)) {
    if (e.path().filename().string().rfind(".tmp-iter_", 0) == 0) return e.path().string();
  }
  return "";
}

class TrainSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("signals_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 100, 6);
    run_ = dir_ + "/run";
  }
  // A long run in the background: one metrics row per iteration.
  std::vector<std::string> long_run(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {"train",     config_,
                                     "--threads", "1",
                                     "--set",     "solver.max_iter=100000",
                                     "--set",     "solver.display=1",
                                     "--set",     "solver.test_interval=0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::string dir_, config_, run_;
};

TEST_F(TrainSignals, SigintCheckpointsExits130AndTheRunResumesExactly) {
  testing::Background crema(long_run({"--out", run_}), dir_ + "/first");
  ASSERT_TRUE(testing::wait_until([&] { return lines_in(run_ + "/metrics.csv") >= 4; }, 60))
      << crema.err();
  crema.signal(SIGINT);
  EXPECT_EQ(crema.wait(), 130) << crema.err();
  EXPECT_NE(crema.err().find("stopping after this step"), std::string::npos) << crema.err();
  EXPECT_NE(crema.out().find("interrupted after iteration"), std::string::npos) << crema.out();
  const Checkpoint stopped = read_checkpoint(find_checkpoint(run_));
  const int64_t n = stopped.state.iteration;
  ASSERT_GE(n, 3);
  EXPECT_EQ(lines_in(run_ + "/metrics.csv"), 1 + n);  // every completed iteration was logged

  // Resume to n + 5 and compare with a run that went to n + 5 without a stop.
  CommandOptions o;
  o.config = config_;
  o.threads = 1;
  o.overrides = {"solver.max_iter=" + std::to_string(n + 5), "solver.display=1",
                 "solver.test_interval=0"};
  o.out_dir = dir_ + "/whole";
  std::ostringstream log;
  train_command(o, log);
  o.out_dir.clear();
  o.resume = run_;
  train_command(o, log);
  EXPECT_EQ(testing::deterministic_metrics(run_ + "/metrics.csv"),
            testing::deterministic_metrics(dir_ + "/whole/metrics.csv"));
  EXPECT_EQ(testing::read_file(run_ + "/final.safetensors"),
            testing::read_file(dir_ + "/whole/final.safetensors"));
}

// SIGTERM, what a job scheduler sends before preempting, is handled like Ctrl-C: a checkpoint,
// then exit status 143 (128 + 15).
TEST_F(TrainSignals, SigtermCheckpointsAndExits143) {
  testing::Background crema(long_run({"--out", run_}), dir_ + "/first");
  ASSERT_TRUE(testing::wait_until([&] { return lines_in(run_ + "/metrics.csv") >= 4; }, 60))
      << crema.err();
  crema.signal(SIGTERM);
  EXPECT_EQ(crema.wait(), 143) << crema.err();
  EXPECT_NE(crema.out().find("interrupted after iteration"), std::string::npos) << crema.out();
  const Checkpoint stopped = read_checkpoint(find_checkpoint(run_));
  EXPECT_GE(stopped.state.iteration, 3);
}

TEST_F(TrainSignals, SecondSigintExitsAtOnce) {
  testing::Background crema(long_run({"--out", run_}), dir_ + "/run",
                            {"CREMA_TEST_CHECKPOINT_DELAY_MS=3000"});
  ASSERT_TRUE(testing::wait_until([&] { return lines_in(run_ + "/metrics.csv") >= 3; }, 60))
      << crema.err();
  crema.signal(SIGINT);
  ASSERT_TRUE(testing::wait_until([&] { return !temp_checkpoint(run_).empty(); }, 20))
      << crema.err();
  const auto start = std::chrono::steady_clock::now();
  crema.signal(SIGINT);
  EXPECT_EQ(crema.wait(), 130);
  // The checkpoint alone would have taken 9 s more.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_FALSE(
      fs::exists(run_ + "/checkpoints/last"));  // the unfinished one never became a checkpoint
}

TEST_F(TrainSignals, SigkillInTheMiddleOfASaveLeavesThePreviousCheckpoint) {
  testing::Background crema(long_run({"--out", run_, "--set", "++solver.snapshot_interval=4"}),
                            dir_ + "/run", {"CREMA_TEST_CHECKPOINT_DELAY_MS=300"});
  // The first checkpoint is complete, the second has its model file written and waits.
  const std::string second = run_ + "/checkpoints/.tmp-iter_000008";
  ASSERT_TRUE(testing::wait_until([&] { return fs::exists(second + "/model.safetensors"); }, 60))
      << crema.err();
  crema.signal(SIGKILL);
  EXPECT_EQ(crema.wait(), 128 + SIGKILL);
  ASSERT_TRUE(fs::exists(second)) << "the kill did not land inside the save";
  EXPECT_EQ(fs::read_symlink(run_ + "/checkpoints/last"), "iter_000004");
  const Checkpoint previous = read_checkpoint(find_checkpoint(run_));
  EXPECT_EQ(previous.state.iteration, 4);

  // It loads for testing and resumes; the leftover is cleared by the next checkpoint.
  const int status =
      std::system((std::string(CREMA_BINARY_DIR) + "/bin/crema test " + config_ + " --weights " +
                   run_ + "/checkpoints/last/model.safetensors > /dev/null")
                      .c_str());
  EXPECT_EQ(status, 0);
  CommandOptions o;
  o.config = config_;
  o.threads = 1;
  o.overrides = {"solver.max_iter=100", "solver.display=1", "solver.test_interval=0"};
  o.resume = run_;
  o.stop_after = 6;
  std::ostringstream log;
  EXPECT_TRUE(train_command(o, log).stopped);
  EXPECT_EQ(fs::read_symlink(run_ + "/checkpoints/last"), "iter_000006");
  EXPECT_FALSE(fs::exists(second));
}

TEST_F(TrainSignals, SigkillAtRandomMomentsAlwaysLeavesAResumableRun) {
  std::mt19937 random(7);
  int inside_a_save = 0;
  for (int round = 0; round < 4; ++round) {
    const std::vector<std::string> where = round == 0 ? std::vector<std::string>{"--out", run_}
                                                      : std::vector<std::string>{"--resume", run_};
    std::vector<std::string> args = long_run(where);
    args.insert(args.end(), {"--set", "++solver.snapshot_interval=1"});
    testing::Background crema(args, dir_ + "/round" + std::to_string(round));
    ASSERT_TRUE(testing::wait_until([&] { return fs::exists(run_ + "/checkpoints/last"); }, 60))
        << crema.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + random() % 200));
    crema.signal(SIGKILL);
    EXPECT_EQ(crema.wait(), 128 + SIGKILL) << crema.err();
    inside_a_save += temp_checkpoint(run_).empty() ? 0 : 1;
    const std::string last = find_checkpoint(run_);
    const Checkpoint c = read_checkpoint(last);
    EXPECT_GT(c.state.iteration, 0);
    for (const auto& e : fs::directory_iterator(run_ + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      if (name.rfind("iter_", 0) == 0) {
        EXPECT_NO_THROW(read_checkpoint(e.path().string())) << name;
      }
    }
  }
  std::cout << "[          ] " << inside_a_save << " of 4 kills landed inside a checkpoint write\n";
}

}  // namespace
}  // namespace crema
