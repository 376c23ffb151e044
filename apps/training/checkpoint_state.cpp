// state.json: a checkpoint's TrainingState as JSON (apps/training/checkpoint.h says what it holds).
// Written by state_json_text, read back by read_state_json, which trusts nothing in the file: every
// field is read by its kind and range and a bad one is named.
#include "apps/training/checkpoint_state.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace crema {
namespace {

using nlohmann::ordered_json;

constexpr int kFormat = 1;

ordered_json state_to_json(const TrainingState& s) {
  ordered_json j = {
      {"format", kFormat},
      {"iteration", s.iteration},
      {"data",
       {{"position", s.data_position},
        {"epoch", s.batches_per_epoch > 0 ? s.data_position / s.batches_per_epoch : 0},
        {"index_in_epoch", s.batches_per_epoch > 0 ? s.data_position % s.batches_per_epoch : 0},
        {"batch_size", s.batch_size},
        {"batches_per_epoch", s.batches_per_epoch},
        {"iter_size", s.iter_size},
        {"seed", s.seed}}},
      {"rng", s.rng},
      {"loss_window",
       {{"sum", double(s.loss_sum)},
        {"iterations", s.window_iterations},
        {"images", s.window_images}}},
      {"test_pending", s.test_pending},
      {"rollbacks", {{"count", s.rollbacks}, {"lr_scale", s.lr_scale}}},
      {"best", nullptr},
      {"solver_type", s.solver_type},
      {"model", s.model},
      {"classes", s.classes}};
  if (s.loss_scale) {
    j["loss_scale"] = {{"scale", double(s.loss_scale->scale)},
                       {"good_steps", s.loss_scale->good_steps},
                       {"skipped", s.loss_scale->skipped}};
  }
  if (s.best) {
    j["best"] = {{"metric", s.best->metric},
                 {"mode", s.best->maximize ? "max" : "min"},
                 {"value", s.best->value},
                 {"iteration", s.best->iteration},
                 {"checkpoint", s.best->checkpoint}};
  }
  return j;
}

// Typed reads of state.json's fields. nlohmann's get<int64_t>() converts a JSON float with a
// static_cast, which is undefined when the value does not fit; crema writes every count as a JSON
// integer, so a field of another kind or out of range is refused with its name.
class StateFields {
 public:
  explicit StateFields(const std::string& path) : path_(path) {}

  const ordered_json& at(const ordered_json& object, const char* key) const {
    if (!object.is_object() || !object.contains(key)) throw bad(key, "is missing");
    return object.at(key);
  }
  int64_t integer(const ordered_json& object, const char* key, int64_t lo = INT64_MIN,
                  int64_t hi = INT64_MAX) const {
    const auto& v = at(object, key);
    const bool fits = v.is_number_unsigned()  ? v.get<uint64_t>() <= uint64_t(hi)
                      : v.is_number_integer() ? v.get<int64_t>() >= lo && v.get<int64_t>() <= hi
                                              : false;
    if (!fits) {
      throw bad(key, "is " + v.dump() + (lo == 0 ? ", not an integer >= 0" : ", not an integer"));
    }
    return v.get<int64_t>();
  }
  uint64_t unsigned_integer(const ordered_json& object, const char* key) const {
    const auto& v = at(object, key);
    if (!v.is_number_unsigned()) throw bad(key, "is " + v.dump() + ", not an unsigned integer");
    return v.get<uint64_t>();
  }
  double number(const ordered_json& object, const char* key) const {
    const auto& v = at(object, key);
    if (!v.is_number()) throw bad(key, "is " + v.dump() + ", not a number");
    return v.get<double>();
  }
  float single(const ordered_json& object, const char* key) const {
    const double d = number(object, key);
    if (!(std::fabs(d) <= double(std::numeric_limits<float>::max()))) {
      throw bad(key, "is " + at(object, key).dump() + ", outside float's range");
    }
    return float(d);
  }
  std::string text(const ordered_json& object, const char* key) const {
    const auto& v = at(object, key);
    if (!v.is_string()) throw bad(key, "is " + v.dump() + ", not a string");
    return v.get<std::string>();
  }
  bool boolean(const ordered_json& object, const char* key) const {
    const auto& v = at(object, key);
    if (!v.is_boolean()) throw bad(key, "is " + v.dump() + ", not true or false");
    return v.get<bool>();
  }

 private:
  Error bad(const char* key, const std::string& what) const {
    std::string shown = what.size() > 80 ? what.substr(0, 80) + "..." : what;
    return Error(path_ + ": not a complete checkpoint state ('" + key + "' " + shown + ")");
  }
  std::string path_;
};

}  // namespace

std::string state_json_text(const TrainingState& state) {
  return state_to_json(state).dump(2) + "\n";
}

TrainingState read_state_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open '" + path + "'");
  const ordered_json j = ordered_json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(path + ": not a checkpoint state (not JSON)");
  const StateFields f(path);
  if (!f.at(j, "format").is_number_integer() || f.integer(j, "format") != kFormat) {
    throw Error(path + ": checkpoint format " + j.at("format").dump() + ", this crema reads " +
                std::to_string(kFormat));
  }
  TrainingState s;
  s.iteration = f.integer(j, "iteration", 0);
  const auto& data = f.at(j, "data");
  s.data_position = f.integer(data, "position", 0);
  s.batch_size = f.integer(data, "batch_size");
  s.batches_per_epoch = f.integer(data, "batches_per_epoch");
  s.iter_size = int(f.integer(data, "iter_size", INT_MIN, INT_MAX));
  s.seed = f.unsigned_integer(data, "seed");
  s.rng = f.text(j, "rng");
  const auto& window = f.at(j, "loss_window");
  s.loss_sum = f.single(window, "sum");
  s.window_iterations = f.integer(window, "iterations");
  s.window_images = f.integer(window, "images");
  s.test_pending = f.boolean(j, "test_pending");
  if (j.contains("rollbacks")) {  // absent in checkpoints written before solver.on_nonfinite
    const auto& rollbacks = f.at(j, "rollbacks");
    s.rollbacks = f.integer(rollbacks, "count", 0);
    s.lr_scale = f.number(rollbacks, "lr_scale");
  }
  if (j.contains("loss_scale")) {  // only in runs that scale their loss
    const auto& scaler = f.at(j, "loss_scale");
    LossScaleState l;
    l.scale = f.single(scaler, "scale");
    if (!(l.scale > 0.0f)) throw Error(path + ": loss_scale.scale must be > 0");
    l.good_steps = f.integer(scaler, "good_steps", 0);
    l.skipped = f.integer(scaler, "skipped", 0);
    s.loss_scale = l;
  }
  s.solver_type = f.text(j, "solver_type");
  s.model = f.text(j, "model");
  if (j.contains("classes")) {
    const auto& classes = j.at("classes");
    if (!classes.is_array()) throw Error(path + ": 'classes' is not a list of names");
    for (const auto& c : classes) {
      if (!c.is_string()) throw Error(path + ": 'classes' holds " + c.dump() + ", not a name");
      s.classes.push_back(c.get<std::string>());
    }
  }
  const auto& best = f.at(j, "best");
  if (!best.is_null()) {
    s.best =
        BestMetric{f.text(best, "metric"), f.text(best, "mode") == "max", f.number(best, "value"),
                   f.integer(best, "iteration"), f.text(best, "checkpoint")};
  }
  if (!(s.lr_scale > 0.0 && s.lr_scale <= 1.0)) {
    throw Error(path + ": rollbacks.lr_scale must be in (0, 1]");
  }
  return s;
}

}  // namespace crema
