// The `crema` command as a user meets it: bad input ends with exactly one line on stderr that
// names the problem and the place, and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/cuda_runtime.h"
#include "data/image.h"
#include "tests/apps/app_test_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string err;
};

Outcome run(const std::string& args) {
  const std::string err_path =
      ::testing::TempDir() + "/crema_cli_" + testing::test_name() + "_stderr.txt";
  const std::string command = std::string(CREMA_BINARY_DIR) + "/bin/crema " + args + " > /dev/null 2> " + err_path;
  const int status = std::system(command.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  o.err = text.str();
  return o;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("cli_" + testing::test_name());
    testing::write_synthetic_idx(dir_, 40, 1);
    good_ = testing::synthetic_config(dir_);
  }
  // Writes the good config with `from` replaced by `to` and returns its path.
  std::string variant(const std::string& from, const std::string& to) {
    return testing::write_variant(dir_, good_, from, to);
  }
  void expect_error(const std::string& args, const std::string& needle) {
    const Outcome o = run(args);
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << "stderr: " << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not one line: " << o.err;
    EXPECT_EQ(o.err.rfind("crema: error: ", 0), 0u) << o.err;
  }
  std::string dir_, good_;
};

TEST_F(Cli, MalformedYamlNamesLineAndColumn) {
  const std::string path = variant("  momentum: 0.9", "  momentum: [0.9");
  expect_error("train " + path, path + ":");
}

TEST_F(Cli, UnknownLayerTypeListsKnownTypes) {
  expect_error("train " + variant("type: Pooling", "type: Pool"), "unknown layer type 'Pool' (did you mean 'Pooling'?)");
  expect_error("train " + variant("type: Pooling", "type: Pool"), "known types: Accuracy, ");
  expect_error("train " + variant("type: Pooling", "type: Pool"), ", Convolution, ");
}

TEST_F(Cli, UnknownKeySuggestsTheClosest) {
  expect_error("train " + variant("kernel_size: 2, stride: 2", "kernel_size: 2, stirde: 2"),
               "unknown key 'stirde' in layer 'pool1' (did you mean 'stride'?)");
}

TEST_F(Cli, BottomNotProduced) {
  expect_error("train " + variant("bottom: pool1", "bottom: pool9"),
               "bottom 'pool9' is not produced by any earlier layer");
}

TEST_F(Cli, KernelLargerThanInput) {
  expect_error("train " + variant("kernel_size: 3, pad: 1", "kernel_size: 11, pad: 1"), "conv1");
}

TEST_F(Cli, MissingDataFile) {
  expect_error("train " + variant(dir_ + "/images.gz", dir_ + "/nothing.gz"), "nothing.gz");
}

TEST_F(Cli, WrongMagicAndTruncatedIdx) {
  testing::write_text(dir_ + "/bad_magic", std::string("\x00\x00\x08\x07\x00\x00\x00\x01", 8));
  expect_error("train " + variant(dir_ + "/images.gz", dir_ + "/bad_magic"), "bad_magic");
  testing::write_text(dir_ + "/short", std::string("\x00\x00\x08\x03\x00\x00\x00\x28\x00\x00\x00\x08\x00\x00\x00\x08\x01\x02", 18));
  expect_error("train " + variant(dir_ + "/images.gz", dir_ + "/short"), "short");
}

TEST_F(Cli, OverrideOfAMissingKey) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  expect_error("train " + path + " --set solver.base_lrr=0.1", "did you mean 'base_lr'");
}

TEST_F(Cli, NonNumericValue) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  expect_error("train " + path + " --set solver.base_lr=fast", "expected a number, got 'fast'");
}

// --workspace-limit is model.workspace_limit; a size that is none is an error naming the key, as
// the layer's own workspace_limit key is.
TEST_F(Cli, WorkspaceLimitFlagAndKey) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  expect_error("time " + path + " --workspace-limit 12XB", "model.workspace_limit");
  expect_error("time " + path + " --workspace-limit 12XB", "got '12XB'");
  expect_error("train " + variant("kernel_size: 3, pad: 1", "kernel_size: 3, pad: 1, workspace_limit: lots"),
               "workspace_limit: expected a size");
}

TEST_F(Cli, UnknownDevice) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  expect_error("train " + path + " --device tpu:0", "unknown device 'tpu:0'");
}

TEST_F(Cli, MissingGpu) {
  if (gpu::device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const std::string path = variant("name: synthetic", "name: synthetic");
  expect_error("train " + path + " --device cuda:0", gpu::built_with_cuda() ? "cuda:0 is not available"
                                                                             : "no CUDA backend");
}

TEST_F(Cli, WeightsOfAnotherShape) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  const Outcome trained = run("train " + path + " --set solver.max_iter=2 --out " + dir_ + "/run");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string wide = variant("num_output: 10}", "num_output: 12}");
  expect_error("test " + wide + " --weights " + dir_ + "/run/final.safetensors", "layer 'ip1' expects [12, 128]");
}

// crema predict through the binary: positional images after the config, exit 2 for a bad image
// (naming it) and for a head the labels file does not fit.
TEST_F(Cli, PredictNamesABadImage) {
  const std::string path = variant("name: synthetic", "name: synthetic");
  const Outcome trained = run("train " + path + " --set solver.max_iter=2 --out " + dir_ + "/run");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  data::Image image;
  image.reset({1, 8, 8});
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = float(i * 3);
  data::write_image_file(dir_ + "/good.png", image, data::ImageFormat::png);
  testing::write_text(dir_ + "/bad.jpg", "not a jpeg");
  const std::string predict = "predict " + path + " --weights " + dir_ + "/run/final.safetensors ";
  EXPECT_EQ(run(predict + dir_ + "/good.png --top-k 3 --json").exit_code, 0);
  expect_error(predict + dir_ + "/good.png " + dir_ + "/bad.jpg", dir_ + "/bad.jpg");
  testing::write_text(dir_ + "/names.txt", "a\nb\n");
  expect_error(predict + dir_ + "/good.png --labels " + dir_ + "/names.txt",
               "names.txt names 2 classes but the net scores 10");
}

TEST_F(Cli, MissingConfigFile) { expect_error("train " + dir_ + "/none.yaml", "none.yaml"); }

TEST_F(Cli, BadFlag) { expect_error("train x.yaml --frobnicate", "frobnicate"); }

}  // namespace
}  // namespace crema
