#include "core/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

// The message of the crema::Error that `body` throws.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Same kinds, scalars, keys (in order) and elements, through the public interface.
void expect_same_tree(const ConfigNode& a, const ConfigNode& b) {
  ASSERT_EQ(a.kind(), b.kind()) << a.path();
  if (a.is_scalar()) {
    EXPECT_EQ(a.scalar(), b.scalar()) << a.path();
  }
  if (a.is_sequence()) {
    ASSERT_EQ(a.size(), b.size()) << a.path();
    for (size_t i = 0; i < a.size(); ++i) expect_same_tree(a[i], b[i]);
  }
  if (a.is_map()) {
    ASSERT_EQ(a.keys(), b.keys()) << a.path();
    for (const std::string& key : a.keys()) expect_same_tree(a.at(key), b.at(key));
  }
}

constexpr const char* kLayers =
    "name: lenet\n"
    "model:\n"
    "  layers:\n"
    "    - {name: conv1, type: Convolution, bottom: data}\n"
    "    - name: pool1\n"
    "      stride: 2\n"
    "      bottom: [conv1, extra]\n";

TEST(ConfigParse, LocationsArePerNodeAndOneBased) {
  const ConfigNode root = parse_config(kLayers, "x.yaml");
  const ConfigNode& layers = root.at("model").at("layers");
  ASSERT_EQ(layers.size(), 2u);
  const ConfigNode& stride = layers[1].at("stride");
  EXPECT_EQ(stride.location().str(), "x.yaml:6:15");
  EXPECT_EQ(stride.path(), "model.layers[1].stride");
  EXPECT_EQ(layers[0].at("type").location().str(), "x.yaml:4:27");
  EXPECT_EQ(layers[0].at("type").path(), "model.layers[0].type");
  EXPECT_EQ(root.path(), "");
  EXPECT_EQ(root.keys(), (std::vector<std::string>{"name", "model"}));
  EXPECT_EQ(layers[1].keys(), (std::vector<std::string>{"name", "stride", "bottom"}));
}

TEST(ConfigParse, MalformedYamlPointsAtFileLineColumn) {
  const std::string message = error_of([] { parse_config("a: 1\n b: 2\n", "bad.yaml"); });
  EXPECT_EQ(message.rfind("bad.yaml:2:3: ", 0), 0u) << message;
  EXPECT_GT(message.size(), std::string("bad.yaml:2:3: ").size());
}

TEST(ConfigParse, DuplicateKeyIsAnError) {
  EXPECT_EQ(error_of([] { parse_config("solver:\n  lr: 1\n  lr: 2\n", "d.yaml"); }),
            "d.yaml:3:3: duplicate key 'lr' (first set at line 2, column 3)");
}

TEST(ConfigParse, OneDocumentAndStringKeysOnly) {
  EXPECT_EQ(error_of([] { parse_config("a: 1\n---\nb: 2\n", "m.yaml"); }),
            "m.yaml:2:1: a config holds one YAML document; remove this second one (after '---')");
  EXPECT_EQ(error_of([] { parse_config("? [1]\n: 2\n", "k.yaml"); }),
            "k.yaml:1:3: a key must be a string, got a list");
}

TEST(ConfigParse, NullsEmptyAndQuotedValues) {
  const ConfigNode root = parse_config("a:\nb: ~\nc: 'null'\nd: ''\ne: []\n", "n.yaml");
  EXPECT_TRUE(root.at("a").is_null());
  EXPECT_EQ(root.at("a").location().str(), "n.yaml:1:1");  // the key, not the next line
  EXPECT_TRUE(root.at("b").is_null());
  EXPECT_EQ(root.at("c").as<std::string>(), "null");
  EXPECT_EQ(root.at("d").as<std::string>(), "");
  EXPECT_EQ(root.at("e").size(), 0u);
  EXPECT_TRUE(parse_config("", "empty.yaml").is_null());
}

TEST(ConfigParse, AnchorsAliasesAndMergeKeys) {
  const ConfigNode root = parse_config(
      "conv: &conv {type: Convolution, kernel_size: 3, filler: {type: xavier}}\n"
      "layers:\n"
      "  - {<<: *conv, name: c1, kernel_size: 5}\n"
      "  - {name: c2, <<: [*conv]}\n"
      "  - {name: c3, filler: *conv}\n",
      "a.yaml");
  const ConfigNode& layers = root.at("layers");
  EXPECT_EQ(layers[0].keys(), (std::vector<std::string>{"type", "filler", "name", "kernel_size"}));
  EXPECT_EQ(layers[0].get<int>("kernel_size"), 5);  // written in the map: wins over `<<`
  EXPECT_EQ(layers[1].keys(), (std::vector<std::string>{"name", "type", "kernel_size", "filler"}));
  EXPECT_EQ(layers[1].get<int>("kernel_size"), 3);
  EXPECT_EQ(layers[1].at("filler").at("type").path(), "layers[1].filler.type");
  EXPECT_EQ(layers[1].at("filler").at("type").location().str(), "a.yaml:1:64");  // where written
  EXPECT_EQ(layers[2].at("filler").get<std::string>("type"), "Convolution");
  EXPECT_EQ(error_of([] { parse_config("a: {<<: 3}\n", "m.yaml"); }),
            "m.yaml:1:9: '<<' merges a map or a list of maps into this map, got '3'");
}

// "Billion laughs" (found by tests/fuzz/config_fuzz.cpp): nine levels of ten aliases would copy
// 10^9 nodes out of 600 bytes; the parser stops past 2^20 nodes (here in a5, 10^6 x's) instead of
// exhausting memory. A long scalar counts a node per 64 characters, so aliases of one stop too.
TEST(ConfigParse, AliasesThatExpandPastTheBoundAreRefused) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 9; ++level) {
    const std::string alias = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", " : "") + alias;
    text += "]\n";
  }
  EXPECT_EQ(error_of([&] { parse_config(text, "laughs.yaml"); }),
            "laughs.yaml:6:50: the config expands to more than 1048576 nodes (each alias copies "
            "the node it names); is it a config?");
  std::string strings = "s0: &s0 " + std::string(6400, 's') + "\n";  // counts as 101 nodes
  for (int level = 1; level < 5; ++level) {
    const std::string alias = "*s" + std::to_string(level - 1);
    strings += "s" + std::to_string(level) + ": &s" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) strings += (i ? ", " : "") + alias;
    strings += "]\n";
  }
  const std::string long_strings = error_of([&] { parse_config(strings, "strings.yaml"); });
  EXPECT_EQ(long_strings.rfind("strings.yaml:5:", 0), 0u) << long_strings;
  EXPECT_NE(long_strings.find("expands to more than 1048576 nodes"), std::string::npos);
  const ConfigNode small = parse_config(text.substr(0, text.find("a5:")), "small.yaml");
  EXPECT_EQ(small.at("a4")[9][9][9][9][9].scalar(), "x");  // 10^5 nodes, below the bound: read
}

TEST(ConfigValue, TypesAndTheirErrors) {
  const ConfigNode root = parse_config(
      "solver:\n"
      "  base_lr: fast\n"
      "  momentum: 0.9\n"
      "  iters: +12\n"
      "  big: 3000000000\n"
      "  half: 3.5\n"
      "  huge: 1e40\n"
      "  inf: .inf\n"
      "  flags: [yes, Off, TRUE, no, on, false, maybe]\n",
      "x.yaml");
  const ConfigNode& solver = root.at("solver");
  EXPECT_EQ(error_of([&] { solver.get<float>("base_lr"); }),
            "x.yaml:2:12: solver.base_lr: expected a number, got 'fast'");
  EXPECT_FLOAT_EQ(solver.get<float>("momentum"), 0.9f);
  EXPECT_DOUBLE_EQ(solver.get<double>("momentum"), 0.9);
  EXPECT_EQ(solver.get<int>("iters"), 12);
  EXPECT_EQ(solver.get<int64_t>("big"), 3000000000LL);
  EXPECT_EQ(error_of([&] { solver.get<int>("big"); }),
            "x.yaml:5:8: solver.big: integer '3000000000' is out of range [-2147483648, "
            "2147483647]");
  EXPECT_EQ(error_of([&] { solver.get<int>("half"); }),
            "x.yaml:6:9: solver.half: expected an integer, got '3.5'");
  EXPECT_DOUBLE_EQ(solver.get<double>("huge"), 1e40);
  EXPECT_EQ(error_of([&] { solver.get<float>("huge"); }),
            "x.yaml:7:9: solver.huge: number '1e40' is out of range");
  EXPECT_EQ(error_of([&] { solver.get<double>("inf"); }),
            "x.yaml:8:8: solver.inf: expected a finite number, got '.inf'");
  const ConfigNode& flags = solver.at("flags");
  const bool expected[] = {true, false, true, false, true, false};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(flags[i].as<bool>(), expected[i]) << i;
  EXPECT_EQ(error_of([&] { flags[6].as<bool>(); }),
            "x.yaml:9:42: solver.flags[6]: expected true or false, got 'maybe'");
  EXPECT_EQ(error_of([&] { root.get<std::string>("solver"); }),
            "x.yaml:2:3: solver: expected a scalar, got a map");
  EXPECT_EQ(error_of([&] { solver.get<int>("flags"); }),
            "x.yaml:9:10: solver.flags: expected an integer, got a list");
  EXPECT_EQ(error_of([&] { flags[7]; }),
            "x.yaml:9:10: solver.flags: index 7 is out of range (the list has 7 elements)");
}

TEST(ConfigValue, IntegersAreStrictlyDecimal) {
  for (const char* text : {"1e3", "0x10", "12abc", "", "--1", "+-1", " 1"}) {
    const ConfigNode node = ConfigNode::make_scalar(text, Location{"t", 1, 1}, "n");
    EXPECT_THROW(node.as<int64_t>(), Error) << text;
  }
  EXPECT_EQ(ConfigNode::make_scalar("-7", {}, "n").as<int>(), -7);
  EXPECT_EQ(ConfigNode::make_scalar("007", {}, "n").as<int>(), 7);
}

TEST(ConfigKeys, GetWithDefaultsAndMissingKeys) {
  const ConfigNode root = parse_config(kLayers, "x.yaml");
  const ConfigNode& pool = root.at("model").at("layers")[1];
  EXPECT_EQ(pool.get<int>("stride", 1), 2);
  EXPECT_EQ(pool.get<int>("pad", 0), 0);
  EXPECT_EQ(pool.get<std::string>("pool", "max"), "max");
  EXPECT_FALSE(pool.has("kernel_size"));
  EXPECT_EQ(error_of([&] { pool.get<int>("kernel_size"); }),
            "x.yaml:5:7: model.layers[1]: missing required key 'kernel_size'");
  EXPECT_EQ(error_of([&] { root.at("solver"); }), "x.yaml:1:1: missing required key 'solver'");
  EXPECT_EQ(error_of([&] { root.at("name").has("x"); }),
            "x.yaml:1:7: name: expected a map, got 'lenet'");
}

// A required key written with a typo is reported as the unknown key it is, at its own place,
// not as missing (a `num_ouput:` used to say `num_output: required`).
TEST(ConfigKeys, MisspelledRequiredKeyIsNamed) {
  const ConfigNode root = parse_config("name: x\nmodle: {layres: []}\n", "m.yaml");
  root.get<std::string>("name");
  EXPECT_EQ(error_of([&] { root.at("model"); }),
            "m.yaml:2:1: unknown key 'modle' in the config (did you mean 'model'? it is required)");
  const ConfigNode& model = root.at("modle");
  EXPECT_EQ(error_of([&] { model.at("layers"); }),
            "m.yaml:2:9: unknown key 'layres' in modle (did you mean 'layers'? it is required)");
  EXPECT_EQ(model.misspelling_of("solver"), "");
  // A key some reader already asked for is no misspelling of another.
  const ConfigNode read = parse_config("strides: 2\n", "r.yaml");
  read.get<int>("strides");
  EXPECT_EQ(read.misspelling_of("stride"), "");
  EXPECT_EQ(error_of([&] { read.at("stride"); }), "r.yaml:1:1: missing required key 'stride'");
}

TEST(ConfigKeys, GetListForms) {
  const ConfigNode root = parse_config(
      "one: data\nmany: [ip2, label]\nnone: []\nnull_value:\nnested: [[1]]\nints: [1, 2, 3]\n",
      "l.yaml");
  EXPECT_EQ(root.get_list<std::string>("one"), (std::vector<std::string>{"data"}));
  EXPECT_EQ(root.get_list<std::string>("many"), (std::vector<std::string>{"ip2", "label"}));
  EXPECT_TRUE(root.get_list<std::string>("none").empty());
  EXPECT_EQ(root.get_list<int>("ints"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(error_of([&] { root.get_list<std::string>("null_value"); }),
            "l.yaml:4:1: null_value: expected a value or a list of values, got null");
  EXPECT_EQ(error_of([&] { root.get_list<int>("nested"); }),
            "l.yaml:5:10: nested[0]: expected an integer, got a list");
  EXPECT_EQ(error_of([&] { root.get_list<int>("absent"); }),
            "l.yaml:1:1: missing required key 'absent'");
}

TEST(ConfigKeys, UnknownKeysWithAndWithoutSuggestion) {
  const ConfigNode layer = parse_config("name: conv1\nstrid: 2\npadd: 1\n", "u.yaml");
  layer.get<std::string>("name");
  layer.get<int>("stride", 1);
  layer.has("pad");
  EXPECT_EQ(error_of([&] { layer.check_no_unknown_keys("layer 'conv1'"); }),
            "u.yaml:2:1: unknown key 'strid' in layer 'conv1' (did you mean 'stride'?)");
  layer.allow("strid");
  EXPECT_EQ(error_of([&] { layer.check_no_unknown_keys("layer 'conv1'"); }),
            "u.yaml:3:1: unknown key 'padd' in layer 'conv1' (did you mean 'pad'?)");

  const ConfigNode solver = parse_config("type: sgd\nwarmup_iterations: 5\n", "s.yaml");
  solver.get<std::string>("type");
  solver.allow("base_lr");
  EXPECT_EQ(error_of([&] { solver.check_no_unknown_keys("solver"); }),
            "s.yaml:2:1: unknown key 'warmup_iterations' in solver (known keys: base_lr, type)");
  const ConfigNode empty = parse_config("x: 1\n", "e.yaml");
  EXPECT_EQ(error_of([&] { empty.check_no_unknown_keys("layer 'relu'"); }),
            "e.yaml:1:1: unknown key 'x' in layer 'relu' (it takes no keys)");
  empty.allow("x");
  EXPECT_NO_THROW(empty.check_no_unknown_keys("layer 'relu'"));
}

TEST(ConfigKeys, ClosestMatch) {
  EXPECT_EQ(closest_match("base_lrr", {"type", "base_lr", "momentum"}), "base_lr");
  EXPECT_EQ(closest_match("num_ouput", {"num_output", "bias_term"}), "num_output");
  EXPECT_EQ(closest_match("ab", {"ax", "ay"}), "ax");  // ties: the first
  EXPECT_EQ(closest_match("momentum", {"type", "base_lr"}), "");
  EXPECT_EQ(closest_match("x", {"lr", "y"}), "");
  EXPECT_EQ(closest_match("", {"lr"}), "");
  EXPECT_EQ(closest_match("relu", {"Pooling", "ReLU"}), "ReLU");            // case is ignored
  EXPECT_EQ(closest_match("Pool", {"Convolution", "Pooling"}), "Pooling");  // a prefix
  EXPECT_EQ(closest_match("Po", {"Convolution", "Pooling"}), "");
}

TEST(ConfigYaml, RoundTripKeepsEveryValue) {
  const std::string text =
      "name: lenet\n"
      "model:\n"
      "  inputs: {data: [1, 28, 28], label: []}\n"
      "  layers:\n"
      "    - {name: conv1, bottom: data, filler: {type: xavier}, empty: {}}\n"
      "    - {name: 'a: b', odd: ['', '~', 'null', ' lead', 'trail ', '#x', '[x', 'x,y', "
      "\"t\\tab\"]}\n"
      "    - {name: \"multi\\nline\", nothing: ~, quoted_true: 'true', utf8: 'é'}\n"
      "    - [[1, 2], [3]]\n";
  const ConfigNode root = parse_config(text, "r.yaml");
  const std::string yaml = root.to_yaml();
  const ConfigNode again = parse_config(yaml, "again.yaml");
  expect_same_tree(root, again);
  EXPECT_EQ(again.to_yaml(), yaml);
  EXPECT_TRUE(again.at("model").at("layers")[2].at("nothing").is_null());
  EXPECT_EQ(again.at("model").at("layers")[1].at("odd")[1].scalar(), "~");
}

TEST(ConfigYaml, ReadableLayout) {
  const ConfigNode root = parse_config(
      "name: net\n"
      "solver: {type: sgd, base_lr: 0.01, momentum: 0.9, weight_decay: 0.0005, display: 100}\n"
      "layers:\n"
      "  - {name: ip, bottom: data, filler: {type: xavier, std: 0.1}, param: {}}\n"
      "  - {name: loss, bottom: [ip, label]}\n"
      "transform: [{scale: 0.5}, {mean: [1, 2]}]\n",
      "r.yaml");
  EXPECT_EQ(root.to_yaml(),
            "name: net\n"
            "solver:\n"
            "  type: sgd\n"
            "  base_lr: 0.01\n"
            "  momentum: 0.9\n"
            "  weight_decay: 0.0005\n"
            "  display: 100\n"
            "layers:\n"
            "  - name: ip\n"
            "    bottom: data\n"
            "    filler: {type: xavier, std: 0.1}\n"
            "    param: {}\n"
            "  - name: loss\n"
            "    bottom: [ip, label]\n"
            "transform:\n"
            "  - {scale: 0.5}\n"
            "  - {mean: [1, 2]}\n");
}

// Config files written under a fresh directory per test.
class ConfigFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "crema_config_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
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
  EXPECT_EQ(error_of([&] { load_config(dir_ + "/run.yaml", {"solver.base_lr=fast"}); }),
            "(no error)");  // the value is text until a reader asks for a number
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
