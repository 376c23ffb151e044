// `--weights` given a PyTorch checkpoint or something that is not weights, through the binary:
// each malicious or broken .pth of tests/fixtures/pth/ exits with 2 and one line naming the
// problem, runs nothing, and leaves the run directory as it was (or creates none). Also
// torchvision's num_batches_tracked, an int64 scalar [], in train and test, and a file without it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "core/serialization.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

const std::string kPth = std::string(CREMA_SOURCE_DIR) + "/tests/fixtures/pth/";
const std::string kTouched = "/tmp/crema_pth_os_system_ran";  // what os_system.pth would create

class PthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("pth_cli_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 60, 5);
    run_ = dir_ + "/run";
  }
  // Trains `config` for `iterations` into `out` in this process.
  void train(const std::string& config, const std::string& out, int iterations,
             const std::string& weights = "") {
    CommandOptions o;
    o.config = config;
    o.out_dir = out;
    o.weights = weights;
    o.threads = 1;
    o.overrides = {"solver.max_iter=20", "solver.test_interval=0"};
    o.stop_after = iterations;
    std::ostringstream log;
    train_command(o, log);
  }
  std::vector<std::pair<std::string, double>> test(const std::string& config,
                                                   const std::string& weights) {
    CommandOptions o;
    o.config = config;
    o.weights = weights;
    o.threads = 1;
    std::ostringstream out;
    return test_command(o, out);
  }
  // Runs `crema ARGS`; expects exit code 2, one line "crema: error: ...NEEDLE...", the run
  // directory untouched and no directory at dir_/never.
  void expect_refused(const std::string& args, const std::string& needle) {
    const auto before = testing::tree_picture(run_);
    const std::string err_path = dir_ + "/stderr.txt";
    const int status = std::system(
        (std::string(CREMA_BINARY_DIR) + "/bin/crema " + args + " > /dev/null 2> " + err_path)
            .c_str());
    const std::string err = testing::read_file(err_path);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args << "\n" << err;
    EXPECT_EQ(err.rfind("crema: error: ", 0), 0u) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
    EXPECT_NE(err.find(needle), std::string::npos) << err;
    EXPECT_TRUE(testing::tree_picture(run_) == before) << "the run directory changed: " << args;
    EXPECT_FALSE(fs::exists(dir_ + "/never")) << args;
  }
  std::string dir_, config_, run_;
};

TEST_F(PthCli, EachBadFileExitsTwoInOneLineRunsNothingAndLeavesRunsAlone) {
  train(config_, run_, 2);
  fs::remove(kTouched);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"os_system", "the global 'os.system'"},
      {"builtins_eval", "the global 'builtins.eval'"},
      {"unknown_global", "the global '__main__.Evil'"},
      {"unknown_storage", "the global 'torch.ByteStorage'"},
      {"storage_short", "has more elements than its storage's 4"},
      {"offset_past_end", "reaches past its storage of 4 elements"},
      {"negative_stride", "negative sizes and strides are refused"},
      {"duplicate_key", "the key 'w' appears twice"},
      {"no_stop", "ends without STOP"},
      {"huge_numel", "its storage claims 1099511627776 f32 elements"},
      {"missing_storage", "its storage 'archive/data/7' is missing"},
      {"truncated", "cannot be read"},
      {"legacy", "re-save it with torch >= 1.6"},
  };
  for (const auto& [file, needle] : cases) {
    const std::string weights = " --weights " + kPth + file + ".pth";
    expect_refused("train " + config_ + weights + " --out " + run_, needle);  // an existing run
    expect_refused("train " + config_ + weights + " --out " + dir_ + "/never", needle);  // none
    expect_refused("test " + config_ + weights, needle);
  }
  EXPECT_FALSE(fs::exists(kTouched)) << "os_system.pth ran";
}

TEST_F(PthCli, ARunDirectoryOrAForeignFileSaysWhatToPass) {
  train(config_, run_, 2);
  expect_refused("train " + config_ + " --weights " + run_ + " --out " + dir_ + "/never",
                 "is a directory, not a weights file: pass " + run_ +
                     "/checkpoints/last/model.safetensors (its latest weights), or use --resume " +
                     run_ + " to continue that run");
  expect_refused("test " + config_ + " --weights " + config_,
                 "is not a weights file crema reads: it starts with \"name: synthetic\\x0a\"");
}

// The BatchNorm variant's checkpoint rewritten the way torchvision saves it: num_batches_tracked
// an int64 scalar [] (safetensors written byte by byte, as torch's safetensors writer does).
void write_with_scalar_tracked(const std::string& path, const NamedTensors& tensors) {
  std::string header = "{", data;
  for (const auto& [name, t] : tensors) {
    const bool tracked = name == "bn1.num_batches_tracked";
    std::string shape;
    for (int64_t d : t.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const size_t begin = data.size();
    if (tracked) {
      const int64_t count = int64_t(t.to_vector()[0]);
      data.append(reinterpret_cast<const char*>(&count), 8);
    } else {
      data.append(static_cast<const char*>(t.raw()), t.nbytes());
    }
    header += (header.size() > 1 ? "," : "") + ("\"" + name + "\":{\"dtype\":\"") +
              (tracked ? "I64" : "F32") + "\",\"shape\":[" + (tracked ? "" : shape) +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) +
              "]}";
  }
  header += "}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  testing::write_text(path, file + header + data);
}

TEST_F(PthCli, NumBatchesTrackedAsAScalarOrMissingLoadsInTrainAndTest) {
  const std::string bn = testing::write_variant(
      dir_, testing::synthetic_config(dir_), "    - {name: relu1",
      "    - {name: bn1, type: BatchNorm, bottom: conv1, top: conv1}\n    - {name: relu1");
  train(bn, run_, 3);
  const NamedTensors saved = load_safetensors(run_ + "/checkpoints/last/model.safetensors");
  const std::string scalar = dir_ + "/scalar.safetensors";
  write_with_scalar_tracked(scalar, saved);
  NamedTensors without;
  for (const auto& entry : saved) {
    if (entry.first != "bn1.num_batches_tracked") without.push_back(entry);
  }
  const std::string missing = dir_ + "/missing.safetensors";
  save_safetensors(missing, without);

  const auto reference = test(bn, run_ + "/checkpoints/last/model.safetensors");
  EXPECT_EQ(test(bn, scalar), reference);
  EXPECT_EQ(test(bn, missing), reference);  // the count is not used at test time
  train(bn, dir_ + "/from_scalar", 1, scalar);
  const NamedTensors tuned =
      load_safetensors(dir_ + "/from_scalar/checkpoints/last/model.safetensors");
  for (const auto& [name, t] : tuned) {
    if (name == "bn1.num_batches_tracked") {
      EXPECT_EQ(t.to_vector(), std::vector<float>({4.0f}));  // 3 loaded, 1 more step
    }
  }
  train(bn, dir_ + "/from_missing", 1, missing);
}

}  // namespace
}  // namespace crema
