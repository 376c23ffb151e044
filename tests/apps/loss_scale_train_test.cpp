// Loss scaling through `crema train` (optim/loss_scale.h, apps/training/loop.cpp), on the CPU in
// fp32, where scaling by a power of two is exact: a scaled run trains bit for bit as an unscaled
// one (the scale reaches every gradient and is divided out again); an overflow forced into one
// step's gradients (the test hook CREMA_TEST_INF_GRAD_AT) is skipped, logged and not trained on
// (weights and solver state bit-identical to the run that stopped before it) and backs the scale
// off; a run stopped and resumed continues with the saved scale and step count, bit for bit;
// gradient accumulation and clipping see the unscaled gradients; a loss that is not finite is
// divergence (solver.on_nonfinite), not an overflow.
// Checkpoints and --weights files stored in bf16 or f16 load into the f32 parameters with one
// line saying so.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "core/float16.h"
#include "core/serialization.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

class TrainLossScale : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("loss_scale_" + testing::test_name());
    plain_ = testing::write_synthetic_run(dir_, 200, 5);
  }
  // The synthetic config with `solver.loss_scale: <scale>`.
  std::string scaled(const std::string& scale) const {
    return testing::write_variant(dir_, testing::read_file(plain_), "  display: 50\n",
                                  "  display: 50\n  loss_scale: " + scale + "\n");
  }
  // The synthetic config with model.precision: fp16 (on the CPU its layers fall back to f32
  // where they have no f16 path; the loss scaler is on by default all the same).
  std::string fp16() const {
    return testing::write_variant(dir_, testing::read_file(plain_), "model:\n",
                                  "model:\n  precision: fp16\n");
  }
  CommandOptions options(const std::string& config, const std::string& run, int64_t max_iter,
                         std::vector<std::string> extra = {}) const {
    CommandOptions o;
    o.config = config;
    o.out_dir = dir_ + "/" + run;
    o.threads = 1;
    o.overrides = {"solver.max_iter=" + std::to_string(max_iter), "solver.display=1",
                   "solver.test_interval=0", "++solver.snapshot_interval=5"};
    o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
    return o;
  }
  TrainSummary train(const CommandOptions& o) {
    std::ostringstream log;
    TrainSummary s = train_command(o, log);
    log_ += log.str();
    return s;
  }
  std::string file(const std::string& path) const { return testing::read_file(dir_ + "/" + path); }
  LossScaleState saved_scale(const std::string& run) const {
    const Checkpoint c = read_checkpoint(find_checkpoint(dir_ + "/" + run));
    EXPECT_TRUE(c.state.loss_scale.has_value()) << c.dir;
    return c.state.loss_scale.value_or(LossScaleState{});
  }
  std::string dir_, plain_, log_;
};

// Scaling by 1024, growing x 2 every 4 steps (to 32768 after 20), changes no bit of the run.
TEST_F(TrainLossScale, APowerOfTwoScaleTrainsBitForBitAsNone) {
  train(options(plain_, "plain", 20));
  train(options(scaled("{init: 1024, growth_interval: 4}"), "scaled", 20));
  EXPECT_EQ(file("scaled/final.safetensors"), file("plain/final.safetensors")) << log_;
  EXPECT_EQ(testing::deterministic_metrics(dir_ + "/scaled/metrics.csv"),
            testing::deterministic_metrics(dir_ + "/plain/metrics.csv"));
  EXPECT_CONTAINS(log_,
                  "loss scaling: scale 1024, x 2 after 4 finite steps in a row, x 0.5 at an "
                  "overflow (solver.loss_scale)");
  EXPECT_CONTAINS(log_, "loss scale 32768 at the end; 0 step(s) skipped for overflowed gradients");
  const LossScaleState s = saved_scale("scaled");
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_EQ(s.skipped, 0);
  EXPECT_FALSE(read_checkpoint(find_checkpoint(dir_ + "/plain")).state.loss_scale.has_value());
}

// With two passes per step and clipping by a norm the gradients exceed: the scale is divided out
// before the solver averages and clips, so clipping sees the true gradients.
TEST_F(TrainLossScale, AccumulationAndClippingSeeUnscaledGradients) {
  const std::vector<std::string> extra = {"++solver.iter_size=2", "++solver.clip_gradients=0.05",
                                          "data.train.batch_size=8"};
  train(options(plain_, "plain", 12, extra));
  train(options(scaled("{init: 4096, growth_interval: 5}"), "scaled", 12, extra));
  EXPECT_EQ(file("scaled/final.safetensors"), file("plain/final.safetensors")) << log_;
}

// fp16 turns GradScaler's defaults on; solver.loss_scale: false turns them off.
TEST_F(TrainLossScale, Fp16ScalesByDefault) {
  const std::string config = fp16();
  train(options(config, "default", 2));
  EXPECT_CONTAINS(log_,
                  "loss scaling: scale 65536, x 2 after 2000 finite steps in a row, x 0.5 at an "
                  "overflow (solver.loss_scale)");
  EXPECT_EQ(saved_scale("default").scale, 65536.0f);
  log_.clear();
  train(options(config, "off", 2, {"++solver.loss_scale=false"}));
  EXPECT_EQ(log_.find("loss scal"), std::string::npos) << log_;
}

// Iteration 8's gradients overflow in an fp16 run: the step is skipped and logged, the scale
// halves, and the weights and momentum are those of a run that stopped after iteration 7, bit
// for bit.
TEST_F(TrainLossScale, AForcedOverflowIsSkippedLoggedAndNotTrainedOn) {
  const std::string config = fp16();
  train(options(config, "before", 7));
  const testing::ScopedEnv overflow("CREMA_TEST_INF_GRAD_AT", "8");
  const TrainSummary s = train(options(config, "skipped", 8));
  EXPECT_FALSE(s.diverged);
  EXPECT_EQ(s.iterations, 8);
  EXPECT_EQ(s.overflows, 1);
  EXPECT_CONTAINS(log_,
                  "iteration 8: gradients overflowed at loss scale 65536; step skipped, scale "
                  "now 32768");
  EXPECT_CONTAINS(log_, "1 step(s) skipped for overflowed gradients");
  EXPECT_EQ(file("skipped/final.safetensors"), file("before/final.safetensors"));
  EXPECT_EQ(file("skipped/checkpoints/last/solver.safetensors"),
            file("before/checkpoints/last/solver.safetensors"));
  const LossScaleState saved = saved_scale("skipped");
  EXPECT_EQ(saved.scale, 32768.0f);
  EXPECT_EQ(saved.skipped, 1);
  // The skipped iteration's loss (finite: only the gradients overflowed) is still displayed.
  EXPECT_CONTAINS(file("skipped/metrics.csv"), "\n8,");
}

// A NaN batch makes the loss itself not finite: that is divergence, solver.on_nonfinite's, and
// leaves the scale alone (skip); with stop the run ends at the display line, exit code 3.
TEST_F(TrainLossScale, ANonFiniteLossIsDivergenceNotOverflow) {
  const std::string config = scaled("{init: 65536}");
  const testing::ScopedEnv nan("CREMA_TEST_NAN_AT", "8");
  const TrainSummary skipped = train(options(config, "skip", 10, {"++solver.on_nonfinite=skip"}));
  EXPECT_EQ(skipped.skipped_steps, 1);
  EXPECT_EQ(skipped.overflows, 0);
  EXPECT_CONTAINS(log_, "skipped: the loss or a gradient is not finite at iteration 8");
  EXPECT_EQ(log_.find("gradients overflowed at"), std::string::npos) << log_;
  EXPECT_EQ(saved_scale("skip").scale, 65536.0f);
  const TrainSummary stopped = train(options(config, "stop", 10));
  EXPECT_TRUE(stopped.diverged);
  EXPECT_CONTAINS(log_, "stopped: the loss is not finite at iteration 8");
}

// Adam (its step t counts applied updates) with an overflow at 5 and growth every 3 steps: stopped
// after 10 and resumed, the run ends as the uninterrupted one, bit for bit.
TEST_F(TrainLossScale, ResumeContinuesWithTheSavedScale) {
  const std::string config = scaled("{init: 65536, growth_interval: 3}");
  const std::vector<std::string> adam = {"solver.type=adam", "solver.base_lr=0.001"};
  const testing::ScopedEnv overflow("CREMA_TEST_INF_GRAD_AT", "5");
  train(options(config, "whole", 20, adam));
  CommandOptions part = options(config, "pieces", 20, adam);
  part.stop_after = 10;
  ASSERT_TRUE(train(part).stopped);
  // 1, 2, 3 finite: 131072; 5 overflowed: 65536; 6, 7, 8 finite: 131072; 9, 10: two good steps.
  const LossScaleState at10 = saved_scale("pieces");
  EXPECT_EQ(at10.scale, 131072.0f);
  EXPECT_EQ(at10.good_steps, 2);
  EXPECT_EQ(at10.skipped, 1);
  part.stop_after = 0;
  part.resume = part.out_dir;
  part.out_dir.clear();
  train(part);
  EXPECT_EQ(file("pieces/final.safetensors"), file("whole/final.safetensors")) << log_;
  EXPECT_EQ(testing::deterministic_metrics(dir_ + "/pieces/metrics.csv"),
            testing::deterministic_metrics(dir_ + "/whole/metrics.csv"));
}

// Every tensor of a safetensors file rewritten in `dtype` (bf16 or f16).
void store_in_half(const std::string& path, DType dtype) {
  std::vector<std::pair<std::string, Tensor>> half;
  for (const auto& [name, t] : load_safetensors(path)) {
    Tensor h(t.shape(), dtype);
    const std::vector<float> v = t.to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::bf16) {
        h.data<bf16_t>()[i] = to_bf16(v[i]);
      } else {
        h.data<f16_t>()[i] = to_f16(v[i]);
      }
    }
    half.emplace_back(name, std::move(h));
  }
  save_safetensors(path, half);
}

TEST_F(TrainLossScale, HalfPrecisionCheckpointsAndWeightsLoadIntoF32AndSaySo) {
  CommandOptions part = options(plain_, "run", 10);
  part.stop_after = 5;
  train(part);
  store_in_half(dir_ + "/run/checkpoints/last/model.safetensors", DType::bf16);
  part.stop_after = 0;
  part.resume = part.out_dir;
  part.out_dir.clear();
  EXPECT_EQ(train(part).iterations, 10);
  EXPECT_CONTAINS(log_, "at iteration 5 (model.safetensors: converted 4 bf16 tensors to f32)");

  const std::string weights = dir_ + "/half.safetensors";
  std::filesystem::copy_file(dir_ + "/run/final.safetensors", weights);
  store_in_half(weights, DType::f16);
  CommandOptions tuned = options(plain_, "tuned", 2);
  tuned.weights = weights;
  train(tuned);
  EXPECT_CONTAINS(
      log_, "weights from " + weights + ": copied 4 tensors (converted 4 f16 tensors to f32)");
}

}  // namespace
}  // namespace crema
