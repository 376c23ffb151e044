// `crema train --resume / --weights` with bad input, through the binary: one line on stderr, exit
// code 2, and the run directory exactly as it was (every file's bytes, every link).
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

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("train_cli_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 60, 5);
    run_ = dir_ + "/run";
    CommandOptions o;
    o.config = config_;
    o.out_dir = run_;
    o.threads = 1;
    o.overrides = {"solver.max_iter=20", "solver.display=2", "solver.test_interval=0"};
    o.stop_after = 6;
    std::ostringstream log;
    train_command(o, log);
    checkpoint_ = run_ + "/checkpoints/iter_000006";
    ASSERT_TRUE(fs::exists(checkpoint_ + "/state.json"));
  }
  std::string variant(const std::string& from, const std::string& to) const {
    return testing::write_variant(dir_, testing::synthetic_config(dir_), from, to);
  }
  // Runs `crema ARGS`; expects exit code 2, one line "crema: error: ...NEEDLE..." and the run
  // directory untouched.
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
  }
  std::string dir_, config_, run_, checkpoint_;
};

TEST_F(TrainCli, ResumeWithAnotherModel) {
  expect_refused("train " + variant("num_output: 8", "num_output: 6") + " --resume " + run_,
                 "iter_000006: it holds a different model (conv1.weight is [8, 1, 3, 3] there but "
                 "[6, 1, 3, 3] here, conv1.bias is [8] there but [6] here");
  expect_refused("train " + variant("num_output: 8", "num_output: 6") + " --resume " + run_,
                 "to start a new run from its weights, use --weights ");
  // Same parameters, another architecture (max pooling became average pooling).
  expect_refused("train " +
                     variant("kernel_size: 2, stride: 2", "kernel_size: 2, stride: 2, pool: ave") +
                     " --resume " + run_,
                 "it was trained with a different model (model line");
}

TEST_F(TrainCli, ResumeWithAnotherSeedOrSolver) {
  expect_refused("train " + config_ + " --resume " + run_ + " --seed 99",
                 "it was trained with seed 3");
  expect_refused("train " + config_ + " --resume " + run_ + " --set solver.type=adam",
                 "its solver is SGD but solver.type is now Adam");
}

TEST_F(TrainCli, ResumeOfAFinishedRun) {
  expect_refused("train " + config_ + " --resume " + run_ + " --set solver.max_iter=6",
                 "it has already run 6 iterations and solver.max_iter is 6");
}

TEST_F(TrainCli, ResumeOfNothing) {
  expect_refused("train " + config_ + " --resume " + dir_ + "/nowhere",
                 "neither a checkpoint (a directory with state.json) nor a run directory");
}

TEST_F(TrainCli, TruncatedModelFile) {
  const std::string file = checkpoint_ + "/model.safetensors";
  const std::string bytes = testing::read_file(file);
  testing::write_text(file, bytes.substr(0, bytes.size() - 10));
  expect_refused("train " + config_ + " --resume " + run_,
                 "model.safetensors is truncated: tensor 'ip1.bias'");
}

TEST_F(TrainCli, HeaderLongerThanTheFile) {
  const std::string file = checkpoint_ + "/solver.safetensors";
  std::string bytes = testing::read_file(file);
  bytes[5] = char(0x01);
  testing::write_text(file, bytes);
  expect_refused("train " + config_ + " --resume " + run_, "the header length");
}

TEST_F(TrainCli, CorruptHeaderAndCorruptState) {
  const std::string file = checkpoint_ + "/model.safetensors";
  const std::string good = testing::read_file(file);
  std::string bytes = good;
  bytes[8] = '#';  // the header's opening brace
  testing::write_text(file, bytes);
  expect_refused("train " + config_ + " --resume " + checkpoint_,
                 "corrupt safetensors header (not JSON");
  testing::write_text(file, good);
  testing::write_text(checkpoint_ + "/state.json", "{\"format\": 1, \"iteration\": 6}");
  expect_refused("train " + config_ + " --resume " + checkpoint_,
                 "state.json: not a complete checkpoint state");
}

TEST_F(TrainCli, TensorOfTheWrongDtypeOrMissing) {
  const std::string file = checkpoint_ + "/model.safetensors";
  NamedTensors tensors = load_safetensors(file);
  Tensor wide(tensors[0].second.shape(), DType::f64);
  for (int64_t i = 0; i < wide.numel(); ++i) {
    wide.data<double>()[i] = tensors[0].second.data<float>()[i];
  }
  NamedTensors f64 = tensors;
  f64[0].second = wide;
  save_safetensors(file, f64);
  expect_refused("train " + config_ + " --resume " + run_, "tensor 'conv1.weight' is f64");
  NamedTensors fewer(tensors.begin() + 1, tensors.end());
  save_safetensors(file, fewer);
  expect_refused("train " + config_ + " --resume " + run_, "it lacks conv1.weight");
  NamedTensors solver = load_safetensors(checkpoint_ + "/solver.safetensors");
  save_safetensors(file, tensors);
  save_safetensors(checkpoint_ + "/solver.safetensors",
                   NamedTensors(solver.begin() + 1, solver.end()));
  expect_refused("train " + config_ + " --resume " + run_,
                 "solver.safetensors does not fit the SGD solver: it lacks");
}

TEST_F(TrainCli, WeightsAndResumeTogether) {
  expect_refused(
      "train " + config_ + " --resume " + run_ + " --weights " + run_ + "/final.safetensors",
      "excludes");
}

TEST_F(TrainCli, FineTuneShapeMismatchNamesLayerShapesAndRenaming) {
  const std::string out = dir_ + "/tuned";
  expect_refused(
      "train " + variant("num_output: 10}", "num_output: 12}") + " --weights " + checkpoint_ +
          "/model.safetensors --out " + out,
      "tensor 'ip1.weight' is [10, 128] but layer 'ip1' expects [12, 128] (rename the layer");
  EXPECT_FALSE(fs::exists(out)) << "a refused run created its directory";
  expect_refused("train " + config_ + " --weights " + dir_ + "/none.safetensors --out " + out,
                 "none.safetensors");
}

TEST_F(TrainCli, FineTuneCopiesByNameAndListsTheRest) {
  // ip1 renamed: conv1 comes from the file, `classifier` keeps its filler, ip1.* go unused.
  const std::string renamed =
      variant("{name: ip1, type: InnerProduct, bottom: pool1, top: ip1,",
              "{name: classifier, type: InnerProduct, bottom: pool1, top: ip1,");
  CommandOptions o;
  o.config = renamed;
  o.out_dir = dir_ + "/tuned";
  o.weights = checkpoint_ + "/model.safetensors";
  o.threads = 1;
  o.overrides = {"solver.max_iter=1", "solver.test_interval=0", "solver.base_lr=1e-30"};
  std::ostringstream log;
  train_command(o, log);
  EXPECT_NE(log.str().find("copied 2 tensors; not in the file, so they keep their fillers: "
                           "classifier.weight, classifier.bias; in the file but not in this model "
                           "(ignored): ip1.bias, ip1.weight"),
            std::string::npos)
      << log.str();
  const NamedTensors source = load_safetensors(checkpoint_ + "/model.safetensors");
  const NamedTensors tuned = load_safetensors(o.out_dir + "/final.safetensors");
  // A step at a learning rate of 1e-30 leaves the copied weights as they were.
  EXPECT_EQ(tuned[0].first, "conv1.weight");
  EXPECT_EQ(source[0].first, "conv1.weight");
  EXPECT_EQ(tuned[0].second.to_vector(), source[0].second.to_vector());
  EXPECT_NE(testing::read_file(o.out_dir + "/train.log").find("keep their fillers"),
            std::string::npos);
}

}  // namespace
}  // namespace crema
