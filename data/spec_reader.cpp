#include "data/spec_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace crema::data {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "none" : list;
}

}  // namespace

std::string number_text(double value) {
  char number[32];
  std::snprintf(number, sizeof(number), "%.7g", value);
  return number;
}

std::string list_text(const std::vector<float>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i > 0 ? ", " : "") + number_text(values[i]);
  }
  return text;
}

SpecReader::SpecReader(const TransformSpec& spec, const std::string& main,
                       const std::vector<std::string>& known,
                       const std::vector<std::string>& known_words)
    : spec_(spec), options_(spec.options) {
  std::vector<std::string> all = known;
  for (const std::string& name : known_words) {
    if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
  }
  for (const auto& [name, values] : options_) {
    if (std::find(all.begin(), all.end(), name) == all.end()) {
      fail("unknown option '" + name + "' (known: " + joined(all) + ")");
    }
  }
  for (const auto& [name, word] : spec.words) {
    if (std::find(known_words.begin(), known_words.end(), name) != known_words.end()) continue;
    if (std::find(all.begin(), all.end(), name) == all.end()) {
      fail("unknown option '" + name + "' (known: " + joined(all) + ")");
    }
    fail("'" + name + "' takes numbers, got '" + word + "'");
  }
  if (!spec.values.empty()) {
    if (main.empty()) fail("takes options only, e.g. {" + spec.kind + ": {" + all[0] + ": ...}}");
    if (has(main)) fail("'" + main + "' is given twice");
    options_[main] = spec.values;
  }
}

std::vector<float> SpecReader::get(const std::string& name, size_t min_count,
                                   size_t max_count) const {
  const auto found = options_.find(name);
  if (found == options_.end()) fail("needs '" + name + "'");
  const std::vector<float>& values = found->second;
  if (values.size() < min_count || values.size() > max_count) {
    fail("'" + name + "' has " + std::to_string(values.size()) + " values, expected " +
         (min_count == max_count ? std::to_string(min_count)
                                 : std::to_string(min_count) + " to " + std::to_string(max_count)));
  }
  for (float v : values) {
    if (!std::isfinite(v)) fail("'" + name + "' must be finite");
  }
  return values;
}

float SpecReader::probability(const std::string& name, float fallback) const {
  const float p = get_or(name, fallback);
  if (p < 0.0f || p > 1.0f) fail(name + " must lie in [0, 1], got " + number_text(p));
  return p;
}

int SpecReader::whole(const std::string& name, int lo, int hi, int fallback) const {
  const float v = get_or(name, float(fallback));
  if (v < float(lo) || v > float(hi) || v != std::floor(v)) {
    fail("'" + name + "' must be a whole number from " + std::to_string(lo) + " to " +
         std::to_string(hi) + ", got " + number_text(v));
  }
  return int(v);
}

std::string SpecReader::word(const std::string& name, const std::vector<std::string>& allowed,
                             const std::string& fallback) const {
  if (options_.count(name) > 0) fail("'" + name + "' takes a word (" + joined(allowed) + ")");
  const auto found = spec_.words.find(name);
  if (found == spec_.words.end()) return fallback;
  if (std::find(allowed.begin(), allowed.end(), found->second) == allowed.end()) {
    fail("'" + name + "' must be one of " + joined(allowed) + ", got '" + found->second + "'");
  }
  return found->second;
}

Size2 SpecReader::size(const std::string& name, bool& single) const {
  const std::vector<float> values = get(name, 1, 2);
  for (float v : values) {
    if (v < 1.0f || v != std::floor(v) || v > 65536.0f) {
      fail("'" + name + "' must be whole numbers of pixels from 1, got [" + list_text(values) +
           "]");
    }
  }
  single = values.size() == 1;
  return {int64_t(values[0]), int64_t(values.back())};
}

std::vector<float> SpecReader::range(const std::string& name, std::vector<float> fallback,
                                     float upper) const {
  std::vector<float> values = has(name) ? get(name, 2, 2) : std::move(fallback);
  if (!(values[0] > 0.0f && values[0] <= values[1] && (upper <= 0.0f || values[1] <= upper))) {
    fail("'" + name + "' must be [lo, hi] with 0 < lo <= hi" +
         (upper > 0.0f ? " <= " + number_text(upper) : std::string()) + ", got [" +
         list_text(values) + "]");
  }
  return values;
}

void SpecReader::fail(const std::string& message) const {
  throw Error("transform " + spec_.kind + ": " + message);
}

}  // namespace crema::data
