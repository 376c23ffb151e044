// Data parallelism over NCCL on two GPUs (skipped where fewer are present; NCCL is loaded from
// CREMA_NCCL_LIBRARY or LD_LIBRARY_PATH, scripts/ddp_device_check.sh sets them):
//   - `crema train --gpus 0,1` at batch 8 per GPU trains as one GPU at batch 16 (the mean over
//     16 samples against the mean of two means over 8, and each GPU's kernels on half the batch:
//     float32 rounding only, within 1e-3 after 30 steps);
//   - two such runs give bit-identical weights, and the CUDA-graph step the eager step's;
//   - sockets only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): the same weights as NVLink's (two
//     ranks add two numbers, which is exact in either order);
//   - SIGKILL of one rank: the other exits with 5 within the timeout, naming it;
//   - SyncBatchNorm (sync: true) at batch 8 per GPU trains as BatchNorm on one GPU at batch 16,
//     its statistics all-reduced over NCCL (eager and captured in the step's CUDA graph), and
//     both ranks display the global batch's loss;
//   - distributed.reduce_dtype: bf16 (ncclBfloat16) trains as the f32 all-reduce within bf16's
//     rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "apps/distributed/launcher.h"
#include "core/serialization.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

class DataParallelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::device_count() < 2) GTEST_SKIP() << "fewer than 2 GPUs here";
    dir_ = testing::fresh_dir("ddp_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 400, 8);
  }
  std::vector<std::string> args(const std::string& out, int64_t batch, int64_t iterations) const {
    return {"train",     config_,
            "--out",     out,
            "--timeout", "30",
            "--set",     "data.train.batch_size=" + std::to_string(batch),
            "--set",     "solver.max_iter=" + std::to_string(iterations),
            "--set",     "solver.display=1",
            "--set",     "solver.test_interval=10"};
  }
  std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> extra) const {
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::string dir_, config_;
};

std::map<std::string, std::vector<float>> weights_of(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : load_safetensors(path)) out[name] = t.to_vector();
  return out;
}

double largest_difference(const std::string& a, const std::string& b) {
  const auto x = weights_of(a), y = weights_of(b);
  EXPECT_EQ(x.size(), y.size());
  double largest = 0.0;
  for (const auto& [name, values] : x) {
    for (size_t i = 0; i < values.size(); ++i) {
      largest = std::max(largest, std::fabs(double(values[i]) - double(y.at(name)[i])));
    }
  }
  return largest;
}

TEST_F(DataParallelCuda, TwoGpusTrainAsOneOfTheGlobalBatchAndRepeatBitForBit) {
  for (const std::string run : {"a", "b"}) {
    testing::Background two(with(args(dir_ + "/" + run, 8, 30), {"--gpus", "0,1"}),
                            dir_ + "/" + run);
    ASSERT_EQ(two.wait(), 0) << two.err();
  }
  testing::Background one(with(args(dir_ + "/one", 16, 30), {"--device", "cuda:0"}), dir_ + "/one");
  ASSERT_EQ(one.wait(), 0) << one.err();
  EXPECT_EQ(testing::read_file(dir_ + "/a/final.safetensors"),
            testing::read_file(dir_ + "/b/final.safetensors"));
  EXPECT_LT(largest_difference(dir_ + "/a/final.safetensors", dir_ + "/one/final.safetensors"),
            1e-3);
}

// The step replayed as a CUDA graph (NCCL's all-reduces and the buckets' events captured with
// forward and backward) computes what the step launched one call at a time does.
TEST_F(DataParallelCuda, TheGraphStepEqualsTheEagerStep) {
  testing::Background graph(with(args(dir_ + "/graph", 8, 20), {"--gpus", "0,1"}), dir_ + "/graph");
  ASSERT_EQ(graph.wait(), 0) << graph.err();
  testing::Background eager(
      with(args(dir_ + "/eager", 8, 20), {"--gpus", "0,1", "--set", "++solver.cuda_graph=false"}),
      dir_ + "/eager");
  ASSERT_EQ(eager.wait(), 0) << eager.err();
  EXPECT_EQ(testing::read_file(dir_ + "/graph/final.safetensors"),
            testing::read_file(dir_ + "/eager/final.safetensors"));
}

TEST_F(DataParallelCuda, SocketsOnlyGivesTheSameWeights) {
  testing::Background normal(with(args(dir_ + "/nvlink", 8, 20), {"--gpus", "0,1"}),
                             dir_ + "/nvlink");
  ASSERT_EQ(normal.wait(), 0) << normal.err();
  testing::Background sockets(with(args(dir_ + "/sockets", 8, 20), {"--gpus", "0,1"}),
                              dir_ + "/sockets", {"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"});
  ASSERT_EQ(sockets.wait(), 0) << sockets.err();
  EXPECT_EQ(
      largest_difference(dir_ + "/nvlink/final.safetensors", dir_ + "/sockets/final.safetensors"),
      0.0);
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

TEST_F(DataParallelCuda, SyncBatchNormOnTwoGpusIsBatchNormOnOneAtTheGlobalBatch) {
  config_ = testing::write_variant(
      dir_, testing::read_file(config_), "    - {name: relu1,",
      "    - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1, sync: true}\n"
      "    - {name: relu1,");
  for (const std::string graph : {"true", "false"}) {
    SCOPED_TRACE("cuda_graph " + graph);
    const std::string two = dir_ + "/two_" + graph, one = dir_ + "/one_" + graph;
    const std::vector<std::string> set = {"--set", "++solver.cuda_graph=" + graph};
    testing::Background ranks(with(args(two, 8, 30), with({"--gpus", "0,1"}, set)), two);
    ASSERT_EQ(ranks.wait(), 0) << ranks.err();
    testing::Background single(with(args(one, 16, 30), with({"--device", "cuda:0"}, set)), one);
    ASSERT_EQ(single.wait(), 0) << single.err();
    EXPECT_LT(largest_difference(two + "/final.safetensors", one + "/final.safetensors"), 1e-3);
    const std::vector<double> loss0 = display_losses(two + "/metrics.csv");
    EXPECT_EQ(loss0.size(), 30u);
    EXPECT_EQ(loss0, display_losses(two + "/rank1/metrics.csv"));
  }
}

// The bf16 all-reduce rounds every averaged gradient to 8 significant bits. No bound on the
// distance between the two runs' weights follows from that alone (the ranks' gradients, which the
// rounding is relative to, are not visible here, and 30 steps compound the differences: 0.0103
// measured on two H200s, 2026-11-26), so the test asks what it can: the bf16 exchange happened
// (the weights differ from the f32 run's) and trained (the loss falls as the f32 run's does).
TEST_F(DataParallelCuda, ABf16AllReduceRoundsTheGradientsAndTrains) {
  testing::Background f32(with(args(dir_ + "/f32", 8, 30), {"--gpus", "0,1"}), dir_ + "/f32");
  ASSERT_EQ(f32.wait(), 0) << f32.err();
  testing::Background bf16(
      with(args(dir_ + "/bf16", 8, 30),
           {"--gpus", "0,1", "--set", "+distributed={reduce_dtype: bf16, first_bucket_mb: 0.001}"}),
      dir_ + "/bf16");
  ASSERT_EQ(bf16.wait(), 0) << bf16.err();
  EXPECT_GT(largest_difference(dir_ + "/f32/final.safetensors", dir_ + "/bf16/final.safetensors"),
            0.0);
  const std::vector<double> a = display_losses(dir_ + "/f32/metrics.csv"),
                            b = display_losses(dir_ + "/bf16/metrics.csv");
  ASSERT_GE(a.size(), 2u);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(a.back(), a.front());
  EXPECT_LT(b.back(), b.front());
}

TEST_F(DataParallelCuda, AKilledRankStopsTheOtherWithinTheTimeoutNamingIt) {
  const std::string port = std::to_string(distributed::free_port());
  auto env = [&](int rank) {
    return std::vector<std::string>{"RANK=" + std::to_string(rank), "WORLD_SIZE=2",
                                    "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + port};
  };
  testing::Background rank0(args(dir_ + "/run", 8, 1000000), dir_ + "/r0", env(0));
  testing::Background rank1(args(dir_ + "/run", 8, 1000000), dir_ + "/r1", env(1));
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::read_csv(dir_ + "/run/metrics.csv").size() >= 50; }, 120))
      << rank0.err();
  const auto killed = std::chrono::steady_clock::now();
  rank1.signal(SIGKILL);
  EXPECT_EQ(rank0.wait(), 5) << rank0.err();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(), 30);
  EXPECT_CONTAINS(rank0.err(), "crema: error: rank 0: rank 1 exited (lost its connection)");
}

}  // namespace
}  // namespace crema
