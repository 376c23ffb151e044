// `crema train` as ranks of a job, on the CPU (the sockets' group): two ranks of batch 8 train as
// one process of batch 16 (with SyncBatchNorm too, and with a bf16 gradient all-reduce within
// bf16's rounding); every rank displays the global batch's loss; rank 0 alone writes the run; a
// signal on one rank stops both after the same iteration, and that checkpoint resumes on one
// process; a rank that dies, mismatched configs, bad variables and a GPU that does not exist are
// one line each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "apps/distributed/launcher.h"
#include "apps/training/checkpoint.h"
#include "core/serialization.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

class TrainRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("ranks_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 200, 4);
    port_ = std::to_string(distributed::free_port());
  }
  std::vector<std::string> env(int rank, int size = 2) const {
    return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(size),
            "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port_};
  }
  std::vector<std::string> args(const std::string& out, int64_t batch, int64_t iterations,
                                const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {"train",     config_,
                                  "--device",  "cpu",
                                  "--threads", "1",
                                  "--timeout", "60",
                                  "--out",     out,
                                  "--set",     "data.train.batch_size=" + std::to_string(batch),
                                  "--set",     "solver.max_iter=" + std::to_string(iterations),
                                  "--set",     "solver.display=1",
                                  "--set",     "solver.test_interval=10"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::string dir_, config_, port_;
};

std::map<std::string, std::vector<float>> weights_of(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : load_safetensors(path)) out[name] = t.to_vector();
  return out;
}

TEST_F(TrainRanks, TwoRanksOfBatch8TrainAsOneProcessOfBatch16) {
  testing::Background rank0(args(dir_ + "/two", 8, 30), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/two", 8, 30), dir_ + "/r1", env(1));
  ASSERT_EQ(rank0.wait(), 0) << rank0.err();
  ASSERT_EQ(rank1.wait(), 0) << rank1.err();
  testing::Background one(args(dir_ + "/one", 16, 30), dir_ + "/one");
  ASSERT_EQ(one.wait(), 0) << one.err();

  // The same arithmetic but for the order of additions: the mean over 16 samples, against the
  // mean of two means over 8 (float32; after 30 SGD steps the weights agree to ~1e-6).
  const auto two = weights_of(dir_ + "/two/final.safetensors");
  const auto single = weights_of(dir_ + "/one/final.safetensors");
  ASSERT_EQ(two.size(), single.size());
  for (const auto& [name, values] : single) {
    ASSERT_EQ(two.at(name).size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_NEAR(two.at(name)[i], values[i], 1e-4f + 1e-4f * std::fabs(values[i]))
          << name << "[" << i << "]";
    }
  }
  // The test pass is sharded and reduced: the same mean as one process's.
  const std::string final_two = rank0.out().substr(rank0.out().rfind("final test:"));
  const std::string final_one = one.out().substr(one.out().rfind("final test:"));
  EXPECT_EQ(final_two.substr(0, 26), final_one.substr(0, 26));  // accuracy=0.xxxx
  EXPECT_CONTAINS(rank0.out(), "(rank 0 of 2, torchrun launch; batch 8 per rank)");
  // Rank 0 alone writes the run; rank 1 prints nothing and logs into rank1/.
  EXPECT_TRUE(fs::exists(dir_ + "/two/checkpoints/last"));
  EXPECT_TRUE(fs::exists(dir_ + "/two/rank1/train.log"));
  EXPECT_FALSE(fs::exists(dir_ + "/two/rank1/checkpoints"));
  EXPECT_EQ(rank1.out(), "");
}

// Each of iter_size, a frozen layer and another solver: two ranks of batch 4 x iter_size 2 (or
// of batch 8) against one process of batch 16, within float32 rounding.
TEST_F(TrainRanks, IterSizeFrozenParametersAndAdamTrainAsOneProcess) {
  struct Variant {
    std::string name;
    int64_t rank_batch;
    std::vector<std::string> both, ranks;
  };
  const std::vector<Variant> variants = {
      {"iter_size", 4, {}, {"--set", "++solver.iter_size=2"}},
      {"frozen", 8, {"--set", "+solver.param_groups=[{match: 'conv1\\..*', lr_mult: 0}]"}, {}},
      {"adam", 8, {"--set", "solver.type=adam", "--set", "solver.base_lr=0.001"}, {}},
  };
  for (const Variant& v : variants) {
    std::vector<std::string> extra = v.both;
    extra.insert(extra.end(), v.ranks.begin(), v.ranks.end());
    const std::string two = dir_ + "/two_" + v.name, one = dir_ + "/one_" + v.name;
    port_ = std::to_string(distributed::free_port());
    testing::Background rank0(args(two, v.rank_batch, 12, extra), two + "_r0", env(0));
    testing::Background rank1(args(two, v.rank_batch, 12, extra), two + "_r1", env(1));
    ASSERT_EQ(rank0.wait(), 0) << v.name << ": " << rank0.err();
    ASSERT_EQ(rank1.wait(), 0) << v.name << ": " << rank1.err();
    testing::Background single(args(one, 16, 12, v.both), one);
    ASSERT_EQ(single.wait(), 0) << v.name << ": " << single.err();
    const auto a = weights_of(two + "/final.safetensors");
    const auto b = weights_of(one + "/final.safetensors");
    for (const auto& [name, values] : b) {
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_NEAR(a.at(name)[i], values[i], 1e-4f + 1e-4f * std::fabs(values[i]))
            << v.name << ": " << name << "[" << i << "]";
      }
    }
  }
}

// The "loss" column of a metrics.csv: one value per display line.
std::vector<double> display_losses(const std::string& path) {
  const auto rows = testing::read_csv(path);
  std::vector<double> losses;
  if (rows.empty()) return losses;
  const size_t column = size_t(std::find(rows[0].begin(), rows[0].end(), "loss") - rows[0].begin());
  for (size_t r = 1; r < rows.size(); ++r) {
    if (column < rows[r].size() && !rows[r][column].empty()) {
      losses.push_back(std::stod(rows[r][column]));
    }
  }
  return losses;
}

// A BatchNorm with sync: true after conv1. Two ranks of batch 8 normalize with the statistics of
// the 16 samples, as one process of batch 16 does (where sync: true is BatchNorm): the same
// weights and running statistics within float32 rounding. And the display loss rides with the
// gradients: both ranks log the global batch's loss, the one process's.
TEST_F(TrainRanks, SyncBatchNormTrainsAsOneProcessAndEveryRankDisplaysTheGlobalLoss) {
  config_ = testing::write_variant(
      dir_, testing::read_file(config_), "    - {name: relu1,",
      "    - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1, sync: true}\n"
      "    - {name: relu1,");
  testing::Background rank0(args(dir_ + "/two", 8, 20), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/two", 8, 20), dir_ + "/r1", env(1));
  ASSERT_EQ(rank0.wait(), 0) << rank0.err();
  ASSERT_EQ(rank1.wait(), 0) << rank1.err();
  testing::Background one(args(dir_ + "/one", 16, 20), dir_ + "/one");
  ASSERT_EQ(one.wait(), 0) << one.err();

  const auto two = weights_of(dir_ + "/two/final.safetensors");
  const auto single = weights_of(dir_ + "/one/final.safetensors");
  ASSERT_TRUE(single.count("bn1.running_var"));
  ASSERT_EQ(two.size(), single.size());
  for (const auto& [name, values] : single) {
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_NEAR(two.at(name)[i], values[i], 1e-4f + 1e-4f * std::fabs(values[i]))
          << name << "[" << i << "]";
    }
  }
  const std::vector<double> loss0 = display_losses(dir_ + "/two/metrics.csv");
  const std::vector<double> loss1 = display_losses(dir_ + "/two/rank1/metrics.csv");
  const std::vector<double> loss_one = display_losses(dir_ + "/one/metrics.csv");
  ASSERT_EQ(loss0.size(), 20u);
  EXPECT_EQ(loss0, loss1);  // the same float on both ranks: the mean of their sums
  ASSERT_EQ(loss_one.size(), loss0.size());
  for (size_t i = 0; i < loss0.size(); ++i) {
    EXPECT_NEAR(loss0[i], loss_one[i], 1e-4 * std::fabs(loss_one[i])) << "display " << i;
  }
}

// distributed.reduce_dtype: bf16: the gradients are rounded to bf16 (8 significant bits) before
// they are averaged, so the weights follow the f32 run's within about bf16's relative rounding of
// an update (2^-8 of lr x gradient per step) -- 1e-3 after 12 steps here -- not bit for bit; and
// the stop vote and display loss stay f32: both ranks log the same losses.
TEST_F(TrainRanks, ABf16AllReduceTrainsAsTheF32OneWithinBf16Rounding) {
  const std::vector<std::string> bf16 = {"--set", "+distributed={reduce_dtype: bf16}"};
  testing::Background rank0(args(dir_ + "/bf16", 8, 12, bf16), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/bf16", 8, 12, bf16), dir_ + "/r1", env(1));
  ASSERT_EQ(rank0.wait(), 0) << rank0.err();
  ASSERT_EQ(rank1.wait(), 0) << rank1.err();
  port_ = std::to_string(distributed::free_port());
  testing::Background f32_0(args(dir_ + "/f32", 8, 12), dir_ + "/f0", env(0));
  testing::Background f32_1(args(dir_ + "/f32", 8, 12), dir_ + "/f1", env(1));
  ASSERT_EQ(f32_0.wait(), 0) << f32_0.err();
  ASSERT_EQ(f32_1.wait(), 0) << f32_1.err();
  const auto a = weights_of(dir_ + "/bf16/final.safetensors");
  const auto b = weights_of(dir_ + "/f32/final.safetensors");
  double largest = 0.0, differs = 0.0;
  for (const auto& [name, values] : b) {
    for (size_t i = 0; i < values.size(); ++i) {
      const double d = std::fabs(double(a.at(name)[i]) - double(values[i]));
      largest = std::max(largest, d);
      differs += d > 0.0 ? 1.0 : 0.0;
    }
  }
  EXPECT_LT(largest, 1e-3);
  EXPECT_GT(differs, 0.0);  // the rounding happened: bf16 went over the sockets
  EXPECT_EQ(display_losses(dir_ + "/bf16/metrics.csv"),
            display_losses(dir_ + "/bf16/rank1/metrics.csv"));
}

TEST_F(TrainRanks, ADistributedKeyThatIsWrongIsOneLineNamingIt) {
  testing::Background bad(args(dir_ + "/bad", 16, 2, {"--set", "+distributed={reduce_dtype: fp8}"}),
                          dir_ + "/bad");
  EXPECT_EQ(bad.wait(), 2);
  EXPECT_CONTAINS(bad.err(), "distributed.reduce_dtype: must be f32 or bf16, got 'fp8'");
  testing::Background size(
      args(dir_ + "/size", 16, 2, {"--set", "+distributed={bucket_cap_mb: 0}"}), dir_ + "/size");
  EXPECT_EQ(size.wait(), 2);
  EXPECT_CONTAINS(size.err(), "distributed.bucket_cap_mb: must be a size in MiB");
}

TEST_F(TrainRanks, ASignalOnOneRankStopsBothAfterTheSameIterationAndResumesOnOneProcess) {
  testing::Background rank0(args(dir_ + "/run", 8, 100000), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/run", 8, 100000), dir_ + "/r1", env(1));
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::read_csv(dir_ + "/run/rank1/metrics.csv").size() >= 5; }, 60))
      << rank1.err();
  rank1.signal(SIGTERM);
  EXPECT_EQ(rank1.wait(), 143) << rank1.err();
  EXPECT_EQ(rank0.wait(), 143) << rank0.err();  // stopped by rank 1's signal
  const std::string out0 = rank0.out();
  ASSERT_NE(out0.find("interrupted after iteration"), std::string::npos) << out0;
  const Checkpoint stopped = read_checkpoint(find_checkpoint(dir_ + "/run"));
  const int64_t n = stopped.state.iteration;
  EXPECT_EQ(stopped.state.batch_size, 16);  // the global batch
  // Both ranks logged the same last iteration.
  EXPECT_EQ(testing::read_csv(dir_ + "/run/metrics.csv").size(),
            testing::read_csv(dir_ + "/run/rank1/metrics.csv").size());

  // One process of batch 16 continues it.
  testing::Background resumed(
      {"train", config_, "--device", "cpu", "--threads", "1", "--resume", dir_ + "/run", "--set",
       "data.train.batch_size=16", "--set", "solver.max_iter=" + std::to_string(n + 3), "--set",
       "solver.display=1", "--set", "solver.test_interval=10"},
      dir_ + "/resumed");
  EXPECT_EQ(resumed.wait(), 0) << resumed.err();
  EXPECT_CONTAINS(resumed.out(), "resumed from");
}

TEST_F(TrainRanks, ARankThatDiesStopsTheOtherNamingIt) {
  testing::Background rank0(args(dir_ + "/run", 8, 100000), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/run", 8, 100000), dir_ + "/r1", env(1));
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::read_csv(dir_ + "/run/metrics.csv").size() >= 3; }, 60))
      << rank0.err();
  rank1.signal(SIGKILL);
  EXPECT_EQ(rank1.wait(), 128 + SIGKILL);
  EXPECT_EQ(rank0.wait(), 2) << rank0.out();
  EXPECT_CONTAINS(rank0.err(), "rank 1 exited");
}

TEST_F(TrainRanks, MismatchedConfigsAreRefusedByBothRanks) {
  testing::Background rank0(args(dir_ + "/run", 8, 5), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/run", 8, 5, {"--set", "solver.base_lr=0.5"}),
                            dir_ + "/r1", env(1));
  EXPECT_EQ(rank0.wait(), 2);
  EXPECT_EQ(rank1.wait(), 2);
  for (const std::string& err : {rank0.err(), rank1.err()}) {
    EXPECT_CONTAINS(err, "crema: error: the config of rank 1 (hash ");
    EXPECT_CONTAINS(err, "differs from rank 0's (hash ");
  }
}

TEST_F(TrainRanks, BadVariablesAndMissingGpusAreOneLine) {
  testing::Background bad(args(dir_ + "/run", 8, 5), dir_ + "/bad",
                          {"RANK=x", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1"});
  EXPECT_EQ(bad.wait(), 2);
  EXPECT_EQ(bad.err(), "crema: error: RANK=x: expected an integer from 0 to 1 (torchrun job)\n");
  testing::Background gpus({"train", config_, "--gpus", "99"}, dir_ + "/gpus");
  EXPECT_EQ(gpus.wait(), 2);
  EXPECT_CONTAINS(gpus.err(), "crema: error: --gpus 99: cuda:99 does not exist");
  testing::Background both({"train", config_, "--gpus", "0", "--device", "cuda:0"}, dir_ + "/both");
  EXPECT_EQ(both.wait(), 2);
  EXPECT_EQ(both.err(), "crema: error: --gpus and --device cannot be combined\n");
}

}  // namespace
}  // namespace crema
