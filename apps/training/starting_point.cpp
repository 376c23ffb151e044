#include "apps/training/starting_point.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/serialization.h"

namespace crema::training {

namespace fs = std::filesystem;

StartingPoint load_starting_point(const RunOptions& options, Net& net, Solver& solver, Context& ctx,
                                  int64_t max_iter, TrainingState& state) {
  StartingPoint start;
  if (!options.weights.empty()) start.weights = copy_weights_by_name(net, options.weights);
  if (options.resume.empty()) {
    start.run_dir = options.out_dir.empty() ? "runs/" + options.name : options.out_dir;
    return start;
  }
  const std::string dir = find_checkpoint(options.resume);
  start.resumed = read_checkpoint(dir);
  const Checkpoint& resumed = *start.resumed;
  const TrainingState& saved = resumed.state;
  const std::string cannot = "cannot resume from " + dir + ": ";
  const std::string mismatch = tensor_mismatch(net_tensors(net), resumed.model);
  if (!mismatch.empty()) {
    throw Error(cannot + "it holds a different model (" + mismatch + "); to start a new run " +
                "from its weights, use --weights " + dir + "/model.safetensors");
  }
  restore_exactly(net_tensors(net), resumed.model, dir + "/model.safetensors",
                  "the model of " + options.config_path);
  check_same_run(saved, state, dir);
  if (saved.iteration >= max_iter) {
    throw Error(cannot + fmt::format("it has already run {} iterations and solver.max_iter is {}; "
                                     "raise it (--set ++solver.max_iter=N) to train further",
                                     saved.iteration, max_iter));
  }
  restore_exactly(solver.state(net.learnable_params(), ctx), resumed.solver,
                  dir + "/solver.safetensors", "the " + state.solver_type + " solver");
  restore_exactly(layer_state(net), resumed.layers, dir + "/layers.safetensors",
                  "the layers' run state");
  ctx.random().set_state(saved.rng);
  const std::string model = state.model;
  state = saved;
  state.model = model;
  start.run_dir = options.out_dir.empty() ? run_dir_of(dir) : options.out_dir;
  if (start.run_dir.empty()) {
    throw Error("--resume " + options.resume + ": the checkpoint is not inside a run " +
                "directory (<run>/checkpoints/<name>); give --out DIR for the continued run");
  }
  return start;
}

std::string weights_message(const std::string& path, const WeightsReport& report) {
  auto names = [](const std::vector<std::string>& list) {
    std::string text;
    for (const std::string& n : list) text += (text.empty() ? "" : ", ") + n;
    return text;
  };
  std::string text = fmt::format("weights from {}: copied {} tensors", path, report.copied);
  if (!report.notes.empty()) text += " (" + report.notes + ")";
  if (!report.missing.empty()) {
    text += "; not in the file, so they keep their fillers: " + names(report.missing);
  }
  if (!report.unused.empty()) {
    text += "; in the file but not in this model (ignored): " + names(report.unused);
  }
  return text;
}

bool open_run_dir(const std::string& run_dir, bool resumed, const std::string& config_path,
                  const std::string& resolved_yaml) {
  auto check = [&](const std::error_code& error, const std::string& what) {
    if (error) {
      throw Error("the run directory '" + run_dir + "' is not writable: " + what + ": " +
                  error.message());
    }
  };
  std::error_code error;
  fs::create_directories(run_dir, error);
  check(error, "cannot create it");
  if (!resumed) fs::remove(fs::path(run_dir) / "FAILED");  // left by a failed run of that name
  bool replaced = false;
  if (!resumed && fs::exists(fs::path(run_dir) / "checkpoints")) {
    // A new run under the name of an earlier one replaces it.
    const fs::path old = fs::path(run_dir) / ".trash-checkpoints";
    fs::remove_all(old, error);
    check(error, "cannot remove " + old.string());
    fs::rename(fs::path(run_dir) / "checkpoints", old, error);
    check(error, "cannot move the earlier run's checkpoints aside");
    fs::remove_all(old, error);
    check(error, "cannot remove " + old.string());
    replaced = true;
  }
  try {
    write_file_atomic(run_dir + "/config.yaml",
                      "# resolved from " + config_path + "\n" + resolved_yaml + "\n");
  } catch (const Error& e) {
    throw Error("the run directory '" + run_dir + "' is not writable: " + e.what());
  }
  return replaced;
}

}  // namespace crema::training
