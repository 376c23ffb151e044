// YAML text -> ConfigNode tree, from yaml-cpp's parser events.
//
// Events rather than YAML::Node because events carry what a config needs and a node tree loses:
// the mark of every key (unknown-key errors point at the key), duplicate keys (yaml-cpp's node
// builder keeps both silently), and the same behaviour across yaml-cpp versions for aliases and
// merge keys (`<<: *defaults`), which this file resolves itself.
#include <map>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include "core/config.h"
#include "core/config_builder.h"
#include "core/error.h"

namespace crema {
namespace {

using Kind = ConfigNode::Kind;

// An alias is a copy of the node it names, so a short text can expand exponentially ("billion
// laughs": a list of ten aliases of a list of ten aliases of ...; nine levels make 10^9 nodes
// from 600 bytes). A config is a few thousand nodes; a text that expands past this bound is
// refused before the copies exhaust memory. A scalar counts one node more per 64 characters, so
// that aliases of a long string are bounded too.
constexpr size_t kMaxNodes = size_t(1) << 20;
constexpr size_t kCharactersPerNode = 64;

class EventsToTree final : public YAML::EventHandler {
 public:
  EventsToTree(std::string source, int column_offset)
      : source_(std::move(source)), column_offset_(column_offset) {
    root_ = ConfigBuilder::make(Kind::null, Location{source_, 0, 0});
  }

  ConfigNode& root() { return root_; }

  // yaml-cpp marks are 0-based; a Location is 1-based.
  Location location(const YAML::Mark& mark) const {
    if (mark.is_null()) return Location{source_, 0, 0};
    return Location{source_, mark.line + 1,
                    mark.column + 1 + (mark.line == 0 ? column_offset_ : 0)};
  }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      throw Error(location(mark).str() +
                  ": a config holds one YAML document; remove this second one (after '---')");
    }
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    count(1, mark);
    complete(ConfigBuilder::make(Kind::null, location(mark)), 1, anchor, false);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = anchors_.find(anchor);
    if (found == anchors_.end()) {
      throw Error(location(mark).str() + ": an alias cannot refer to the node that contains it");
    }
    count(found->second.nodes, mark);
    complete(found->second.node, found->second.nodes, 0, false);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    // yaml-cpp tags plain (unquoted) scalars "?": only a plain `<<` is a merge key.
    const size_t nodes = 1 + value.size() / kCharactersPerNode;
    count(nodes, mark);
    complete(ConfigNode::make_scalar(value, location(mark), ""), nodes, anchor, tag == "?");
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(Kind::sequence, mark, anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(Kind::map, mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  // A sequence or map whose end event has not come yet.
  struct Frame {
    ConfigNode node;
    YAML::anchor_t anchor = 0;
    size_t first_node = 0;  // nodes_ before this one: its subtree is what comes after
    bool has_key = false;   // a map's key has been read and waits for its value
    std::string key;
    Location key_location;
    bool key_is_merge = false;
    bool merge_seen = false;
    size_t merge_position = 0;       // entries written before `<<`
    std::vector<ConfigNode> merged;  // the maps `<<` names; an earlier one wins a clash
  };

  void open(Kind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    Frame frame;
    frame.node = ConfigBuilder::make(kind, location(mark));
    frame.anchor = anchor;
    frame.first_node = nodes_;
    count(1, mark);
    open_.push_back(std::move(frame));
  }

  void close() {
    Frame frame = std::move(open_.back());
    open_.pop_back();
    if (!frame.merged.empty()) apply_merge_key(frame);
    complete(std::move(frame.node), nodes_ - frame.first_node, frame.anchor, false);
  }

  // YAML's merge key: `{<<: *conv, name: conv2}` takes every key of *conv that the map does
  // not set itself, placed where `<<` was written.
  static void apply_merge_key(Frame& frame) {
    const auto& own = ConfigBuilder::entries(frame.node);
    ConfigNode result = ConfigBuilder::make(Kind::map, frame.node.location());
    auto add_merged = [&] {
      for (const ConfigNode& source : frame.merged) {
        for (const auto& entry : ConfigBuilder::entries(source)) {
          if (!has_key(frame.node, entry.key) && !has_key(result, entry.key)) {
            ConfigBuilder::add(result, entry.key, entry.key_location, entry.value);
          }
        }
      }
    };
    for (size_t i = 0; i < own.size(); ++i) {
      if (i == frame.merge_position) add_merged();
      ConfigBuilder::add(result, own[i].key, own[i].key_location, own[i].value);
    }
    if (frame.merge_position == own.size()) add_merged();
    frame.node = std::move(result);
  }

  static bool has_key(const ConfigNode& map, const std::string& key) {
    for (const auto& entry : ConfigBuilder::entries(map)) {
      if (entry.key == key) return true;
    }
    return false;
  }

  // Adds `nodes` to the tree's size, aliases expanded; refuses the text past kMaxNodes.
  void count(size_t nodes, const YAML::Mark& mark) {
    nodes_ += nodes;
    if (nodes_ > kMaxNodes) {
      throw Error(location(mark).str() + ": the config expands to more than " +
                  std::to_string(kMaxNodes) +
                  " nodes (each alias copies the node it names); is it a config?");
    }
  }

  // A finished node of `nodes` nodes (its subtree) goes to its parent: a list element, a map
  // key, or a map value.
  void complete(ConfigNode node, size_t nodes, YAML::anchor_t anchor, bool plain) {
    if (anchor != 0) anchors_[anchor] = Anchored{node, nodes};
    if (open_.empty()) {
      root_ = std::move(node);
      return;
    }
    Frame& parent = open_.back();
    if (parent.node.is_sequence()) {
      ConfigBuilder::append(parent.node, std::move(node));
    } else if (!parent.has_key) {
      if (!node.is_scalar()) node.fail("a key must be a string, got " + describe(node));
      parent.has_key = true;
      parent.key = node.scalar();
      parent.key_location = node.location();
      parent.key_is_merge = plain && parent.key == "<<";
    } else {
      parent.has_key = false;
      add_value(parent, std::move(node));
    }
  }

  static void add_value(Frame& map, ConfigNode value) {
    if (map.key_is_merge) {
      if (map.merge_seen) map_value_error(map, "duplicate key '<<'");
      map.merge_seen = true;
      map.merge_position = ConfigBuilder::entries(map.node).size();
      if (value.is_map()) {
        map.merged.push_back(std::move(value));
        return;
      }
      if (!value.is_sequence()) {
        value.fail("'<<' merges a map or a list of maps into this map, got " + describe(value));
      }
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_map()) value[i].fail("'<<' merges maps, got " + describe(value[i]));
        map.merged.push_back(value[i]);
      }
      return;
    }
    for (const auto& entry : ConfigBuilder::entries(map.node)) {
      if (entry.key == map.key) {
        map_value_error(map, "duplicate key '" + map.key + "' (first set at line " +
                                 std::to_string(entry.key_location.line) + ", column " +
                                 std::to_string(entry.key_location.column) + ")");
      }
    }
    // `key:` with nothing after it: yaml-cpp marks the null at the next token, often on a later
    // line; the key is the place to point at.
    if (value.is_null() && value.location().line > map.key_location.line) {
      value = ConfigBuilder::make(Kind::null, map.key_location);
    }
    ConfigBuilder::add(map.node, map.key, map.key_location, std::move(value));
  }

  [[noreturn]] static void map_value_error(const Frame& map, const std::string& message) {
    throw Error(map.key_location.str() + ": " + message);
  }

  std::string source_;
  int column_offset_;
  int documents_ = 0;
  ConfigNode root_;
  std::vector<Frame> open_;
  size_t nodes_ = 0;  // in the tree so far, aliases expanded
  // An anchored node and the size of its subtree, which each alias of it adds.
  struct Anchored {
    ConfigNode node;
    size_t nodes = 0;
  };
  std::map<YAML::anchor_t, Anchored> anchors_;
};

}  // namespace

ConfigNode ConfigBuilder::parse(const std::string& text, const std::string& source,
                                int column_offset) {
  std::istringstream stream(text);
  EventsToTree tree(source, column_offset);
  try {
    YAML::Parser parser(stream);
    // A second call reads on to a second document, which the handler rejects.
    if (parser.HandleNextDocument(tree)) parser.HandleNextDocument(tree);
  } catch (const YAML::Exception& e) {
    const std::string where = tree.location(e.mark).str();
    throw Error(where + ": " + e.msg);
  }
  assign_paths(tree.root(), "");
  return std::move(tree.root());
}

ConfigNode parse_config(const std::string& text, const std::string& source) {
  return ConfigBuilder::parse(text, source, 0);
}

}  // namespace crema
