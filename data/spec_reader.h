// Reading a TransformSpec's values by option name, shared by make_transform's branches
// (transform.cpp, augment.cpp, auto_augment.cpp): unknown options, counts, ranges and words are
// checked here, and every error says "transform <kind>: ..." with the option's name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/transform.h"

namespace crema::data {

// "0.5", "1e-05": a number as a message or a description shows it (%.7g).
std::string number_text(double value);
// "1, 2.5, 3": numbers joined by ", ".
std::string list_text(const std::vector<float>& values);

// A spec's values by option name; the main value counts as the option `main` ("size", "p").
class SpecReader {
 public:
  // `known`: the kind's numeric options; `known_words`: those that take a word.
  SpecReader(const TransformSpec& spec, const std::string& main,
             const std::vector<std::string>& known,
             const std::vector<std::string>& known_words = {});

  bool has(const std::string& name) const {
    return options_.count(name) > 0 || spec_.words.count(name) > 0;
  }
  // Whether `name` was given as a word rather than numbers.
  bool has_word(const std::string& name) const { return spec_.words.count(name) > 0; }
  // The values of `name`, which must hold between `min_count` and `max_count` finite values.
  std::vector<float> get(const std::string& name, size_t min_count, size_t max_count) const;
  // One value, `fallback` when absent.
  float get_or(const std::string& name, float fallback) const {
    return has(name) ? get(name, 1, 1)[0] : fallback;
  }
  // A probability in [0, 1], `fallback` when absent.
  float probability(const std::string& name, float fallback) const;
  // A whole number in [lo, hi], `fallback` when absent.
  int whole(const std::string& name, int lo, int hi, int fallback) const;
  // The word given for `name`, one of `allowed`; `fallback` when absent.
  std::string word(const std::string& name, const std::vector<std::string>& allowed,
                   const std::string& fallback) const;
  // A size: one positive whole number (a square, or resize's shorter side) or [h, w].
  Size2 size(const std::string& name, bool& single) const;
  // A [lo, hi] range with 0 < lo <= hi (<= upper when upper > 0).
  std::vector<float> range(const std::string& name, std::vector<float> fallback, float upper) const;
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const TransformSpec& spec_;
  std::map<std::string, std::vector<float>> options_;
};

}  // namespace crema::data
