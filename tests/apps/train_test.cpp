#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "apps/commands.h"
#include "apps/data_commands.h"
#include "core/config.h"
#include "core/error.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

// A short run on a learnable synthetic set: the loss falls, accuracy is far above chance (0.1),
// the run directory holds the resolved config and the weights, and `crema test` reproduces the
// final test numbers from those weights.
TEST(TrainCommand, LossFallsAndWeightsReload) {
  const std::string dir = testing::fresh_dir("train");
  CommandOptions options;
  options.config = testing::write_synthetic_run(dir, 600, 1);
  options.out_dir = dir + "/run";
  options.threads = 2;
  std::ostringstream log;
  const TrainSummary s = train_command(options, log);
  EXPECT_EQ(s.iterations, 300);
  EXPECT_LT(s.last_loss, 0.5 * s.first_loss) << log.str();
  ASSERT_EQ(s.final_test.size(), 2u) << log.str();
  EXPECT_EQ(s.final_test[0].first, "accuracy");
  EXPECT_GT(s.final_test[0].second, 0.8) << log.str();
  EXPECT_NE(log.str().find("final test: accuracy="), std::string::npos) << log.str();
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/final.safetensors"));
  // On the CPU the step's wait for data is the host's call into the loader (next() and a move):
  // the loader's own wait, and hardly more. The display lines and the last line report it.
  EXPECT_GE(s.data_wait_share, s.loader_wait_share);
  EXPECT_LT(s.data_wait_share, s.loader_wait_share + 0.02);
  EXPECT_NE(log.str().find("% of the time; weights in"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("  data wait "), std::string::npos) << log.str();

  // The saved config is complete: it loads and says the same thing.
  const ConfigNode saved = load_config(dir + "/run/config.yaml");
  EXPECT_EQ(saved.at("solver").get<double>("base_lr"), 0.05);

  options.weights = dir + "/run/final.safetensors";
  std::ostringstream test_log;
  const auto results = test_command(options, test_log);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NEAR(results[0].second, s.final_test[0].second, 1e-9);
  EXPECT_NEAR(results[1].second, s.final_test[1].second, 1e-6);
}

TEST(TrainCommand, SameSeedSameLosses) {
  const std::string dir = testing::fresh_dir("seed");
  CommandOptions options;
  options.config = testing::write_synthetic_run(dir, 200, 2);
  options.overrides = {"solver.max_iter=30", "solver.display=10"};
  options.out_dir = dir + "/run";
  std::ostringstream a, b, c;
  const TrainSummary sa = train_command(options, a);
  const TrainSummary sb = train_command(options, b);
  EXPECT_EQ(sa.last_loss, sb.last_loss);
  options.seed = 12345;
  const TrainSummary sc = train_command(options, c);
  EXPECT_NE(sa.last_loss, sc.last_loss);
}

// Configs that read image folders written by `crema export-images` (the PNG copy of
// Fashion-MNIST, the 300 footwear images) get small folders of the same kind made here: for
// each such source, the first 10 images of each class it needs, and an override of its root.
std::vector<std::string> image_folder_overrides(const std::string& config) {
  const std::string idx = "/usr/share/datasets/fashion-mnist/";
  std::vector<std::string> overrides;
  const ConfigNode root = load_config(config);
  for (const std::string split : {"train", "test"}) {
    if (!root.at("data").has(split)) continue;
    const ConfigNode& source = root.at("data").at(split).at("source");
    if (source.get<std::string>("format") != "image_folder") continue;
    const std::string folder = source.get<std::string>("root");
    ExportImagesOptions options;
    const bool test_images = folder.size() >= 5 && folder.substr(folder.size() - 5) == "/test";
    options.images = idx + (test_images ? "t10k" : "train") + "-images-idx3-ubyte.gz";
    options.labels = idx + (test_images ? "t10k" : "train") + "-labels-idx1-ubyte.gz";
    if (folder.find("footwear") != std::string::npos) options.classes = {5, 7, 9};
    options.per_class = 10;
    options.out_dir = testing::fresh_dir("images_" + split) + "/" + split;
    std::ostringstream log;
    export_images_command(options, log);
    overrides.push_back("data." + split + ".source.root=" + options.out_dir);
  }
  return overrides;
}

// Every config shipped in configs/ builds and trains a few steps (on the real data when present).
TEST(Configs, EveryConfigRunsAFewSteps) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(CREMA_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    CommandOptions options;
    options.config = entry.path().string();
    SCOPED_TRACE(options.config);
    options.overrides = image_folder_overrides(options.config);
    for (const char* o : {"++solver.max_iter=4", "solver.display=2", "solver.test_interval=0"}) {
      options.overrides.push_back(o);
    }
    options.out_dir = testing::fresh_dir("config_" + entry.path().stem().string());
    std::ostringstream log;
    const TrainSummary s = train_command(options, log);
    EXPECT_EQ(s.iterations, 4) << log.str();
    EXPECT_FALSE(s.final_test.empty()) << log.str();
  }
  EXPECT_GT(count, 0);
}

}  // namespace
}  // namespace crema
