// load_config: a file, its `_base_` files merged under it, then the `--set` overrides.
#include <charconv>
#include <filesystem>
#include <sstream>

#include "core/config.h"
#include "core/config_builder.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace crema {
namespace {

namespace fs = std::filesystem;
using Kind = ConfigNode::Kind;

// A config is text a person wrote: far below this. The bound keeps a `_base_` that names a huge
// file from being read into memory (a FIFO or /dev/zero is refused by read_small_file).
constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;

// `included_at` is where a `_base_` names the file (null for the file given by the user).
std::string read_file(const std::string& path, const Location* included_at) {
  try {
    return read_small_file(path, "config file", kMaxConfigBytes);
  } catch (const Error& e) {
    if (included_at == nullptr) throw;
    throw Error(included_at->str() + ": " + e.what());
  }
}

// A file's `_base_` entries with their locations: one file name or a list of them.
std::vector<std::pair<std::string, Location>> base_files(const ConfigNode& base) {
  std::vector<std::pair<std::string, Location>> files;
  if (base.is_scalar()) {
    files.emplace_back(base.scalar(), base.location());
    return files;
  }
  if (!base.is_sequence()) {
    base.fail("_base_: expected a file name or a list of file names, got " + describe(base));
  }
  for (size_t i = 0; i < base.size(); ++i) {
    if (!base[i].is_scalar()) {
      base[i].fail("_base_: expected a file name, got " + describe(base[i]));
    }
    files.emplace_back(base[i].scalar(), base[i].location());
  }
  return files;
}

void patch_layers(ConfigNode& root);

// Loads `path` with its bases resolved. `chain` holds the files being loaded, outermost first
// (canonical path for the cycle test, the path as written for the message).
ConfigNode load_resolved(const std::string& path, const Location* included_at,
                         std::vector<std::pair<std::string, std::string>>& chain) {
  std::error_code ignored;
  const std::string canonical = fs::weakly_canonical(path, ignored).string();
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain[i].first != canonical) continue;
    std::string cycle;
    for (size_t j = i; j < chain.size(); ++j) cycle += chain[j].second + " -> ";
    throw Error(included_at->str() + ": _base_ cycle: " + cycle + path);
  }
  ConfigNode root = ConfigBuilder::parse(read_file(path, included_at), path, 0);
  if (root.is_null()) return ConfigBuilder::make(Kind::map, root.location());
  if (!root.is_map()) {
    root.fail("a config file is a map of keys (name, seed, model, data, solver), got " +
              describe(root));
  }
  const ConfigNode* base = ConfigBuilder::find(root, "_base_");
  if (!base) {
    patch_layers(root);
    return root;
  }

  // Bases in order, each on top of the previous, then this file on top of them all.
  ConfigNode resolved = ConfigBuilder::make(Kind::map, root.location());
  chain.emplace_back(canonical, path);
  for (const auto& [file, location] : base_files(*base)) {
    const std::string base_path = (fs::path(path).parent_path() / file).lexically_normal().string();
    ConfigBuilder::merge(resolved, load_resolved(base_path, &location, chain));
  }
  chain.pop_back();
  ConfigBuilder::erase(root, "_base_");
  ConfigBuilder::merge(resolved, std::move(root));
  patch_layers(resolved);
  return resolved;
}

// `_replace_: true` has done its work in merge(); no section has such a key.
void drop_replace_markers(ConfigNode& node) {
  if (node.is_sequence()) {
    for (size_t i = 0; i < node.size(); ++i) drop_replace_markers(ConfigBuilder::element(node, i));
  }
  if (!node.is_map()) return;
  if (const ConfigNode* marker = ConfigBuilder::find(node, "_replace_")) {
    marker->as<bool>();  // `_replace_: fast` is an error, not a silent merge
    ConfigBuilder::erase(node, "_replace_");
  }
  for (const std::string& key : node.keys()) drop_replace_markers(*ConfigBuilder::find(node, key));
}

std::string quoted_path(const ConfigNode& node) {
  return node.path().empty() ? "the top level" : "'" + node.path() + "'";
}

// segments[first..last) joined by '.': the key path they spell.
std::string join_segments(const std::vector<std::string>& segments, size_t first, size_t last) {
  std::string joined = segments[first];
  for (size_t i = first + 1; i < last; ++i) joined += "." + segments[i];
  return joined;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string close = closest_match(word, candidates);
  return close.empty() ? "" : " (did you mean '" + close + "'?)";
}

// The `name:` of a list element (a layer), or nullptr when it has none.
const std::string* name_of(ConfigNode& element) {
  const ConfigNode* name = element.is_map() ? ConfigBuilder::find(element, "name") : nullptr;
  return name && name->is_scalar() ? &name->scalar() : nullptr;
}

// The element of a sequence whose `name` is `name`, or nullptr.
ConfigNode* find_named(ConfigNode& sequence, const std::string& name, const std::string& where) {
  ConfigNode* match = nullptr;
  for (size_t i = 0; i < sequence.size(); ++i) {
    ConfigNode& element = ConfigBuilder::element(sequence, i);
    const std::string* element_name = name_of(element);
    if (!element_name || *element_name != name) continue;
    if (match) {
      throw Error(where + quoted_path(sequence) + " has several elements named '" + name + "'");
    }
    match = &element;
  }
  return match;
}

// The names of a sequence's elements that have one.
std::vector<std::string> element_names(ConfigNode& sequence) {
  std::vector<std::string> names;
  for (size_t i = 0; i < sequence.size(); ++i) {
    if (const std::string* name = name_of(ConfigBuilder::element(sequence, i))) {
      names.push_back(*name);
    }
  }
  return names;
}

// Whether a patch holds `_delete_: true`, which removes the layer and allows no other key; a
// `_delete_: false` is dropped.
bool deletes(ConfigNode& patch, const std::string& name) {
  const ConfigNode* marker = ConfigBuilder::find(patch, "_delete_");
  if (!marker) return false;
  if (!marker->as<bool>()) {
    ConfigBuilder::erase(patch, "_delete_");
    return false;
  }
  if (patch.keys().size() != 1) {
    marker->fail("model.patch_layers: '" + name +
                 "' has _delete_: true beside other keys; a deleted layer takes no keys");
  }
  return true;
}

// model.patch_layers and model.append_layers (configs/README.md, "Editing a base's layers"):
//   patch_layers: {NAME: {key: value, ...}, ...}   merges the keys into the layer named NAME, as
//       a file merges onto its base (maps merge, values replace; `_replace_: true` takes the
//       patch as the whole layer; `_delete_: true` removes the layer), in the order written;
//   append_layers: [layer, ...]                     adds new layers after the last one.
// Applied to each file once its bases are merged under it, so a file edits the layers its bases
// (or the file itself) wrote; both keys are then removed. Errors point at the patch in its file.
void patch_layers(ConfigNode& root) {
  ConfigNode* model = root.is_map() ? ConfigBuilder::find(root, "model") : nullptr;
  if (!model || !model->is_map()) return;
  ConfigNode* patches = ConfigBuilder::find(*model, "patch_layers");
  ConfigNode* appended = ConfigBuilder::find(*model, "append_layers");
  if (!patches && !appended) return;
  const std::string key = patches ? "patch_layers" : "append_layers";
  ConfigNode* layers = ConfigBuilder::find(*model, "layers");
  if (!layers || !layers->is_sequence()) {
    model->fail_at_key(key, "model." + key + " edits model.layers, which " +
                                (layers ? "is " + describe(*layers) + ", not a list"
                                        : "neither this file nor its _base_ defines"));
  }
  const std::string where = "model.patch_layers: ";
  if (patches) {
    if (!patches->is_map()) {
      patches->fail(where + "expected a map from layer names to the keys to change, got " +
                    describe(*patches));
    }
    for (const std::string& name : patches->keys()) {
      ConfigNode& patch = *ConfigBuilder::find(*patches, name);
      if (!patch.is_map()) {
        patch.fail(where + "'" + name + "': expected a map of the keys to change, got " +
                   describe(patch));
      }
      ConfigNode* layer = find_named(*layers, name, patch.location().str() + ": ");
      if (!layer) {
        const std::vector<std::string> names = element_names(*layers);
        patches->fail_at_key(name, where + "no layer named '" + name + "' in model.layers" +
                                       suggestion(name, names));
      }
      if (!deletes(patch, name)) {
        ConfigBuilder::merge(*layer, std::move(patch));
        continue;
      }
      ConfigNode kept = ConfigBuilder::make(ConfigNode::Kind::sequence, layers->location());
      for (size_t i = 0; i < layers->size(); ++i) {
        ConfigNode& element = ConfigBuilder::element(*layers, i);
        if (&element != layer) ConfigBuilder::append(kept, std::move(element));
      }
      *layers = std::move(kept);
    }
    ConfigBuilder::erase(*model, "patch_layers");
  }
  appended = ConfigBuilder::find(*model, "append_layers");
  if (!appended) return;
  if (!appended->is_sequence()) {
    appended->fail("model.append_layers: expected a list of layers, got " + describe(*appended));
  }
  for (size_t i = 0; i < appended->size(); ++i) {
    ConfigNode& layer = ConfigBuilder::element(*appended, i);
    const std::string* name = name_of(layer);
    if (name && find_named(*layers, *name, layer.location().str() + ": ")) {
      layer.fail("model.append_layers: a layer named '" + *name +
                 "' is already in model.layers (change it with model.patch_layers)");
    }
    ConfigBuilder::append(*layers, std::move(layer));
  }
  ConfigBuilder::erase(*model, "append_layers");
}

// The child of `node` named by segments[position..], advancing `position` past the segments
// used. A key (or an element's `name`) is the longest run of segments that, joined by '.',
// exists, so names with dots (`layer1.0.conv1`, as in PyTorch module paths) still work.
// `add_hint`, when not empty, is offered where the last key is missing and nothing is close.
ConfigNode& step(ConfigNode& node, const std::vector<std::string>& segments, size_t& position,
                 const std::string& where, const std::string& add_hint) {
  const std::string& segment = segments[position];
  if (node.is_map()) {
    for (size_t end = segments.size(); end > position; --end) {
      if (ConfigNode* child = ConfigBuilder::find(node, join_segments(segments, position, end))) {
        position = end;
        return *child;
      }
    }
    std::string hint = suggestion(segment, node.keys());
    if (hint.empty() && !add_hint.empty() && position + 1 == segments.size()) {
      hint = " (to add it, write " + add_hint + ")";
    }
    throw Error(where + quoted_path(node) + " has no key '" + segment + "'" + hint);
  }
  if (!node.is_sequence()) {
    throw Error(where + quoted_path(node) + " is " + describe(node) + ", it has no key '" +
                segment + "'");
  }
  for (size_t end = segments.size(); end > position; --end) {
    if (ConfigNode* element = find_named(node, join_segments(segments, position, end), where)) {
      position = end;
      return *element;
    }
  }
  if (segment.find_first_not_of("0123456789") == std::string::npos) {
    size_t index = 0;
    const auto [end, error] =
        std::from_chars(segment.data(), segment.data() + segment.size(), index);
    if (error == std::errc() && index < node.size()) {
      ++position;
      return ConfigBuilder::element(node, index);
    }
    throw Error(where + quoted_path(node) + " has " + std::to_string(node.size()) +
                " elements; index " + segment + " is out of range");
  }
  const std::vector<std::string> names = element_names(node);
  const std::string message = where + quoted_path(node) + " has no element named '" + segment + "'";
  if (names.empty()) {
    throw Error(message + " (its " + std::to_string(node.size()) +
                " elements have no names; address them by index)");
  }
  throw Error(message + suggestion(segment, names) + " (names: " + join(names, ", ") + ")");
}

// The node that segments[0..count) name, below `node`.
ConfigNode& walk(ConfigNode& node, const std::vector<std::string>& segments, size_t count,
                 const std::string& where, const std::string& add_hint = "") {
  const std::vector<std::string> path(segments.begin(),
                                      segments.begin() + static_cast<std::ptrdiff_t>(count));
  ConfigNode* current = &node;
  for (size_t position = 0; position < path.size();) {
    current = &step(*current, path, position, where, add_hint);
  }
  return *current;
}

// "a.b.c=value": the value, parsed as YAML, replaces the existing node a.b.c. As in Hydra,
// "+a.b.c=value" adds the key c, which must not exist yet, to the existing map a.b, and
// "++a.b.c=value" adds it or replaces it.
void apply_override(ConfigNode& root, const std::string& override_text) {
  const std::string where = "--set " + override_text + ": ";
  const size_t equals = override_text.find('=');
  if (equals == std::string::npos) {
    throw Error(where +
                "expected key=value, with a dotted key path (solver.base_lr=0.01, "
                "model.layers.conv1.num_output=32)");
  }
  const size_t pluses = override_text.find_first_not_of('+');
  if (pluses > 2) throw Error(where + "expected at most two '+' before the key path");
  const std::string key = override_text.substr(pluses, equals - pluses);
  if (key.empty()) throw Error(where + "the key path before '=' is empty");
  std::vector<std::string> segments;
  std::stringstream split(key);
  for (std::string segment; std::getline(split, segment, '.');) segments.push_back(segment);
  if (key.back() == '.') segments.emplace_back();
  for (const std::string& segment : segments) {
    if (segment.empty()) throw Error(where + "the key path '" + key + "' has an empty part");
  }

  ConfigNode value;
  try {
    value = ConfigBuilder::parse(override_text.substr(equals + 1), "--set",
                                 static_cast<int>(equals) + 1);
  } catch (const Error& e) {
    throw Error(where + "the value is not valid YAML: " + e.what());
  }
  auto replace = [&](ConfigNode& node) {
    const std::string path = node.path();
    node = std::move(value);
    ConfigBuilder::assign_paths(node, path);
  };
  if (pluses == 0) {
    replace(walk(root, segments, segments.size(), where, "--set +" + override_text));
    return;
  }
  ConfigNode& parent = walk(root, segments, segments.size() - 1, where);
  const std::string& name = segments.back();
  if (!parent.is_map()) {
    throw Error(where + quoted_path(parent) + " is " + describe(parent) +
                ", not a map that '+' could add the key '" + name + "' to");
  }
  if (ConfigNode* existing = ConfigBuilder::find(parent, name)) {
    if (pluses == 1) {
      throw Error(where + quoted_path(parent) + " already has the key '" + name +
                  "': drop the '+' to replace its value");
    }
    replace(*existing);
    return;
  }
  const Location key_location{"--set", 1, static_cast<int>(equals - name.size()) + 1};
  ConfigBuilder::add(parent, name, key_location, std::move(value));
  ConfigBuilder::assign_paths(parent, parent.path());
}

}  // namespace

ConfigNode load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::vector<std::pair<std::string, std::string>> chain;
  ConfigNode root = load_resolved(path, nullptr, chain);
  if (root.keys().empty()) {
    throw Error(path + ": the config is empty (no keys, or only comments); a config holds " +
                "model, data and solver: configs/README.md");
  }
  for (const std::string& override_text : overrides) apply_override(root, override_text);
  drop_replace_markers(root);
  ConfigBuilder::assign_paths(root, "");
  return root;
}

}  // namespace crema
