#include "core/config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

using crema::testing::error_of;

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

}  // namespace
}  // namespace crema
