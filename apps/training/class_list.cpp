#include "apps/training/class_list.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxClassFileBytes = 16u << 20;

// The whole of a small text file; throws crema::Error naming it.
std::string read_small_file(const fs::path& path) {
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) throw Error("cannot read '" + path.string() + "': " + error.message());
  if (size > kMaxClassFileBytes) {
    throw Error(path.string() + ": " + std::to_string(size) +
                " bytes is more than a class list can be (16 MiB)");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(size_t(size), '\0');
  if (!in || !in.read(text.data(), std::streamsize(size))) {
    throw Error("cannot read '" + path.string() + "'");
  }
  return text;
}

void check_unique(const std::vector<std::string>& names, const std::string& origin) {
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) throw Error(origin + ": class '" + name + "' is listed twice");
  }
}

// A source without class names has its labels as names ("0", "1", ...; after `classes: [5, 7]`,
// "5", "7"): such a list says nothing about what a label means, so it is not compared by name.
bool only_numbers(const std::vector<std::string>& names) {
  return std::all_of(names.begin(), names.end(), [](const std::string& name) {
    return !name.empty() && std::all_of(name.begin(), name.end(),
                                        [](unsigned char c) { return std::isdigit(c) != 0; });
  });
}

}  // namespace

ClassList read_class_file(const std::string& path) {
  const std::string text = read_small_file(path);
  ClassList list{{}, path};
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    list.names.push_back(line);
  }
  while (!list.names.empty() && list.names.back().empty()) list.names.pop_back();
  if (list.names.empty()) throw Error(path + ": no class names (one name per line)");
  check_unique(list.names, path);
  return list;
}

ClassList classes_of_weights(const std::string& weights) {
  const fs::path dir = fs::absolute(weights).parent_path();
  const fs::path state = dir / "state.json";
  if (fs::is_regular_file(state) && fs::file_size(state) <= kMaxClassFileBytes) {
    const auto json = nlohmann::json::parse(read_small_file(state), nullptr, false);
    if (json.is_object() && json.contains("classes") && json["classes"].is_array()) {
      ClassList list{{}, state.string()};
      for (const auto& name : json["classes"]) {
        if (!name.is_string()) throw Error(state.string() + ": classes must be strings");
        list.names.push_back(name.get<std::string>());
      }
      if (!list.names.empty()) return list;
    }
  }
  fs::path here = dir;
  for (int up = 0; up < 3 && !here.empty(); ++up, here = here.parent_path()) {
    if (fs::is_regular_file(here / "classes.txt")) return read_class_file(here / "classes.txt");
    if (here == here.parent_path()) break;
  }
  return {};
}

std::string list_text(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names.size() > 12 && i == 6) {
      text += ", ... (" + std::to_string(names.size() - 10) + " more)";
      i = names.size() - 4;
    }
    text += (i == 0 ? "" : ", ") + names[i];
  }
  return "[" + text + "]";
}

std::shared_ptr<const data::Dataset> align_classes(std::shared_ptr<const data::Dataset> source,
                                                   const ClassList& trained) {
  const std::vector<std::string> mine = data::class_list(*source);
  if (mine == trained.names || only_numbers(mine) || only_numbers(trained.names)) return source;
  for (const std::string& name : mine) {
    if (std::find(trained.names.begin(), trained.names.end(), name) == trained.names.end()) {
      throw Error("the classes of " + source->description() + " " + list_text(mine) +
                  " are not those of " + trained.origin + " " + list_text(trained.names) +
                  ": it has '" + name + "', which the run was not trained on");
    }
  }
  return data::relabel_by_name(std::move(source), trained.names);
}

void check_finetune_classes(const ClassList& weights, const ClassList& train) {
  if (weights.names.empty() || weights.names.size() != train.names.size() ||
      weights.names == train.names || only_numbers(weights.names) || only_numbers(train.names)) {
    return;
  }
  throw Error("the weights were trained on the classes " + list_text(weights.names) + " (" +
              weights.origin + ") but " + train.origin + " has " + list_text(train.names) +
              ": as many classes, other names or order, so the copied classifier's outputs would "
              "mean other classes; rename the classifier layer to train a new one, or order the "
              "train classes as the weights' (source key classes: [...])");
}

}  // namespace crema
