// Config files: `_base_` inheritance (maps merge, lists replace, `_replace_`), the errors of a
// chain of files, and `--set` overrides, on files written under a fresh directory per test.
// (Parsing, values and keys of one text: config_test.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

namespace fs = std::filesystem;
using crema::testing::error_of;

// Config files written under a fresh directory per test.
class ConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "crema_config_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

using ConfigBase = ConfigFiles;

TEST_F(ConfigBase, TwoLevelsMergeMapsAndReplaceLists) {
  write("common/defaults.yaml",
        "seed: 1\n"
        "solver: {type: sgd, base_lr: 0.01, lr_policy: {type: step, gamma: 0.1}}\n"
        "data: {transform: [{scale: 0.5}, {mirror: true}]}\n");
  write("nets/lenet.yaml",
        "_base_: ../common/defaults.yaml\n"
        "name: lenet\n"
        "solver: {momentum: 0.9, lr_policy: {gamma: 0.5}}\n");
  const std::string top = write("nets/lenet_adam.yaml",
                                "_base_: lenet.yaml\n"
                                "solver:\n"
                                "  type: adam\n"
                                "data:\n"
                                "  transform: [{scale: 0.25}]\n");
  const ConfigNode root = load_config(top);
  EXPECT_EQ(root.keys(), (std::vector<std::string>{"seed", "solver", "data", "name"}));
  const ConfigNode& solver = root.at("solver");
  EXPECT_EQ(solver.keys(), (std::vector<std::string>{"type", "base_lr", "lr_policy", "momentum"}));
  EXPECT_EQ(solver.get<std::string>("type"), "adam");
  EXPECT_DOUBLE_EQ(solver.get<double>("base_lr"), 0.01);
  EXPECT_DOUBLE_EQ(solver.get<double>("momentum"), 0.9);
  EXPECT_EQ(solver.at("lr_policy").get<std::string>("type"), "step");
  EXPECT_DOUBLE_EQ(solver.at("lr_policy").get<double>("gamma"), 0.5);
  const ConfigNode& transform = root.at("data").at("transform");
  ASSERT_EQ(transform.size(), 1u);  // lists replace
  EXPECT_EQ(transform[0].get<double>("scale"), 0.25);
  // Each value points at the file that wrote it.
  EXPECT_EQ(solver.at("type").location().str(), top + ":3:9");
  EXPECT_EQ(solver.at("base_lr").location().str(), dir_ + "/common/defaults.yaml:2:30");
  EXPECT_EQ(solver.at("momentum").location().str(), dir_ + "/nets/lenet.yaml:3:20");
  EXPECT_EQ(solver.at("lr_policy").at("gamma").path(), "solver.lr_policy.gamma");
  EXPECT_FALSE(root.has("_base_"));
}

TEST_F(ConfigBase, ListOfBasesMergesInOrder) {
  write("a.yaml", "x: 1\ny: {p: 1, q: 1}\n");
  write("b.yaml", "y: {q: 2, r: 2}\nz: 2\n");
  const ConfigNode root = load_config(write("top.yaml", "_base_: [a.yaml, b.yaml]\nz: 3\n"));
  EXPECT_EQ(root.get<int>("x"), 1);
  EXPECT_EQ(root.at("y").get<int>("p"), 1);
  EXPECT_EQ(root.at("y").get<int>("q"), 2);
  EXPECT_EQ(root.at("y").get<int>("r"), 2);
  EXPECT_EQ(root.get<int>("z"), 3);
}

TEST_F(ConfigBase, ReplaceMarkerTakesAMapWhole) {
  write("sgd.yaml", "solver: {type: sgd, momentum: 0.9, lr_policy: {type: inv, gamma: 0.1}}\n");
  const ConfigNode root = load_config(write("adam.yaml",
                                            "_base_: sgd.yaml\n"
                                            "solver:\n"
                                            "  type: adam\n"
                                            "  lr_policy: {_replace_: true, type: cosine}\n"));
  EXPECT_EQ(root.at("solver").keys(), (std::vector<std::string>{"type", "momentum", "lr_policy"}));
  EXPECT_EQ(root.at("solver").at("lr_policy").keys(), (std::vector<std::string>{"type"}));
  const std::string bad = write("bad.yaml", "solver: {_replace_: maybe, type: adam}\n");
  EXPECT_EQ(error_of([&] { load_config(bad); }),
            bad + ":1:21: solver._replace_: expected true or false, got 'maybe'");
}

// A `_base_` (or the config itself) naming a device, a FIFO, a directory or a huge file is refused
// before it is read: nothing waits for a writer, nothing reads without end.
TEST_F(ConfigBase, NonRegularAndHugeFilesAreRefused) {
  const std::string fifo = dir_ + "/fifo.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string huge = dir_ + "/huge.yaml";
  std::ofstream(huge) << "x: 1\n";
  fs::resize_file(huge, (uint64_t(16) << 20) + 1);  // sparse: no disk space used
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "is a character device, not a regular file"},
      {fifo, "is a FIFO, not a regular file"},
      {dir_, "is a directory, not a regular file"},
      {huge, "is 16777217 bytes, more than the 16777216 crema reads"}};
  for (const auto& [path, reason] : cases) {
    const std::string target = path;  // a lambda may not capture a structured binding (C++17)
    EXPECT_EQ(error_of([&] { load_config(target); }), "config file '" + target + "' " + reason);
    const std::string top = write("top.yaml", "_base_: " + target + "\n");
    EXPECT_EQ(error_of([&] { load_config(top); }),
              top + ":1:9: config file '" + target + "' " + reason);
  }
}

TEST_F(ConfigBase, CycleMissingFileAndBadBaseAreErrors) {
  write("a.yaml", "_base_: b.yaml\nx: 1\n");
  write("b.yaml", "_base_: [c.yaml, a.yaml]\n");
  write("c.yaml", "y: 2\n");
  const std::string a = dir_ + "/a.yaml", b = dir_ + "/b.yaml";
  EXPECT_EQ(error_of([&] { load_config(a); }),
            b + ":1:18: _base_ cycle: " + a + " -> " + b + " -> " + a);
  const std::string missing = write("missing.yaml", "_base_: nowhere.yaml\n");
  EXPECT_EQ(error_of([&] { load_config(missing); }),
            missing + ":1:9: cannot open config file '" + dir_ +
                "/nowhere.yaml' (No such file or directory)");
  EXPECT_EQ(error_of([&] { load_config(dir_ + "/absent.yaml"); }),
            "cannot open config file '" + dir_ + "/absent.yaml' (No such file or directory)");
  const std::string bad = write("bad.yaml", "_base_: {file: a.yaml}\n");
  EXPECT_EQ(error_of([&] { load_config(bad); }),
            bad + ":1:9: _base_: expected a file name or a list of file names, got a map");
  for (const char* text : {"", "  \n\n", "# only a comment\n"}) {
    const std::string empty = write("empty.yaml", text);
    EXPECT_EQ(error_of([&] { load_config(empty); }),
              empty + ": the config is empty (no keys, or only comments); a config holds model, " +
                  "data and solver: configs/README.md");
  }
  const std::string scalar = write("scalar.yaml", "just text\n");
  EXPECT_EQ(error_of([&] { load_config(scalar); }),
            scalar +
                ":1:1: a config file is a map of keys (name, seed, model, data, solver), "
                "got 'just text'");
}

using ConfigPatch = ConfigFiles;

constexpr const char* kBaseNet =
    "model:\n"
    "  layers:\n"
    "    - {name: conv1, type: Convolution, num_output: 20}\n"
    "    - {name: relu1, type: ReLU}\n"
    "    - {name: fc, type: InnerProduct, num_output: 1000, param: {weight: {lr_mult: 1}}}\n"
    "    - {name: accuracy, type: Accuracy, top_k: 5}\n";

std::vector<std::string> layer_names(const ConfigNode& root) {
  std::vector<std::string> names;
  const ConfigNode& layers = root.at("model").at("layers");
  for (size_t i = 0; i < layers.size(); ++i) names.push_back(layers[i].get<std::string>("name"));
  return names;
}

TEST_F(ConfigPatch, PatchesLayersByNameAndAppendsNewOnes) {
  write("net.yaml", kBaseNet);
  const std::string top =
      write("finetune.yaml",
            "_base_: net.yaml\n"
            "model:\n"
            "  patch_layers:\n"
            "    fc: {name: fc_new, num_output: 3, param: {weight: {lr_mult: 10}}}\n"
            "    relu1: {_replace_: true, name: tanh1, type: TanH}\n"
            "    accuracy: {_delete_: true}\n"
            "    conv1: {_delete_: false, num_output: 32}\n"
            "  append_layers:\n"
            "    - {name: loss, type: SoftmaxWithLoss}\n");
  const ConfigNode root = load_config(top, {"model.layers.fc_new.num_output=5"});
  EXPECT_EQ(layer_names(root), (std::vector<std::string>{"conv1", "tanh1", "fc_new", "loss"}));
  EXPECT_EQ(root.at("model").keys(), (std::vector<std::string>{"layers"}));
  const ConfigNode& layers = root.at("model").at("layers");
  EXPECT_EQ(layers[0].keys(), (std::vector<std::string>{"name", "type", "num_output"}));
  EXPECT_EQ(layers[0].get<int>("num_output"), 32);
  EXPECT_EQ(layers[1].keys(), (std::vector<std::string>{"name", "type"}));  // replaced whole
  EXPECT_EQ(layers[2].keys(), (std::vector<std::string>{"name", "type", "num_output", "param"}));
  EXPECT_EQ(layers[2].get<int>("num_output"), 5);  // --set sees the patched layer
  EXPECT_DOUBLE_EQ(layers[2].at("param").at("weight").get<double>("lr_mult"), 10.0);
  // A patched value points into the file that patched it; the rest into the base.
  EXPECT_EQ(layers[2].at("name").location().str(), top + ":4:16");
  EXPECT_EQ(layers[2].at("type").location().str(), dir_ + "/net.yaml:5:24");
  EXPECT_EQ(layers[3].at("type").path(), "model.layers[3].type");

  // A file below edits what its bases made of the layers: the renamed head, by its new name.
  const std::string again = write("again.yaml",
                                  "_base_: finetune.yaml\n"
                                  "model: {patch_layers: {fc_new: {num_output: 7}}}\n");
  EXPECT_EQ(load_config(again).at("model").at("layers")[2].get<int>("num_output"), 7);
  // A file may patch its own layers too (no _base_).
  const std::string own =
      write("own.yaml", std::string(kBaseNet) + "  patch_layers: {conv1: {num_output: 8}}\n");
  EXPECT_EQ(load_config(own).at("model").at("layers")[0].get<int>("num_output"), 8);
}

TEST_F(ConfigPatch, ErrorsNameTheFileLineAndLayer) {
  write("net.yaml", kBaseNet);
  auto error_for = [&](const std::string& model) {
    const std::string path = write("bad.yaml", "_base_: net.yaml\nmodel:\n" + model);
    return error_of([&] { load_config(path); });
  };
  const std::string bad = dir_ + "/bad.yaml";
  EXPECT_EQ(error_for("  patch_layers:\n    fcc: {num_output: 3}\n"),
            bad +
                ":4:5: model.patch_layers: no layer named 'fcc' in model.layers (did you mean "
                "'fc'?)");
  EXPECT_EQ(error_for("  patch_layers: {head: {num_output: 3}}\n"),
            bad + ":3:18: model.patch_layers: no layer named 'head' in model.layers");
  EXPECT_EQ(error_for("  patch_layers: {fc: 3}\n"),
            bad + ":3:22: model.patch_layers: 'fc': expected a map of the keys to change, got '3'");
  EXPECT_EQ(error_for("  patch_layers: [fc]\n"),
            bad +
                ":3:17: model.patch_layers: expected a map from layer names to the keys to "
                "change, got a list");
  EXPECT_EQ(error_for("  patch_layers: {fc: {_delete_: true, num_output: 3}}\n"),
            bad +
                ":3:33: model.patch_layers: 'fc' has _delete_: true beside other keys; a "
                "deleted layer takes no keys");
  EXPECT_EQ(error_for("  append_layers:\n    - {name: relu1, type: ReLU}\n"),
            bad +
                ":4:7: model.append_layers: a layer named 'relu1' is already in model.layers "
                "(change it with model.patch_layers)");
  EXPECT_EQ(error_for("  append_layers: {name: loss}\n"),
            bad + ":3:18: model.append_layers: expected a list of layers, got a map");
  const std::string alone = write("alone.yaml", "model: {patch_layers: {fc: {num_output: 3}}}\n");
  EXPECT_EQ(error_of([&] { load_config(alone); }),
            alone +
                ":1:9: model.patch_layers edits model.layers, which neither this file nor its "
                "_base_ defines");
}

using ConfigOverride = ConfigFiles;

constexpr const char* kRun =
    "name: run\n"
    "solver: {type: sgd, base_lr: 0.01}\n"
    "data: {train: {batch_size: 64, transform: [{scale: 0.5}]}}\n"
    "model:\n"
    "  layers:\n"
    "    - {name: conv1, num_output: 20}\n"
    "    - {name: layer1.0.conv1, num_output: 64}\n"
    "    - {name: ip1, num_output: 500}\n";

TEST_F(ConfigOverride, ReplacesScalarsListsAndMaps) {
  const ConfigNode root =
      load_config(write("run.yaml", kRun),
                  {"solver.base_lr=0.02", "data.train.transform=[{scale: 0.25}, {mirror: true}]",
                   "solver={type: adam, base_lr: 0.001}", "data.train.batch_size=128"});
  EXPECT_EQ(root.at("solver").keys(), (std::vector<std::string>{"type", "base_lr"}));
  EXPECT_EQ(root.at("solver").get<std::string>("type"), "adam");
  const ConfigNode& transform = root.at("data").at("train").at("transform");
  ASSERT_EQ(transform.size(), 2u);
  EXPECT_TRUE(transform[1].get<bool>("mirror"));
  EXPECT_EQ(transform[1].at("mirror").path(), "data.train.transform[1].mirror");
  const ConfigNode& batch = root.at("data").at("train").at("batch_size");
  EXPECT_EQ(batch.as<int>(), 128);
  EXPECT_EQ(batch.location().str(), "--set:1:23");
  EXPECT_EQ(root.at("solver").at("base_lr").location().str(), "--set:1:30");
}

TEST_F(ConfigOverride, AddressesListElementsByNameOrIndex) {
  const ConfigNode root = load_config(
      write("run.yaml", kRun), {"model.layers.conv1.num_output=32", "model.layers.2.num_output=10",
                                "model.layers.layer1.0.conv1.num_output=128"});
  const ConfigNode& layers = root.at("model").at("layers");
  EXPECT_EQ(layers[0].get<int>("num_output"), 32);
  EXPECT_EQ(layers[1].get<int>("num_output"), 128);
  EXPECT_EQ(layers[2].get<int>("num_output"), 10);
  // The value is text until a reader asks for a number.
  EXPECT_NO_THROW(load_config(dir_ + "/run.yaml", {"solver.base_lr=fast"}));
  const ConfigNode fast = load_config(dir_ + "/run.yaml", {"solver.base_lr=fast"});
  EXPECT_EQ(error_of([&] { fast.at("solver").get<float>("base_lr"); }),
            "--set:1:16: solver.base_lr: expected a number, got 'fast'");
}

TEST_F(ConfigOverride, PlusAddsAKey) {
  const std::string run = write("run.yaml", kRun);
  const ConfigNode root = load_config(
      run, {"+solver.max_iter=4", "++solver.base_lr=0.5", "++model.layers.ip1.bias_term=false"});
  EXPECT_EQ(root.at("solver").keys(), (std::vector<std::string>{"type", "base_lr", "max_iter"}));
  EXPECT_EQ(root.at("solver").get<int>("max_iter"), 4);
  EXPECT_EQ(root.at("solver").at("max_iter").path(), "solver.max_iter");
  EXPECT_DOUBLE_EQ(root.at("solver").get<double>("base_lr"), 0.5);
  EXPECT_FALSE(root.at("model").at("layers")[2].get<bool>("bias_term"));
  // An added key that no reader asks for is still reported, at the key in the override.
  const ConfigNode typo = load_config(run, {"+solver.momentun=0.9"});
  typo.at("solver").get<std::string>("type");
  typo.at("solver").get<double>("base_lr");
  typo.at("solver").allow("momentum");
  EXPECT_EQ(error_of([&] { typo.at("solver").check_no_unknown_keys("solver"); }),
            "--set:1:9: unknown key 'momentun' in solver (did you mean 'momentum'?)");
  EXPECT_EQ(error_of([&] { load_config(run, {"+solver.type=adam"}); }),
            "--set +solver.type=adam: 'solver' already has the key 'type': drop the '+' to "
            "replace its value");
  EXPECT_EQ(error_of([&] { load_config(run, {"+name.x=1"}); }),
            "--set +name.x=1: 'name' is 'run', not a map that '+' could add the key 'x' to");
  EXPECT_EQ(error_of([&] { load_config(run, {"+++name=x"}); }),
            "--set +++name=x: expected at most two '+' before the key path");
}

TEST_F(ConfigOverride, ErrorsSayWhatIsWrong) {
  const std::string run = write("run.yaml", kRun);
  auto override_error = [&](const std::string& text) {
    return error_of([&] { load_config(run, {text}); });
  };
  EXPECT_EQ(override_error("solver.base_lrr=0.02"),
            "--set solver.base_lrr=0.02: 'solver' has no key 'base_lrr' (did you mean "
            "'base_lr'?)");
  EXPECT_EQ(override_error("solver.max_iter=4"),
            "--set solver.max_iter=4: 'solver' has no key 'max_iter' (to add it, write --set "
            "+solver.max_iter=4)");
  EXPECT_EQ(override_error("solverr.type=adam"),
            "--set solverr.type=adam: the top level has no key 'solverr' (did you mean "
            "'solver'?)");
  EXPECT_EQ(override_error("model.layers.conv9.num_output=3"),
            "--set model.layers.conv9.num_output=3: 'model.layers' has no element named "
            "'conv9' (did you mean 'conv1'?) (names: conv1, layer1.0.conv1, ip1)");
  EXPECT_EQ(override_error("model.layers.3.num_output=3"),
            "--set model.layers.3.num_output=3: 'model.layers' has 3 elements; index 3 is out "
            "of range");
  EXPECT_EQ(override_error("name.first=x"),
            "--set name.first=x: 'name' is 'run', it has no key 'first'");
  EXPECT_EQ(override_error("solver.base_lr"),
            "--set solver.base_lr: expected key=value, with a dotted key path "
            "(solver.base_lr=0.01, model.layers.conv1.num_output=32)");
  EXPECT_EQ(override_error("=3"), "--set =3: the key path before '=' is empty");
  EXPECT_EQ(override_error("solver..type=adam"),
            "--set solver..type=adam: the key path 'solver..type' has an empty part");
  EXPECT_EQ(override_error("solver.=adam"),
            "--set solver.=adam: the key path 'solver.' has an empty part");
  EXPECT_EQ(override_error("solver.type=[adam"),
            "--set solver.type=[adam: the value is not valid YAML: --set:1:13: end of sequence "
            "flow not found");
}

}  // namespace
}  // namespace crema
