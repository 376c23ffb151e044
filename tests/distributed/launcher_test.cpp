// `crema train --gpus`: the parent starts one child per GPU and waits. Run on the CPU
// (CREMA_TEST_LAUNCH_CPU gives the children `--device cpu`): two children train as ranks of one
// job, Ctrl-C to the parent stops both after one checkpoint, a killed child is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/distributed/launcher.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

TEST(Launcher, TheChildrensCommandLineHasNoGpusOption) {
  EXPECT_EQ(distributed::without_gpus_option({"train", "c.yaml", "--gpus", "0,1", "--out", "r"}),
            (std::vector<std::string>{"train", "c.yaml", "--out", "r"}));
  EXPECT_EQ(distributed::without_gpus_option({"train", "--gpus=all", "c.yaml"}),
            (std::vector<std::string>{"train", "c.yaml"}));
}

class LaunchOnCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("launch_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 200, 5);
  }
  std::vector<std::string> args(int64_t iterations) const {
    return {"train",     config_,
            "--gpus",    "0,1",
            "--threads", "1",
            "--timeout", "60",
            "--out",     dir_ + "/run",
            "--set",     "data.train.batch_size=8",
            "--set",     "solver.max_iter=" + std::to_string(iterations),
            "--set",     "solver.display=1",
            "--set",     "solver.test_interval=0"};
  }
  const std::vector<std::string> env_ = {"CREMA_TEST_LAUNCH_CPU=1"};
  std::string dir_, config_;
};

// The child of `parent` whose environment holds RANK=`rank` (0 when none yet).
pid_t child_of_rank(pid_t parent, int rank) {
  std::ifstream list("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                     "/children");
  pid_t pid = 0;
  while (list >> pid) {
    std::ifstream environ("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::stringstream text;
    text << environ.rdbuf();
    std::string entry;
    while (std::getline(text, entry, '\0')) {
      if (entry == "RANK=" + std::to_string(rank)) return pid;
    }
  }
  return 0;
}

TEST_F(LaunchOnCpu, TwoChildrenTrainAsRanksAndRank0WritesTheRun) {
  testing::Background parent(args(12), dir_ + "/parent", env_);
  ASSERT_EQ(parent.wait(), 0) << parent.err();
  EXPECT_CONTAINS(parent.out(), "(rank 0 of 2, torchrun launch; batch 8 per rank)");
  EXPECT_TRUE(fs::exists(dir_ + "/run/final.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ + "/run/rank1/train.log"));
}

TEST_F(LaunchOnCpu, CtrlCToTheParentStopsBothChildrenWithOneCheckpoint) {
  testing::Background parent(args(100000), dir_ + "/parent", env_);
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::read_csv(dir_ + "/run/metrics.csv").size() >= 4; }, 60))
      << parent.err();
  parent.signal(SIGINT);
  EXPECT_EQ(parent.wait(), 130) << parent.err();
  EXPECT_CONTAINS(parent.out(), "interrupted after iteration");
  EXPECT_TRUE(fs::exists(dir_ + "/run/checkpoints/last"));
}

TEST_F(LaunchOnCpu, AKilledChildIsNamedAndTheParentFails) {
  testing::Background parent(args(100000), dir_ + "/parent", env_);
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::read_csv(dir_ + "/run/metrics.csv").size() >= 4; }, 60))
      << parent.err();
  const pid_t rank1 = child_of_rank(parent.pid(), 1);
  ASSERT_GT(rank1, 0);
  kill(rank1, SIGKILL);
  EXPECT_NE(parent.wait(), 0);
  EXPECT_CONTAINS(parent.err(), "crema: error: rank 1 (cuda:1) was killed by signal 9");
}

}  // namespace
}  // namespace crema
