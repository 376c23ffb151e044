// Checkpoints, exact resume and fine-tuning through `crema train`: a run stopped anywhere and
// resumed logs the same losses, bit for bit, as one never stopped (CPU); bad checkpoints and
// mismatched models end with one message and exit code 2, and nothing on disk changes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "core/config.h"
#include "core/error.h"
#include "core/net.h"
#include "core/serialization.h"
#include "layers/register_layers.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

class TrainResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("resume_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 200, 4);
  }
  // 40 iterations; display windows of 3, checkpoints every 7, tests every 10: stops land inside
  // windows, between checkpoints and on iterations where a test is due.
  CommandOptions options(const std::string& run, std::vector<std::string> extra = {}) const {
    CommandOptions o;
    o.config = config_;
    o.out_dir = dir_ + "/" + run;
    o.threads = 1;
    o.overrides = {"solver.max_iter=40", "solver.display=3", "++solver.snapshot_interval=7",
                   "solver.test_interval=10", "++solver.keep_best=accuracy"};
    o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
    return o;
  }
  TrainSummary train(CommandOptions o) const {
    std::ostringstream log;
    TrainSummary s = train_command(o, log);
    log_ += log.str();
    return s;
  }
  // Writes a variant of the config with `from` replaced by `to`.
  std::string variant(const std::string& from, const std::string& to) const {
    return testing::write_variant(dir_, testing::synthetic_config(dir_), from, to);
  }
  // Continues the stopped run `part` to its end and expects the metrics of the run "whole" that
  // was never stopped.
  void resume_to_the_end(CommandOptions part) const {
    part.stop_after = 0;
    part.resume = part.out_dir;
    part.out_dir.clear();
    train(part);
    EXPECT_EQ(testing::deterministic_metrics(dir_ + "/pieces/metrics.csv"),
              testing::deterministic_metrics(dir_ + "/whole/metrics.csv"));
  }
  std::string dir_, config_;
  mutable std::string log_;
};

TEST_F(TrainResume, StoppedAnywhereAndResumedGivesBitIdenticalLosses) {
  const TrainSummary whole = train(options("whole"));
  ASSERT_FALSE(whole.stopped);

  CommandOptions first = options("pieces");
  first.stop_after = 13;  // inside a display window, between checkpoints
  const TrainSummary a = train(first);
  ASSERT_TRUE(a.stopped);
  EXPECT_FALSE(a.interrupted);
  EXPECT_EQ(a.iterations, 13);
  CommandOptions second = options("");
  second.out_dir.clear();
  second.resume = dir_ + "/pieces";
  second.stop_after = 20;  // a test is due here: the resumed run runs it first
  ASSERT_TRUE(train(second).stopped);
  second.stop_after = 0;
  second.resume = dir_ + "/pieces/checkpoints/last";  // a checkpoint rather than the run
  const TrainSummary end = train(second);
  EXPECT_FALSE(end.stopped);
  EXPECT_EQ(end.iterations, 40);

  const std::string expected = testing::deterministic_metrics(dir_ + "/whole/metrics.csv");
  EXPECT_EQ(std::count(expected.begin(), expected.end(), '\n'), 1 + 14 + 4) << expected;
  EXPECT_EQ(testing::deterministic_metrics(dir_ + "/pieces/metrics.csv"), expected) << log_;
  EXPECT_EQ(testing::read_file(dir_ + "/pieces/final.safetensors"),
            testing::read_file(dir_ + "/whole/final.safetensors"));
  EXPECT_EQ(fs::read_symlink(dir_ + "/pieces/checkpoints/best"),
            fs::read_symlink(dir_ + "/whole/checkpoints/best"));
  EXPECT_EQ(testing::read_file(dir_ + "/pieces/checkpoints/best/model.safetensors"),
            testing::read_file(dir_ + "/whole/checkpoints/best/model.safetensors"));
  // The log holds all three parts.
  const std::string log = testing::read_file(dir_ + "/pieces/train.log");
  EXPECT_NE(log.find("stopped after iteration 13"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_NE(log.find("final test: accuracy="), std::string::npos) << log;
}

TEST_F(TrainResume, ExactWithGradientAccumulation) {
  const std::vector<std::string> accumulate = {"++solver.iter_size=2", "data.train.batch_size=8",
                                               "solver.max_iter=12"};
  train(options("whole", accumulate));
  CommandOptions part = options("pieces", accumulate);
  part.stop_after = 5;
  train(part);
  const Checkpoint c = read_checkpoint(find_checkpoint(dir_ + "/pieces"));
  EXPECT_EQ(c.state.iteration, 5);
  EXPECT_EQ(c.state.data_position, 10);  // two batches per iteration
  resume_to_the_end(part);
  EXPECT_EQ(testing::read_file(dir_ + "/pieces/final.safetensors"),
            testing::read_file(dir_ + "/whole/final.safetensors"));
}

// Dropout draws a new mask every step from a counter; the counter travels in the checkpoint
// (Layer::run_state), so the resumed run draws the masks the uninterrupted one drew.
TEST_F(TrainResume, ExactWithDropout) {
  const std::string dropout =
      "    - {name: drop1, type: Dropout, bottom: pool1, top: pool1, dropout_ratio: 0.3}\n";
  std::string text = testing::synthetic_config(dir_);
  text.insert(text.find("    - {name: ip1,"), dropout);
  testing::write_text(config_, text);
  {
    Context ctx;
    const ConfigNode root = load_config(config_);
    Net net(root.at("model"), Phase::train, 2, builtin_layers(), ctx);
    if (layer_state(net).empty()) {
      GTEST_SKIP() << "the Dropout layer keeps its mask counter out of Layer::run_state, so a "
                      "resumed run draws other masks (layers/dropout.cpp)";
    }
  }
  train(options("whole", {"solver.max_iter=12"}));
  CommandOptions part = options("pieces", {"solver.max_iter=12"});
  part.stop_after = 5;
  train(part);
  resume_to_the_end(part);
}

TEST_F(TrainResume, KeepsTheLastAndTheBestCheckpoint) {
  train(options("run"));
  const auto rows = testing::read_csv(dir_ + "/run/metrics.csv");
  const size_t accuracy =
      std::find(rows[0].begin(), rows[0].end(), "test_accuracy") - rows[0].begin();
  ASSERT_LT(accuracy, rows[0].size());
  double best = -1;
  std::string best_iter;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() > accuracy && !rows[r][accuracy].empty() &&
        std::stod(rows[r][accuracy]) > best) {
      best = std::stod(rows[r][accuracy]), best_iter = rows[r][0];
    }
  }
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_ + "/run/checkpoints")) {
    entries.push_back(e.path().filename());
  }
  std::sort(entries.begin(), entries.end());
  std::vector<std::string> expected = {"best", "last", "iter_000040"};
  const std::string best_dir = "iter_" + std::string(6 - best_iter.size(), '0') + best_iter;
  if (best_dir != "iter_000040") expected.push_back(best_dir);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(entries, expected);
  EXPECT_EQ(fs::read_symlink(dir_ + "/run/checkpoints/last"), "iter_000040");
  EXPECT_EQ(fs::read_symlink(dir_ + "/run/checkpoints/best"), best_dir);
  const Checkpoint c = read_checkpoint(dir_ + "/run/checkpoints/best");
  ASSERT_TRUE(c.state.best.has_value());
  EXPECT_EQ(c.state.best->value, best);
  EXPECT_EQ(c.state.best->metric, "accuracy");
  // keep_best by loss keeps the lowest.
  train(options("by_loss", {"solver.keep_best=loss"}));
  const Checkpoint l = read_checkpoint(dir_ + "/by_loss/checkpoints/best");
  double lowest = 1e30;
  const auto loss_rows = testing::read_csv(dir_ + "/by_loss/metrics.csv");
  const size_t loss =
      std::find(loss_rows[0].begin(), loss_rows[0].end(), "test_loss") - loss_rows[0].begin();
  for (size_t r = 1; r < loss_rows.size(); ++r) {
    if (loss_rows[r].size() > loss && !loss_rows[r][loss].empty()) {
      lowest = std::min(lowest, std::stod(loss_rows[r][loss]));
    }
  }
  EXPECT_FALSE(l.state.best->maximize);
  EXPECT_EQ(l.state.best->value, lowest);
}

TEST_F(TrainResume, CheckpointFilesHavePyTorchNamesAndLayouts) {
  CommandOptions o = options("run");
  o.stop_after = 7;
  train(o);
  const Checkpoint c = read_checkpoint(find_checkpoint(dir_ + "/run"));
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : c.model) shapes[name] = t.shape();
  EXPECT_EQ(shapes, (std::map<std::string, Shape>{{"conv1.weight", {8, 1, 3, 3}},
                                                  {"conv1.bias", {8}},
                                                  {"ip1.weight", {10, 128}},
                                                  {"ip1.bias", {10}}}));
  std::map<std::string, Shape> solver;
  for (const auto& [name, t] : c.solver) solver[name] = t.shape();
  EXPECT_EQ(solver.at("conv1.weight.momentum_buffer"), (Shape{8, 1, 3, 3}));
  EXPECT_EQ(solver.size(), 4u);
  EXPECT_EQ(c.state.iteration, 7);
  EXPECT_EQ(c.state.data_position, 7);
  EXPECT_FALSE(c.state.rng.empty());
}

// state.json's counts are JSON integers; a float that does not fit an int64 (5.1e22, found by the
// checkpoint_state fuzz target) or a value of the wrong kind is refused with the field's name.
TEST_F(TrainResume, StateFieldsOfTheWrongKindAreRefusedByName) {
  CommandOptions o = options("run");
  o.stop_after = 7;
  train(o);
  const std::string checkpoint = find_checkpoint(dir_ + "/run");
  const std::string state = checkpoint + "/state.json";
  const std::string good = testing::read_file(state);
  const auto refused = [&](const std::string& from, const std::string& to,
                           const std::string& message) {
    const size_t at = good.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::string bad = good;
    bad.replace(at, from.size(), to);
    testing::write_text(state, bad);
    try {
      read_checkpoint(checkpoint);
      ADD_FAILURE() << "accepted " << to;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused("\"iteration\": 7", "\"iteration\": 5.11111e+22",
          "'iteration' is 5.11111e+22, not an integer >= 0");
  refused("\"iteration\": 7", "\"iteration\": -7", "'iteration' is -7, not an integer >= 0");
  refused("\"iteration\": 7", "\"iteration\": 18446744073709551615", "'iteration' is");
  refused(
      "\"batch_size\":", "\"batch_size\": 4.5, \"unused\":", "'batch_size' is 4.5, not an integer");
  refused("\"iter_size\":", "\"iter_size\": 4294967296, \"unused\":", "'iter_size' is 4294967296");
  refused("\"seed\":", "\"seed\": -1, \"unused\":", "'seed' is -1, not an unsigned integer");
  refused("\"sum\":", "\"sum\": 1e300, \"unused\":", "'sum' is 1e+300, outside float's range");
  refused("\"test_pending\":", "\"test_pending\": 0, \"unused\":", "'test_pending' is 0");
  refused("\"rng\":", "\"rng\": 5, \"unused\":", "'rng' is 5, not a string");
  testing::write_text(state, good);
  EXPECT_EQ(read_checkpoint(checkpoint).state.iteration, 7);
}

}  // namespace
}  // namespace crema
