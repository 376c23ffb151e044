// load_config on any text, as `crema train FILE` reads it: yaml-cpp, then crema's own tree and
// checks (`_base_`, locations, misspellings). Then a walk reads every scalar as each type a layer
// might ask for, and check_no_unknown_keys runs on every map: each step either works or throws
// crema::Error. Any other exception (yaml-cpp's own included) escapes and is a finding.
#include "core/config.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

template <class T>
void try_as(const crema::ConfigNode& node) {
  try {
    node.as<T>();
  } catch (const crema::Error&) {
  }
}

void walk(const crema::ConfigNode& node, int depth) {
  if (depth > 64) return;
  if (node.is_scalar()) {
    try_as<bool>(node);
    try_as<int>(node);
    try_as<int64_t>(node);
    try_as<float>(node);
    try_as<double>(node);
    try_as<std::string>(node);
  } else if (node.is_sequence()) {
    for (size_t i = 0; i < node.size(); ++i) walk(node[i], depth + 1);
  } else if (node.is_map()) {
    try {
      node.check_no_unknown_keys("the fuzzed map");
    } catch (const crema::Error&) {
    }
    for (const std::string& key : node.keys()) {
      try {
        node.get_list<std::string>(key);
      } catch (const crema::Error&) {
      }
      walk(node.at(key), depth + 1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = crema::fuzz::write_input(data, size, "config.yaml");
  try {
    const crema::ConfigNode root = crema::load_config(path);
    walk(root, 0);
    crema::parse_config(root.to_yaml(), "the config written back");
  } catch (const crema::Error&) {
  }
  return 0;
}
