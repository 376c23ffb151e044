// The configuration tree: YAML files resolved into one tree whose every node remembers where it
// came from (file:line:column), so that any error about a value can point at it.
//
//   ConfigNode root = load_config("configs/lenet.yaml", {"solver.base_lr=0.02"});
//   float lr = root.at("solver").get<float>("base_lr");
//   int stride = layer.get<int>("stride", 1);          // with a default
//   layer.check_no_unknown_keys("layer 'conv1'");       // unknown keys -> error with did-you-mean
//
// Resolution rules (documented for users in configs/README.md):
//   - `_base_: other.yaml` (or a list of files) is loaded first, relative to the including file;
//     maps merge key by key, lists and scalars replace; a map holding `_replace_: true` replaces.
//   - `model.patch_layers: {NAME: {keys}}` merges keys into the layer named NAME (`_delete_: true`
//     removes it) and `model.append_layers: [...]` adds layers at the end, applied to each file
//     once its bases are merged under it: a derived file edits the layers without repeating them.
//   - each override "a.b.c=value" replaces one existing key; the value is parsed as YAML, so
//     `--set data.train.transform=[{scale: 0.5}]` works. In a list of maps, a path segment picks
//     the element whose `name` equals it (`model.layers.conv1.num_output=32`) or a numeric index.
//     Setting a key that does not exist is an error (with did-you-mean); as in Hydra,
//     "+a.b.c=value" adds a new key c to the map a.b and "++a.b.c=value" adds or replaces.
//   - every key that a reader never asked for is reported by check_no_unknown_keys.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace crema {

// A place in a config source, printed 1-based as "file:line:col".
struct Location {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string str() const;
};

class ConfigNode {
 public:
  enum class Kind { null, scalar, sequence, map };

  ConfigNode() = default;
  static ConfigNode make_scalar(std::string value, Location location, std::string path);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_scalar() const { return kind_ == Kind::scalar; }
  bool is_sequence() const { return kind_ == Kind::sequence; }
  bool is_map() const { return kind_ == Kind::map; }
  const Location& location() const { return location_; }
  // Where the node sits in the tree, for messages: "model.layers[2].stride".
  const std::string& path() const { return path_; }

  // --- scalars -------------------------------------------------------------------------
  const std::string& scalar() const;  // error if not a scalar
  // T in {bool, int, int64_t, float, double, std::string}. A value of the wrong type is an error
  // naming the location and path: "x.yaml:12:15: solver.base_lr: expected a number, got 'fast'".
  template <class T>
  T as() const;

  // --- maps ----------------------------------------------------------------------------
  // Each of these records `key` as known to this node (for check_no_unknown_keys).
  bool has(const std::string& key) const;
  // Error naming the node if missing ("model: missing required key 'layers'"), or naming the
  // misspelled key written instead ("unknown key 'layres' in model (did you mean 'layers'? it is
  // required)").
  const ConfigNode& at(const std::string& key) const;
  template <class T>
  T get(const std::string& key) const {
    return at(key).as<T>();
  }
  template <class T>
  T get(const std::string& key, const T& fallback) const {
    return has(key) ? at(key).as<T>() : fallback;
  }
  // A scalar or a list of scalars, as a list: `bottom: data` and `bottom: [ip2, label]`.
  template <class T>
  std::vector<T> get_list(const std::string& key) const;
  std::vector<std::string> keys() const;  // in file order
  // Marks `key` as known without reading it (keys handled elsewhere, e.g. `_base_`).
  void allow(const std::string& key) const;
  // For a missing required `key`: the key written here that no reader asked for and that looks
  // like a misspelling of `key` ("num_ouput" for "num_output"), or "" when there is none. A
  // misspelled required key is then reported as what it is, not as a missing one.
  std::string misspelling_of(const std::string& key) const;
  // Throws crema::Error prefixed with the location of the map key `key` (where it was written):
  // "x.yaml:7:47: <message>".
  [[noreturn]] void fail_at_key(const std::string& key, const std::string& message) const;
  // Throws crema::Error for the first key present here that was never asked for:
  //   "x.yaml:7:5: unknown key 'strid' in layer 'conv1' (did you mean 'stride'?)"
  // `what` names the node for the message ("layer 'conv1'", "solver").
  void check_no_unknown_keys(const std::string& what) const;

  // --- sequences -----------------------------------------------------------------------
  size_t size() const;  // elements of a sequence (0 for null); error for scalars and maps
  const ConfigNode& operator[](size_t index) const;

  // Errors prefixed with this node's location: throws crema::Error("file:l:c: message").
  [[noreturn]] void fail(const std::string& message) const;

  // The tree as YAML text (the resolved config saved with a run).
  std::string to_yaml() const;

 private:
  friend class ConfigBuilder;  // builds and edits trees (core/config_builder.h)
  struct MapEntry;             // a key, where the key was written, and its value
  Kind kind_ = Kind::null;
  Location location_;
  std::string path_;
  std::string scalar_;
  std::vector<MapEntry> map_;  // in file order
  std::vector<ConfigNode> sequence_;
  mutable std::set<std::string> known_keys_;
};

struct ConfigNode::MapEntry {
  std::string key;
  Location key_location;  // unknown-key errors point at the key, not at its value
  ConfigNode value;
};

// Loads `path`, resolves `_base_` inheritance, then applies `overrides` ("a.b=value") in order.
// Errors (missing file, malformed YAML, bad override) throw crema::Error with file:line:col.
ConfigNode load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Parses YAML text (for tests and for override values); `source` names it in messages.
ConfigNode parse_config(const std::string& text, const std::string& source);

// The closest of `candidates` to `word` by edit distance, or "" when none is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace crema
