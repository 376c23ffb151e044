#include "apps/training/train_settings.h"

#include <algorithm>
#include <string>

namespace crema {
namespace {

int64_t non_negative(const ConfigNode& solver, const std::string& key, int64_t fallback) {
  const int64_t value = solver.get<int64_t>(key, fallback);
  if (value < 0) solver.at(key).fail("solver." + key + " must not be negative");
  return value;
}

void read_nonfinite_settings(const ConfigNode& solver, LoopSettings& s) {
  const std::string mode = solver.get<std::string>("on_nonfinite", "stop");
  if (mode == "stop") {
    s.on_nonfinite = OnNonfinite::stop;
  } else if (mode == "skip") {
    s.on_nonfinite = OnNonfinite::skip;
  } else if (mode == "rollback") {
    s.on_nonfinite = OnNonfinite::rollback;
  } else {
    solver.at("on_nonfinite")
        .fail("solver.on_nonfinite is stop, skip or rollback, got '" + mode + "'");
  }
  s.rollback_lr_factor = solver.get<double>("rollback_lr_factor", 0.5);
  if (!(s.rollback_lr_factor > 0.0 && s.rollback_lr_factor <= 1.0)) {
    solver.at("rollback_lr_factor")
        .fail(
            "solver.rollback_lr_factor must be in (0, 1]: each rollback multiplies the "
            "learning rate by it");
  }
  s.max_rollbacks = non_negative(solver, "max_rollbacks", 3);
}

}  // namespace

LoopSettings read_loop_settings(const ConfigNode& solver, int64_t batches_per_epoch) {
  LoopSettings s;
  if (solver.has("max_iter")) {
    s.max_iter = solver.get<int64_t>("max_iter");
    solver.allow("max_epochs");
  } else {
    const int64_t iter_size = std::max<int64_t>(1, solver.get<int64_t>("iter_size", 1));
    s.max_iter = solver.get<int64_t>("max_epochs") * batches_per_epoch / iter_size;
  }
  if (s.max_iter <= 0) {
    solver.fail("solver: the run must have at least one iteration (max_iter or max_epochs)");
  }
  s.test_interval = non_negative(solver, "test_interval", 0);
  s.display = std::max<int64_t>(1, non_negative(solver, "display", 100));
  if (solver.has("snapshot")) {
    solver.at("snapshot").fail("solver.snapshot: crema calls Caffe's key snapshot_interval");
  }
  s.snapshot_interval = non_negative(solver, "snapshot_interval", 0);
  s.keep_best = solver.get<std::string>("keep_best", "");
  const std::string fallback = s.keep_best.find("loss") != std::string::npos ? "min" : "max";
  const std::string mode = solver.get<std::string>("keep_best_mode", fallback);
  if (mode != "min" && mode != "max") {
    solver.at("keep_best_mode").fail("solver.keep_best_mode is min or max, got '" + mode + "'");
  }
  s.keep_best_max = mode == "max";
  s.cuda_graph = solver.get<bool>("cuda_graph", true);
  read_nonfinite_settings(solver, s);
  const std::string on_write_error = solver.get<std::string>("on_write_error", "stop");
  if (on_write_error != "stop" && on_write_error != "continue") {
    solver.at("on_write_error")
        .fail("solver.on_write_error is stop or continue, got '" + on_write_error + "'");
  }
  s.on_write_error = on_write_error == "stop" ? OnWriteError::stop : OnWriteError::keep_going;
  return s;
}

}  // namespace crema
