// Internal to core/config*.cpp: the one class allowed to build and edit ConfigNode trees.
//
// ConfigNode is read-only for everyone else (readers only ask questions and record which keys
// they asked about). The parser (config_parse.cpp) builds trees through these functions; the
// loader (config_load.cpp) merges `_base_` files and applies `--set` overrides through them.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace crema {

class ConfigBuilder {
 public:
  static ConfigNode make(ConfigNode::Kind kind, Location location);

  // Appends to a sequence; adds a key to a map (the caller has checked it is not there yet).
  static void append(ConfigNode& sequence, ConfigNode element);
  static void add(ConfigNode& map, std::string key, Location key_location, ConfigNode value);

  // A map's entries in file order, read without marking any key as known.
  static const std::vector<ConfigNode::MapEntry>& entries(const ConfigNode& map);
  // The value under `key`, or nullptr. `map` must be a map.
  static ConfigNode* find(ConfigNode& map, const std::string& key);
  static void erase(ConfigNode& map, const std::string& key);
  static ConfigNode& element(ConfigNode& sequence, size_t index);

  // `over` on top of `base`: maps merge key by key (recursively, keys of `base` first, in
  // order, then keys new in `over`); anything else in `over` replaces what `base` had, and so
  // does a map of `over` holding `_replace_: true` (the marker stays for the loader to drop).
  static void merge(ConfigNode& base, ConfigNode over);

  // Sets path() of `node` and of everything below it, `path` being the node's own.
  static void assign_paths(ConfigNode& node, const std::string& path);

  // Parses YAML text into a tree (config_parse.cpp). Locations name `source`; columns on the
  // first line are moved right by `column_offset`, so a `--set` value parsed on its own points
  // at its place inside the whole override.
  static ConfigNode parse(const std::string& text, const std::string& source, int column_offset);
};

// For messages: a scalar's text in quotes, else "a map", "a list" or "null".
std::string describe(const ConfigNode& node);
// "a, b, c" for (words, ", ").
std::string join(const std::vector<std::string>& words, const std::string& separator);

}  // namespace crema
