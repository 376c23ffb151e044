// ConfigNode's questions (typed values, keys, lists), unknown-key checks, and YAML emission.
// Parsing lives in config_parse.cpp; `_base_` and `--set` in config_load.cpp.
#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "core/config_builder.h"
#include "core/error.h"

namespace crema {
namespace {

// "solver.base_lr: " before a message about a node, nothing for the root.
std::string subject(const ConfigNode& node) {
  return node.path().empty() ? std::string() : node.path() + ": ";
}

[[noreturn]] void expected(const ConfigNode& node, const std::string& what) {
  node.fail(subject(node) + "expected " + what + ", got " + describe(node));
}

const std::string& scalar_text(const ConfigNode& node, const std::string& what) {
  if (!node.is_scalar()) expected(node, what);
  return node.scalar();
}

void require_map(const ConfigNode& node) {
  if (!node.is_map()) expected(node, "a map");
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// std::from_chars reads the locale-independent number syntax but takes no leading '+'.
const char* skip_plus(const std::string& text) {
  const char* first = text.data();
  if (text.size() > 1 && first[0] == '+' && first[1] != '-') ++first;
  return first;
}

// Decimal integers only, optional sign: "3.5", "1e3" and "0x10" are errors, not truncated.
template <class Int>
Int parse_integer(const ConfigNode& node) {
  const std::string& text = scalar_text(node, "an integer");
  const char* first = skip_plus(text);
  const char* last = text.data() + text.size();
  Int value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  if (error == std::errc::result_out_of_range) {
    node.fail(subject(node) + "integer '" + text + "' is out of range [" +
              std::to_string(std::numeric_limits<Int>::min()) + ", " +
              std::to_string(std::numeric_limits<Int>::max()) + "]");
  }
  if (error != std::errc() || end != last) expected(node, "an integer");
  return value;
}

template <class Real>
Real parse_real(const ConfigNode& node) {
  const std::string& text = scalar_text(node, "a number");
  const std::string bare = lowercase(text[0] == '+' || text[0] == '-' ? text.substr(1) : text);
  if (bare == ".inf" || bare == ".nan" || bare == "inf" || bare == "nan" || bare == "infinity") {
    expected(node, "a finite number");
  }
  const char* first = skip_plus(text);
  const char* last = text.data() + text.size();
  double value = 0;
  const auto [end, error] = std::from_chars(first, last, value, std::chars_format::general);
  const bool fits = std::fabs(value) <= static_cast<double>(std::numeric_limits<Real>::max());
  if (error == std::errc::result_out_of_range || (error == std::errc() && !fits)) {
    node.fail(subject(node) + "number '" + text + "' is out of range");
  }
  if (error != std::errc() || end != last) expected(node, "a number");
  return static_cast<Real>(value);
}

// Levenshtein distance: the fewest single-character insertions, deletions and substitutions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

bool is_leaf(const ConfigNode& node) {
  return node.is_null() || node.is_scalar();
}

// The length of `node` written on one line, or npos when it holds a map or a nested list.
size_t one_line_length(const ConfigNode& node) {
  constexpr size_t npos = std::string::npos;
  if (is_leaf(node)) return node.is_null() ? 1 : node.scalar().size();
  size_t length = 2;  // the brackets
  if (node.is_sequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (!is_leaf(node[i])) return npos;
      length += one_line_length(node[i]) + 2;
    }
    return length;
  }
  for (const auto& entry : ConfigBuilder::entries(node)) {
    if (entry.value.is_map()) return npos;
    const size_t value = one_line_length(entry.value);
    if (value == npos) return npos;
    length += entry.key.size() + 2 + value + 2;
  }
  return length;
}

// Lists of scalars go on one line (`bottom: [ip2, label]`), and so do short maps of scalars and
// such lists (`weight_filler: {type: xavier}`); everything else is written as a block. The maps
// of one list (the layers) are all written alike: on one line only if every one of them fits.
void emit(YAML::Emitter& out, const ConfigNode& node, bool map_on_one_line_if_short = true) {
  constexpr size_t kOneLineMap = 60;
  switch (node.kind()) {
    case ConfigNode::Kind::null:
      out << YAML::Null;
      return;
    case ConfigNode::Kind::scalar:
      out << node.scalar();
      return;
    case ConfigNode::Kind::sequence: {
      if (one_line_length(node) != std::string::npos) out << YAML::Flow;
      bool all_maps_short = true;
      for (size_t i = 0; i < node.size(); ++i) {
        all_maps_short =
            all_maps_short && (!node[i].is_map() || one_line_length(node[i]) <= kOneLineMap);
      }
      out << YAML::BeginSeq;
      for (size_t i = 0; i < node.size(); ++i) emit(out, node[i], all_maps_short);
      out << YAML::EndSeq;
      return;
    }
    case ConfigNode::Kind::map:
      if (map_on_one_line_if_short && one_line_length(node) <= kOneLineMap) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& entry : ConfigBuilder::entries(node)) {
        out << YAML::Key << entry.key << YAML::Value;
        emit(out, entry.value);
      }
      out << YAML::EndMap;
      return;
  }
}

}  // namespace

std::string describe(const ConfigNode& node) {
  switch (node.kind()) {
    case ConfigNode::Kind::null:
      return "null";
    case ConfigNode::Kind::scalar:
      return "'" + node.scalar() + "'";
    case ConfigNode::Kind::sequence:
      return "a list";
    case ConfigNode::Kind::map:
      return "a map";
  }
  return "?";
}

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) joined += (i ? separator : "") + words[i];
  return joined;
}

std::string Location::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

ConfigNode ConfigNode::make_scalar(std::string value, Location location, std::string path) {
  ConfigNode node = ConfigBuilder::make(Kind::scalar, std::move(location));
  node.scalar_ = std::move(value);
  node.path_ = std::move(path);
  return node;
}

void ConfigNode::fail(const std::string& message) const {
  const std::string where = location_.str();
  throw Error(where.empty() ? message : where + ": " + message);
}

const std::string& ConfigNode::scalar() const {
  if (!is_scalar()) expected(*this, "a scalar");
  return scalar_;
}

template <class T>
T ConfigNode::as() const {
  if constexpr (std::is_same_v<T, bool>) {
    const std::string text = lowercase(scalar_text(*this, "true or false"));
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
    expected(*this, "true or false");
  } else if constexpr (std::is_integral_v<T>) {
    return parse_integer<T>(*this);
  } else if constexpr (std::is_floating_point_v<T>) {
    return parse_real<T>(*this);
  } else {
    static_assert(std::is_same_v<T, std::string>,
                  "as<T>: bool, int, int64_t, float, double, string");
    return scalar();
  }
}

// The types readers may ask for (config.h); other TUs link against these.
template bool ConfigNode::as<bool>() const;
template int ConfigNode::as<int>() const;
template int64_t ConfigNode::as<int64_t>() const;
template float ConfigNode::as<float>() const;
template double ConfigNode::as<double>() const;
template std::string ConfigNode::as<std::string>() const;

bool ConfigNode::has(const std::string& key) const {
  known_keys_.insert(key);
  if (is_null()) return false;
  require_map(*this);
  return std::any_of(map_.begin(), map_.end(), [&](const MapEntry& e) { return e.key == key; });
}

const ConfigNode& ConfigNode::at(const std::string& key) const {
  known_keys_.insert(key);
  if (!is_null()) {
    require_map(*this);
    for (const MapEntry& entry : map_) {
      if (entry.key == key) return entry.value;
    }
  }
  const std::string typo = misspelling_of(key);
  if (!typo.empty()) {
    fail_at_key(typo, "unknown key '" + typo + "' in " +
                          (path().empty() ? std::string("the config") : path()) +
                          " (did you mean '" + key + "'? it is required)");
  }
  fail(subject(*this) + "missing required key '" + key + "'");
}

std::string ConfigNode::misspelling_of(const std::string& key) const {
  if (!is_map()) return "";
  for (const MapEntry& entry : map_) {
    if (known_keys_.count(entry.key) == 0 && closest_match(entry.key, {key}) == key) {
      return entry.key;
    }
  }
  return "";
}

void ConfigNode::fail_at_key(const std::string& key, const std::string& message) const {
  for (const MapEntry& entry : map_) {
    if (entry.key != key) continue;
    const std::string where = entry.key_location.str();
    throw Error(where.empty() ? message : where + ": " + message);
  }
  fail(message);
}

template <class T>
std::vector<T> ConfigNode::get_list(const std::string& key) const {
  const ConfigNode& node = at(key);
  if (node.is_scalar()) return {node.as<T>()};
  if (!node.is_sequence()) expected(node, "a value or a list of values");
  std::vector<T> values;
  for (const ConfigNode& element : node.sequence_) values.push_back(element.as<T>());
  return values;
}

template std::vector<bool> ConfigNode::get_list<bool>(const std::string&) const;
template std::vector<int> ConfigNode::get_list<int>(const std::string&) const;
template std::vector<int64_t> ConfigNode::get_list<int64_t>(const std::string&) const;
template std::vector<float> ConfigNode::get_list<float>(const std::string&) const;
template std::vector<double> ConfigNode::get_list<double>(const std::string&) const;
template std::vector<std::string> ConfigNode::get_list<std::string>(const std::string&) const;

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> names;
  if (is_null()) return names;
  require_map(*this);
  for (const MapEntry& entry : map_) names.push_back(entry.key);
  return names;
}

void ConfigNode::allow(const std::string& key) const {
  known_keys_.insert(key);
}

void ConfigNode::check_no_unknown_keys(const std::string& what) const {
  if (!is_map()) return;
  const std::vector<std::string> known(known_keys_.begin(), known_keys_.end());
  for (const MapEntry& entry : map_) {
    if (known_keys_.count(entry.key)) continue;
    std::string message = "unknown key '" + entry.key + "' in " + what;
    const std::string suggestion = closest_match(entry.key, known);
    if (!suggestion.empty()) {
      message += " (did you mean '" + suggestion + "'?)";
    } else if (known.empty()) {
      message += " (it takes no keys)";
    } else {
      message += " (known keys: " + join(known, ", ") + ")";
    }
    const std::string where = entry.key_location.str();
    throw Error(where.empty() ? message : where + ": " + message);
  }
}

size_t ConfigNode::size() const {
  if (is_null()) return 0;
  if (!is_sequence()) expected(*this, "a list");
  return sequence_.size();
}

const ConfigNode& ConfigNode::operator[](size_t index) const {
  if (index >= size()) {
    fail(subject(*this) + "index " + std::to_string(index) + " is out of range (the list has " +
         std::to_string(size()) + " elements)");
  }
  return sequence_[index];
}

std::string ConfigNode::to_yaml() const {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, *this);
  CREMA_CHECK(out.good(), "YAML emitter: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

// Case is ignored ("relu" finds "ReLU"). A candidate is close when it is at most
// max(2, |word|/3) edits away and keeps something of the word (fewer edits than its length, so
// "x" does not suggest "lr"), or when it begins with the word and the word has 3 characters or
// more ("Pool" finds "Pooling"). The closest wins; ties go to the first.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.empty()) return "";
  const std::string lower_word = lowercase(word);
  const size_t limit = std::min(std::max<size_t>(2, word.size() / 3), word.size() - 1);
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : candidates) {
    const std::string lower = lowercase(candidate);
    const size_t distance = edit_distance(lower_word, lower);
    const bool prefix = word.size() >= 3 && lower.compare(0, lower_word.size(), lower_word) == 0;
    if ((distance <= limit || prefix) && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace crema
