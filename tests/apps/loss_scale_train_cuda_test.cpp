// Loss scaling on a GPU with the CUDA-graph step: the scale is a constant of the captured pass,
// so each change of it captures the graph again. A power-of-two scale that grows every 4 steps
// trains bit for bit as no scale (fp32); an fp16 run whose iteration 8 overflows (the test hook
// CREMA_TEST_INF_GRAD_AT) skips it and ends with the weights of the run that stopped after 7; on
// two GPUs the ranks decide alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <utility>
#include <vector>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "core/cuda_runtime.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

// A graph run of `config` for `max_iter` iterations into dir/run_name.
CommandOptions graph_run(const std::string& config, const std::string& dir,
                         const std::string& run_name, int64_t max_iter) {
  CommandOptions o;
  o.config = config;
  o.device = "cuda:0";
  o.out_dir = dir + "/" + run_name;
  o.overrides = {"solver.max_iter=" + std::to_string(max_iter), "solver.display=1",
                 "solver.test_interval=0", "++solver.cuda_graph=true"};
  return o;
}

TEST(TrainLossScaleCuda, AGrowingScaleWithTheGraphTrainsAsNone) {
  CREMA_REQUIRE_CUDA();
  const std::string dir = testing::fresh_dir("loss_scale_cuda_growth");
  const std::string plain = testing::write_synthetic_run(dir, 200, 4);
  const std::string scaled =
      testing::write_variant(dir, testing::read_file(plain), "  display: 50\n",
                             "  display: 50\n  loss_scale: {init: 1024, growth_interval: 4}\n");
  std::ostringstream log;
  train_command(graph_run(plain, dir, "plain", 20), log);
  const TrainSummary s = train_command(graph_run(scaled, dir, "scaled", 20), log);
  EXPECT_FALSE(s.diverged) << log.str();
  EXPECT_CONTAINS(log.str(), "loss scale 32768 at the end");
  EXPECT_EQ(testing::read_file(dir + "/scaled/final.safetensors"),
            testing::read_file(dir + "/plain/final.safetensors"))
      << log.str();
}

TEST(TrainLossScaleCuda, Fp16SkipsAForcedOverflowWithTheGraph) {
  CREMA_REQUIRE_CUDA();
  const std::string dir = testing::fresh_dir("loss_scale_cuda_fp16");
  const std::string fp16 =
      testing::write_variant(dir, testing::read_file(testing::write_synthetic_run(dir, 200, 4)),
                             "model:\n", "model:\n  precision: fp16\n");
  std::ostringstream log;
  train_command(graph_run(fp16, dir, "before", 7), log);
  const testing::ScopedEnv overflow("CREMA_TEST_INF_GRAD_AT", "8");
  const TrainSummary s = train_command(graph_run(fp16, dir, "skipped", 8), log);
  EXPECT_EQ(s.overflows, 1) << log.str();
  EXPECT_CONTAINS(log.str(),
                  "iteration 8: gradients overflowed at loss scale 65536; step skipped, scale "
                  "now 32768");
  EXPECT_EQ(testing::read_file(dir + "/skipped/final.safetensors"),
            testing::read_file(dir + "/before/final.safetensors"));
  const Checkpoint c = read_checkpoint(find_checkpoint(dir + "/skipped"));
  ASSERT_TRUE(c.state.loss_scale.has_value());
  EXPECT_EQ(c.state.loss_scale->scale, 32768.0f);
}

// Two GPUs (scripts/ddp_device_check.sh; skipped with fewer): the gradients are unscaled after
// their average over the ranks, so every rank decides alike. A growing power-of-two scale trains
// as none, and a forced overflow in iteration 8 (on every rank) is skipped by both, which then
// go on in step to the end.
TEST(TrainLossScaleCuda, TwoGpusScaleAsNoneAndSkipTogether) {
  CREMA_REQUIRE_CUDA();
  if (gpu::device_count() < 2) GTEST_SKIP() << "fewer than 2 GPUs here";
  const std::string dir = testing::fresh_dir("loss_scale_cuda_ddp");
  const std::string plain = testing::write_synthetic_run(dir, 400, 8);
  const std::string scaled =
      testing::write_variant(dir, testing::read_file(plain), "  display: 50\n",
                             "  display: 50\n  loss_scale: {init: 1024, growth_interval: 4}\n");
  auto args = [&](const std::string& config, const std::string& out) {
    return std::vector<std::string>{"train",     config,
                                    "--out",     dir + "/" + out,
                                    "--gpus",    "0,1",
                                    "--timeout", "30",
                                    "--set",     "data.train.batch_size=8",
                                    "--set",     "solver.max_iter=20",
                                    "--set",     "solver.display=1",
                                    "--set",     "solver.test_interval=0"};
  };
  for (const auto& [config, run] : {std::pair{plain, "plain"}, std::pair{scaled, "scaled"}}) {
    testing::Background two(args(config, run), dir + "/" + run);
    ASSERT_EQ(two.wait(), 0) << two.err();
  }
  EXPECT_EQ(testing::read_file(dir + "/scaled/final.safetensors"),
            testing::read_file(dir + "/plain/final.safetensors"));
  testing::Background overflow(args(scaled, "overflow"), dir + "/overflow",
                               {"CREMA_TEST_INF_GRAD_AT=8"});
  ASSERT_EQ(overflow.wait(), 0) << overflow.err();
  EXPECT_CONTAINS(testing::read_file(dir + "/overflow/train.log"),
                  "iteration 8: gradients overflowed at loss scale 2048");
}

}  // namespace
}  // namespace crema
