#include "apps/training/checkpoint.h"
#include "apps/training/checkpoint_state.h"
#include "apps/training/class_list.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/serialization.h"
#include "core/weights_file.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

void pause_for_tests() {
  if (const char* ms = std::getenv("CREMA_TEST_CHECKPOINT_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
  }
}

// The iteration of a checkpoint directory name "iter_000500", or -1.
int64_t iteration_of(const std::string& name) {
  if (name.rfind("iter_", 0) != 0 || name.size() == 5) return -1;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
  }
  return std::stoll(name.substr(5));
}

NamedTensors on_host(const NamedTensors& tensors) {
  NamedTensors host;
  for (const auto& [name, t] : tensors) {
    Tensor copy(t.shape(), t.dtype());
    copy.copy_from(t);
    host.emplace_back(name, std::move(copy));
  }
  return host;
}

// Throws CheckpointWriteError for a failed filesystem call: "<what> '<path>' failed: <reason>".
void check(const std::error_code& error, const std::string& what, const fs::path& path) {
  if (error) {
    throw CheckpointWriteError(what + " '" + path.string() + "' failed: " + error.message());
  }
}

// Removes `path` and all below it; the error of a removal, not its absence, is a failure.
void remove_tree(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  check(error, "removing", path);
}

// Makes dir/link point to `target` (a name in dir), replacing the old link in one rename.
void point_link(const fs::path& dir, const std::string& link, const std::string& target) {
  const fs::path temp = dir / (".tmp-link-" + link);
  std::error_code error;
  fs::remove(temp, error);
  check(error, "removing", temp);
  fs::create_directory_symlink(target, temp, error);
  check(error, "creating the link", temp);
  fs::rename(temp, dir / link, error);
  check(error, "renaming the link", temp);
}

// Removes a directory so that it never looks like a checkpoint half-way: rename, then delete.
void discard(const fs::path& dir, const std::string& name) {
  const fs::path trash = dir / (".trash-" + name);
  remove_tree(trash);
  std::error_code error;
  fs::rename(dir / name, trash, error);
  check(error, "renaming", dir / name);
  remove_tree(trash);
}

// sync_directory, its failure a CheckpointWriteError.
void sync_directory_or_throw(const fs::path& dir) {
  try {
    sync_directory(dir.string());
  } catch (const Error& e) {
    throw CheckpointWriteError(e.what());
  }
}

// The files of a checkpoint into `temp`, each written atomically, then `temp` itself synced.
void write_files(const fs::path& temp, const Net& net, const NamedTensors& solver_state,
                 const NamedTensors& layer_state, const std::string& state_json) {
  std::error_code error;
  fs::create_directory(temp, error);
  check(error, "creating the directory", temp);
  try {
    net.save_weights((temp / "model.safetensors").string());
    pause_for_tests();
    save_safetensors((temp / "solver.safetensors").string(), on_host(solver_state));
    pause_for_tests();
    save_safetensors((temp / "layers.safetensors").string(), on_host(layer_state));
    write_file_atomic((temp / "state.json").string(), state_json);
    pause_for_tests();
    sync_directory(temp.string());
  } catch (const DeviceError&) {
    throw;
  } catch (const Error& e) {  // core/serialization.h's write errors name the file and reason
    throw CheckpointWriteError(e.what());
  }
}

std::string join_some(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 4; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > 4) out += fmt::format(" and {} more", items.size() - 4);
  return out;
}

const Tensor& checked_f32(const std::string& source, const std::string& name, const Tensor& t) {
  if (t.dtype() != DType::f32) {
    throw Error(source + ": tensor '" + name + "' is " + dtype_name(t.dtype()) +
                " but crema's parameters and state are f32");
  }
  return t;
}

// The first line where two YAML texts differ, for the "different model" message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = bool(std::getline(sa, la)), more_b = bool(std::getline(sb, lb));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || la != lb) {
      return fmt::format("model line {}: '{}' there, '{}' here", line, more_a ? la : "",
                         more_b ? lb : "");
    }
  }
}

}  // namespace

std::string write_checkpoint(const std::string& run_dir, const Net& net,
                             const NamedTensors& solver_state, const NamedTensors& layer_state,
                             const TrainingState& state) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  std::error_code error;
  fs::create_directories(dir, error);
  check(error, "creating the directory", dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0 || name.rfind(".trash-", 0) == 0) remove_tree(entry.path());
  }
  const std::string name = fmt::format("iter_{:06d}", state.iteration);
  const fs::path temp = dir / (".tmp-" + name);
  try {
    write_files(temp, net, solver_state, layer_state, state_json_text(state));
    if (fs::exists(dir / name)) discard(dir, name);  // the same iteration again, after a resume
    fs::rename(temp, dir / name, error);
    check(error, "renaming", temp);
  } catch (const CheckpointWriteError&) {
    fs::remove_all(temp, error);  // its space back; a leftover is cleared by the next write
    throw;
  }
  sync_directory_or_throw(dir);
  point_link(dir, "last", name);
  const bool best_here = state.best && fs::exists(dir / state.best->checkpoint);
  if (best_here) {
    point_link(dir, "best", state.best->checkpoint);
  } else {
    fs::remove(dir / "best", error);
    check(error, "removing", dir / "best");
  }
  sync_directory_or_throw(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string other = entry.path().filename().string();
    if (iteration_of(other) >= 0 && other != name &&
        !(best_here && other == state.best->checkpoint)) {
      discard(dir, other);
    }
  }
  sync_directory_or_throw(dir);
  return (dir / name).string();
}

std::string find_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "state.json")) return fs::canonical(p).string();
  const fs::path dir = p / "checkpoints";
  if (!fs::is_directory(dir)) {
    throw Error("--resume " + path +
                ": neither a checkpoint (a directory with state.json) nor a "
                "run directory with checkpoints/");
  }
  if (fs::exists(dir / "last" / "state.json")) return fs::canonical(dir / "last").string();
  int64_t newest = -1;
  std::string found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const int64_t it = iteration_of(entry.path().filename().string());
    if (it > newest && fs::exists(entry.path() / "state.json")) {
      newest = it, found = entry.path().string();
    }
  }
  if (found.empty()) throw Error("--resume " + path + ": " + dir.string() + " holds no checkpoint");
  return fs::canonical(found).string();
}

Checkpoint read_checkpoint(const std::string& dir) {
  Checkpoint c;
  c.dir = dir;
  c.state = read_state_json(dir + "/state.json");
  auto load = [&](const std::string& file) {
    Widened widened;
    NamedTensors tensors = load_safetensors(dir + "/" + file, &widened);
    if (!widened.text().empty()) {
      c.notes += (c.notes.empty() ? "" : "; ") + file + ": " + widened.text();
    }
    return tensors;
  };
  c.model = load("model.safetensors");
  c.solver = load("solver.safetensors");
  c.layers = load("layers.safetensors");
  return c;
}

std::string run_dir_of(const std::string& checkpoint_dir) {
  const fs::path p = fs::canonical(checkpoint_dir);
  return p.parent_path().filename() == "checkpoints" ? p.parent_path().parent_path().string() : "";
}

NamedTensors layer_state(Net& net) {
  NamedTensors out;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    for (auto& [role, t] : net.layer(i).run_state()) {
      out.emplace_back(net.layer(i).name() + "." + role, t);
    }
  }
  return out;
}

NamedTensors net_tensors(Net& net) {
  NamedTensors out;
  for (Param* p : net.learnable_params()) out.emplace_back(p->name, p->value);
  for (Buffer* b : net.buffers()) out.emplace_back(b->name, b->value);
  return out;
}

std::string tensor_mismatch(const NamedTensors& targets, const NamedTensors& saved) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &t;
  std::vector<std::string> missing, wrong_shape;
  for (const auto& [name, t] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    if (it->second->shape() != t.shape()) {
      wrong_shape.push_back(name + " is " + shape_str(it->second->shape()) + " there but " +
                            shape_str(t.shape()) + " here");
    }
    by_name.erase(it);
  }
  std::vector<std::string> unexpected;
  for (const auto& entry : by_name) unexpected.push_back(entry.first);
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (!wrong_shape.empty()) add(join_some(wrong_shape));
  if (!missing.empty()) add("it lacks " + join_some(missing));
  if (!unexpected.empty()) add("it has no place here for " + join_some(unexpected));
  return text;
}

void restore_exactly(const NamedTensors& targets, const NamedTensors& saved,
                     const std::string& source, const std::string& what) {
  const std::string mismatch = tensor_mismatch(targets, saved);
  if (!mismatch.empty()) throw Error(source + " does not fit " + what + ": " + mismatch);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &checked_f32(source, name, t);
  for (const auto& [name, t] : targets) {
    Tensor target = t;
    target.copy_from(*by_name.at(name));
  }
}

bool is_optional_buffer(const std::string& name) {
  const std::string suffix = ".num_batches_tracked";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_all_weights(const std::string& path, const WeightsReport& report) {
  std::string names;
  for (const std::string& n : report.missing) {
    if (!is_optional_buffer(n)) names += (names.empty() ? "" : ", ") + n;
  }
  if (!names.empty()) throw Error(path + " lacks " + names + ", which the model needs");
}

WeightsReport copy_weights_by_name(Net& net, const std::string& path) {
  const WeightsFile file = read_weights_file(path);
  const NamedTensors& saved = file.tensors;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &t;
  WeightsReport report;
  report.notes = file.notes;
  const NamedTensors targets = net_tensors(net);
  for (const auto& [name, t] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      report.missing.push_back(name);
      continue;
    }
    // PyTorch keeps num_batches_tracked as a scalar [], crema as [1].
    const bool scalar_for_one =
        is_optional_buffer(name) && it->second->shape().empty() && shape_numel(t.shape()) == 1;
    if (it->second->shape() != t.shape() && !scalar_for_one) {
      const std::string layer = name.substr(0, name.rfind('.'));
      throw Error(path + ": tensor '" + name + "' is " + shape_str(it->second->shape()) +
                  " but layer '" + layer + "' expects " + shape_str(t.shape()) +
                  " (rename the layer, e.g. '" + layer +
                  "_new', to train it from its filler "
                  "instead of loading it)");
    }
    checked_f32(path, name, *it->second);
    by_name.erase(it);
  }
  for (const auto& entry : by_name) report.unused.push_back(entry.first);
  // Copy only after every check passed: an error leaves the net as it was.
  std::map<std::string, const Tensor*> all;
  for (const auto& [name, t] : saved) all[name] = &t;
  for (const auto& [name, t] : targets) {
    auto it = all.find(name);
    if (it == all.end()) continue;
    Tensor target = t;
    target.copy_from(*it->second);
    ++report.copied;
  }
  return report;
}

void check_same_run(const TrainingState& saved, const TrainingState& now, const std::string& dir) {
  const std::string cannot = "cannot resume from " + dir + ": ";
  if (saved.model != now.model) {
    throw Error(cannot + "it was trained with a different model (" +
                first_difference(saved.model, now.model) + "); to start a new run from its " +
                "weights, use --weights " + dir + "/model.safetensors");
  }
  auto same = [&](const char* what, auto there, auto here) {
    if (there != here) {
      throw Error(cannot + fmt::format("it was trained with {} {}, the config now gives {} (a "
                                       "resumed run must see the same data order)",
                                       what, there, here));
    }
  };
  same("seed", saved.seed, now.seed);
  same("data.train.batch_size", saved.batch_size, now.batch_size);
  same("batches per epoch", saved.batches_per_epoch, now.batches_per_epoch);
  same("solver.iter_size", saved.iter_size, now.iter_size);
  if (saved.solver_type != now.solver_type) {
    throw Error(cannot + "its solver is " + saved.solver_type + " but solver.type is now " +
                now.solver_type + "; to switch solvers, start a new run with --weights " + dir +
                "/model.safetensors");
  }
  if (!saved.classes.empty() && saved.classes != now.classes) {
    throw Error(cannot + "it was trained on the classes " + list_text(saved.classes) +
                " but the train source now has " + list_text(now.classes) +
                " (a label would mean another class)");
  }
}

}  // namespace crema
