// `crema train` with data.train.batch_mix: the label input of [K] classes takes mixed soft targets
// in training and one-hot targets in the test pass, the net learns, `crema test` reproduces the
// numbers; a batch_mix the net cannot take, or a bad value, is an error at its key.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "apps/commands.h"
#include "core/error.h"
#include "tests/apps/batch_mix_run.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

using testing::error_of;
using testing::mixing_run;

TEST(BatchMixTraining, LearnsWithMixupAndCutmixAndTestReproduces) {
  const std::string dir = testing::fresh_dir("batch_mix_train");
  CommandOptions options;
  options.config = mixing_run(
      dir, "[10]", "{mixup_alpha: 0.2, cutmix_alpha: 1.0, switch_prob: 0.5, label_smoothing: 0.1}");
  options.out_dir = dir + "/run";
  options.threads = 2;
  std::ostringstream log;
  const TrainSummary s = train_command(options, log);
  EXPECT_EQ(s.iterations, 300);
  EXPECT_LT(s.last_loss, s.first_loss) << log.str();
  ASSERT_EQ(s.final_test.size(), 2u) << log.str();
  EXPECT_EQ(s.final_test[0].first, "accuracy");
  // Chance is 0.1; the plain run reaches 0.8 (train_test.cpp), mixing slows it down a little.
  EXPECT_GT(s.final_test[0].second, 0.6) << log.str();

  options.weights = dir + "/run/final.safetensors";
  std::ostringstream test_log;
  const auto results = test_command(options, test_log);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NEAR(results[0].second, s.final_test[0].second, 1e-9);
  EXPECT_NEAR(results[1].second, s.final_test[1].second, 1e-6);
}

TEST(BatchMixTraining, ErrorsNameTheKey) {
  const std::string dir = testing::fresh_dir("batch_mix_errors");
  auto message = [&](const std::string& label, const std::string& batch_mix) {
    CommandOptions options;
    options.config = mixing_run(dir, label, batch_mix);
    options.out_dir = dir + "/run";
    std::ostringstream log;
    return error_of([&] { train_command(options, log); });
  };
  // Line 7 of the config holds batch_mix (below data.train.batch_size).
  const std::string labels_needed = message("[]", "{mixup_alpha: 0.2}");
  EXPECT_CONTAINS(labels_needed, "net.yaml:7:");
  EXPECT_CONTAINS(labels_needed, "set model.inputs.label to [K] for K classes");
  EXPECT_CONTAINS(message("[10]", "{mixup_alpha: -1}"), "batch_mix.mixup_alpha is -1");
  EXPECT_CONTAINS(message("[10]", "{mixup_alpha: 0.2, prob: 3}"), "batch_mix.prob is 3");
  EXPECT_CONTAINS(message("[10]", "{mixup_alfa: 0.2}"), "unknown key 'mixup_alfa'");
  EXPECT_CONTAINS(message("[10]", "{cutmix_alpha: 0}"), "batch_mix mixes nothing");
  // The loss's scores must be as wide as the targets.
  EXPECT_CONTAINS(message("[12]", "{mixup_alpha: 0.2}"), "layer 'loss'");
  // Only training batches are mixed.
  CommandOptions on_test;
  on_test.config = mixing_run(dir, "[10]", "{mixup_alpha: 0.2}");
  on_test.out_dir = dir + "/run_test_mix";
  on_test.overrides = {"++data.test.batch_mix={mixup_alpha: 0.2}"};
  std::ostringstream log;
  EXPECT_CONTAINS(error_of([&] { train_command(on_test, log); }),
                  "batch_mix mixes training batches only; data.test is evaluated");
}

}  // namespace
}  // namespace crema
