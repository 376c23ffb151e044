// The training loop: training::run and the step, the one file of apps/training a step passes
// through on its way from `crema train` to the kernels.
//
// Order of work, so that bad input never damages a run on disk: read the config, build the
// loaders, nets and solver, then load --weights or the --resume checkpoint and check that it
// fits (model, seed, batch size, solver); only then is the run directory written to.
//
// One iteration is iter_size forward/backward passes (gradients accumulate) and one solver step.
// After it, in this order: the display line (every solver.display iterations), a test pass
// (every solver.test_interval), a checkpoint (every solver.snapshot_interval, at a new best test
// metric, at Ctrl-C), so a checkpoint holds the test that preceded it.
//
// Exact resume: a checkpoint holds everything the next iterations depend on -- weights, buffers,
// solver state, the iteration (the learning rate and Adam's step follow from it), the position
// in the data stream (a pure function of seed, epoch and index, see data/loader.h), the random
// generator's state and the display window still open -- so on the CPU a resumed run logs the
// same losses, bit for bit, as one that was never interrupted.
//
// A loss or gradient that is not finite stops the run, skips the step or rolls back to the last
// checkpoint (solver.on_nonfinite): divergence.h says how it is detected and named.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "apps/training/checkpoint.h"
#include "apps/training/class_list.h"
#include "apps/training/data_config.h"
#include "apps/training/divergence.h"
#include "apps/training/evaluation.h"
#include "apps/training/input_feeder.h"
#include "apps/training/interrupt.h"
#include "apps/training/progress.h"
#include "apps/training/run_log.h"
#include "apps/training/starting_point.h"
#include "apps/training/train_settings.h"
#include "apps/training/training.h"
#include "core/config.h"
#include "core/error.h"
#include "core/net.h"
#include "core/registry.h"
#include "core/serialization.h"
#include "kernels/convolution/select.h"
#include "kernels/elementwise/elementwise.h"
#include "optim/param_groups.h"
#include "optim/solver.h"

namespace crema::training {
namespace {

// An instantiated CUDA graph of the training step, destroyed with the run.
struct StepGraph {
  gpu::Graph exec = nullptr;
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph() { gpu::destroy_graph(exec); }
};

class TrainingRun {
 public:
  TrainingRun(const ConfigNode& config, Context& ctx, const LayerRegistry& layers,
              const RunOptions& options, std::ostream& out);
  TrainSummary run();
  // A run that ends with an error, or diverges, before its first checkpoint is marked:
  // <run>/FAILED holds the error, so the directory (config.yaml, train.log, nothing to resume) is
  // not taken for a run.
  void mark_failed(const std::string& error);

 private:
  TrainSummary run_steps();
  bool step(int64_t iter);
  bool handle_nonfinite(int64_t& iter, const std::string& found, bool step_undone);
  std::string diagnose() { return diagnose_nonfinite(*train_net_, ctx_); }
  void roll_back(int64_t& iter);
  TrainSummary stop_diverged(int64_t done);
  TrainSummary stop_write_failed(const std::string& what);
  std::string last_checkpoint_text();
  Scalars test(int64_t done);
  bool save(int64_t done, bool test_pending);
  void print_start();
  void print_end();
  double epoch() const { return double(position_) / double(train_loader_->batches_per_epoch()); }

  const RunOptions& options_;
  Context& ctx_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  std::unique_ptr<Net> train_net_, test_net_;
  LoopSettings loop_;
  std::unique_ptr<Solver> solver_;
  std::vector<std::string> test_names_;

  TrainingState state_;  // what the next checkpoint records; restored from --resume
  StartingPoint start_;
  bool replaced_old_run_ = false;
  std::unique_ptr<RunLog> log_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<Progress> progress_;

  InputFeeder feeder_;
  StepGraph graph_;
  NanInjection test_nan_;
  NonfiniteCheck nonfinite_check_{ctx_};
  float loss_before_ = 0.0f;  // the loss sum before the step being checked
  std::string stop_report_;   // what stopped a diverged run
  int64_t position_ = 0;      // training batches fed so far: the data stream's position
  int64_t first_iter_ = 0, images_here_ = 0;
  double wait_at_start_ = 0.0;
  TrainSummary summary_;
};

TrainingRun::TrainingRun(const ConfigNode& config, Context& ctx, const LayerRegistry& layers,
                         const RunOptions& options, std::ostream& out)
    : options_(options), ctx_(ctx), feeder_(ctx) {
  if (!options.weights.empty() && !options.resume.empty()) {
    throw Error(
        "--weights and --resume cannot be combined: --resume continues a run with its own "
        "weights, --weights starts a new run from given ones");
  }
  const ConfigNode& data_node = config.at("data");
  // Batches are assembled straight into pinned memory on a GPU, so the copy to the device is
  // asynchronous and overlaps the step.
  Allocator* pinned = &ctx_.staging_allocator();
  const ConfigNode& model = config.at("model");
  const int64_t targets = soft_target_classes(model);  // label: [K] gives soft targets
  train_loader_ = make_loader(data_node, "train", options.seed, pinned, nullptr, targets);
  const ClassList classes{data::class_list(train_loader_->dataset()), "data.train's source"};
  if (data_node.has("test")) {
    test_loader_ = make_loader(data_node, "test", options.seed, pinned, &classes, targets);
  }
  data_node.check_no_unknown_keys("data");

  train_net_ =
      std::make_unique<Net>(model, Phase::train, train_loader_->options().batch_size, layers, ctx_);
  check_inputs(*train_net_, *train_loader_, model);
  if (test_loader_) {
    test_net_ =
        std::make_unique<Net>(model, Phase::test, test_loader_->options().batch_size, layers, ctx_);
    test_net_->share_params_from(*train_net_);
    check_inputs(*test_net_, *test_loader_, model);
    test_names_ = test_net_->output_names();  // no read-back: the tops hold no values yet
  }

  const ConfigNode& solver_node = config.at("solver");
  apply_param_groups(solver_node, *train_net_);
  loop_ = read_loop_settings(solver_node, train_loader_->batches_per_epoch());
  if (!loop_.keep_best.empty() &&
      std::find(test_names_.begin(), test_names_.end(), loop_.keep_best) == test_names_.end()) {
    std::string known;
    for (const std::string& n : test_names_) known += (known.empty() ? "" : ", ") + n;
    solver_node.at("keep_best")
        .fail("solver.keep_best: '" + loop_.keep_best + "' is not an output of the test net (" +
              (known.empty() ? "there is no data.test" : "it has: " + known) + ")");
  }
  solver_ = make_solver(solver_node, loop_.max_iter);
  solver_node.check_no_unknown_keys("solver");
  config.check_no_unknown_keys("the config");

  state_.batch_size = train_loader_->options().batch_size;
  state_.batches_per_epoch = train_loader_->batches_per_epoch();
  state_.iter_size = solver_->iter_size();
  state_.seed = options.seed;
  state_.model = model.to_yaml();
  state_.solver_type = solver_->config().type;
  state_.classes = classes.names;
  start_ = load_starting_point(options, *train_net_, *solver_, ctx_, loop_.max_iter, state_);
  state_.classes = classes.names;  // a checkpoint older than the class list has none
  const std::string classifier = classifier_of(*train_net_);
  if (!options.weights.empty() && !classifier.empty() &&
      std::none_of(start_.weights.missing.begin(), start_.weights.missing.end(),
                   [&](const std::string& name) { return name.rfind(classifier + ".", 0) == 0; })) {
    check_finetune_classes(classes_of_weights(options.weights), classes);  // the head was copied
  }
  solver_->scale_learning_rate(state_.lr_scale);  // lowered by earlier rollbacks of the run

  const bool resumed = bool(start_.resumed);
  replaced_old_run_ = open_run_dir(start_.run_dir, resumed, options.config_path, config.to_yaml());
  write_file_atomic(start_.run_dir + "/classes.txt",
                    data::class_names_text(train_loader_->dataset()));
  log_ =
      std::make_unique<RunLog>(out, start_.run_dir + "/train.log", resumed, options.live_progress);
  metrics_ =
      std::make_unique<MetricsLog>(start_.run_dir, test_names_, resumed ? state_.iteration : -1,
                                   [this](const std::string& line) { log_->print(line); });
  progress_ = std::make_unique<Progress>(
      ctx_, *log_, *metrics_, *solver_,
      Progress::Plan{loop_.max_iter, loop_.display, train_loader_->batches_per_epoch(),
                     train_net_->batch_size(), solver_->iter_size()},
      state_);
}

// iter_size forward/backward passes, then one solver step. The step's losses are summed on the
// device and read back once per display window, so a GPU step never waits for the host. With
// cuda_graph (GPU only) forward, backward and the loss sum are captured once, at this process's
// second pass (the first allocates every buffer), and replayed. Returns false, the update not
// applied, when on_nonfinite is skip or rollback and the loss or a gradient is not finite.
bool TrainingRun::step(int64_t iter) {
  const bool use_graph = ctx_.device().is_cuda() && loop_.cuda_graph;
  const bool check = loop_.on_nonfinite != OnNonfinite::stop;
  Tensor& loss_sum = progress_->loss_sum();
  if (check) loss_before_ = loss_sum.to_vector()[0];
  if (loop_.on_nonfinite == OnNonfinite::skip) {
    nonfinite_check_.keep_buffers(train_net_->buffers());
  }
  for (int k = 0; k < solver_->iter_size(); ++k) {
    feeder_.feed(*train_net_);
    if (test_nan_.due(iter + 1)) {
      ctx_.fill(train_net_->blob(train_net_->inputs()[0].first).value, NAN);
    }
    ++position_;
    images_here_ += train_net_->batch_size();
    state_.window_images += train_net_->batch_size();
    const bool last_batch = iter + 1 == loop_.max_iter && k + 1 == solver_->iter_size();
    if (!last_batch) feeder_.stage(train_loader_->next());
    auto forward_backward = [&] {
      train_net_->forward(ctx_);
      for (const auto& [top, weight] : train_net_->loss_tops()) {
        kernels::axpy(ctx_, weight / float(solver_->iter_size()), top->value, loss_sum);
      }
      train_net_->backward(ctx_);
    };
    if (use_graph && graph_.exec == nullptr && (iter > first_iter_ || k > 0)) {
      gpu::begin_capture(ctx_.stream());
      forward_backward();
      graph_.exec = gpu::end_capture(ctx_.stream());
    }
    if (graph_.exec != nullptr) {
      gpu::launch(graph_.exec, ctx_.stream());
    } else {
      forward_backward();
    }
  }
  if (check && !nonfinite_check_.finite(train_net_->learnable_params(), loss_sum)) return false;
  solver_->step(train_net_->learnable_params(), iter, ctx_);
  ++state_.window_iterations;
  return true;
}

// Applies solver.on_nonfinite to a non-finite loss or gradient `found` in iteration `iter` + 1.
// `step_undone`: the step's update was not applied (the per-step check), so it can be skipped.
// Returns false when the run must stop; after a rollback `iter` is the checkpoint's iteration - 1.
bool TrainingRun::handle_nonfinite(int64_t& iter, const std::string& found, bool step_undone) {
  const std::string report = fmt::format("{} at iteration {}: {}", found, iter + 1, diagnose());
  if (loop_.on_nonfinite == OnNonfinite::skip && step_undone) {
    train_net_->zero_param_grads(ctx_);
    nonfinite_check_.restore_buffers(train_net_->buffers());
    ctx_.fill(progress_->loss_sum(), loss_before_);
    ++summary_.skipped_steps;
    log_->print(fmt::format("skipped: {}; the update was not applied ({} step(s) skipped so far)",
                            report, summary_.skipped_steps));
    return true;
  }
  const bool can_roll_back = loop_.on_nonfinite == OnNonfinite::rollback &&
                             state_.rollbacks < loop_.max_rollbacks &&
                             std::filesystem::exists(start_.run_dir + "/checkpoints/last");
  if (!can_roll_back) {
    stop_report_ = report;
    return false;
  }
  roll_back(iter);
  log_->print(fmt::format("rolled back: {}; reloaded {}, learning rate x {} (rollback {} of {})",
                          report, summary_.checkpoint, loop_.rollback_lr_factor, state_.rollbacks,
                          loop_.max_rollbacks));
  return true;
}

// Reloads the last checkpoint (weights, solver state, layers' run state, the random generator,
// the data position and the display window) and lowers the learning rate; the run's count of
// rollbacks and their learning-rate factor go on from the current ones.
void TrainingRun::roll_back(int64_t& iter) {
  const std::string dir = find_checkpoint(start_.run_dir);
  train_net_->zero_param_grads(ctx_);
  const TrainingState now = state_;
  state_ = restore_checkpoint(dir, *train_net_, *solver_, ctx_);
  state_.model = now.model;
  state_.rollbacks = now.rollbacks + 1;
  state_.lr_scale = now.lr_scale * loop_.rollback_lr_factor;
  position_ = state_.data_position;
  const int64_t per_epoch = train_loader_->batches_per_epoch();
  train_loader_->seek(position_ / per_epoch, position_ % per_epoch);
  feeder_.feed(*train_net_);  // drops the batch staged for the abandoned next iteration
  feeder_.stage(train_loader_->next());
  solver_->scale_learning_rate(loop_.rollback_lr_factor);
  progress_->rewind(state_.iteration);
  ++summary_.rollbacks;
  summary_.checkpoint = dir;
  iter = state_.iteration - 1;
}

// Ends a run that met a non-finite value it may not skip or roll back from: its last checkpoint
// stays as it was, and `crema train` exits with 3.
TrainSummary TrainingRun::stop_diverged(int64_t done) {
  const bool kept = std::filesystem::exists(start_.run_dir + "/checkpoints/last");
  summary_.checkpoint = kept ? find_checkpoint(start_.run_dir) : "";
  log_->print(fmt::format("stopped: {}; {}. Lower solver.base_lr or check the data", stop_report_,
                          kept ? "the last good checkpoint is " + summary_.checkpoint
                               : "no checkpoint was written before"));
  if (!kept) mark_failed("stopped: " + stop_report_);
  summary_.diverged = true;
  summary_.iterations = done;
  summary_.first_loss = progress_->first_loss();
  summary_.last_loss = progress_->last_loss();
  return summary_;
}

Scalars TrainingRun::test(int64_t done) {
  if (!test_net_) return {};
  const auto begin = Clock::now();
  Scalars results = run_test(*test_net_, *test_loader_, ctx_);
  progress_->pause_since(begin);
  log_->print(fmt::format("test  iter {:>6}  {}", done, format_outputs(results)));
  metrics_->test(done, epoch(), results);
  update_best(state_.best, loop_, results, done);
  return results;
}

// Writes a checkpoint after iteration `done`; returns false, writing nothing, when the loss sum or
// a parameter is not finite: a checkpoint never holds a diverged run. A checkpoint that cannot be
// written (CheckpointWriteError) ends the run with solver.on_write_error: stop (the error goes
// on to run()); with continue it is reported and the run goes on.
bool TrainingRun::save(int64_t done, bool test_pending) {
  const auto begin = Clock::now();
  const float loss_sum = progress_->loss_sum().to_vector()[0];
  if (!std::isfinite(loss_sum) || !train_net_->first_nonfinite_param().empty()) return false;
  state_.iteration = done;
  state_.data_position = position_;
  state_.rng = ctx_.random().state();
  state_.loss_sum = loss_sum;
  state_.test_pending = test_pending;
  kernels::save_algorithm_cache(options_.algo_cache, ctx_.algorithm_cache());
  try {
    summary_.checkpoint = write_checkpoint(start_.run_dir, *train_net_,
                                           solver_->state(train_net_->learnable_params(), ctx_),
                                           layer_state(*train_net_), state_);
  } catch (const CheckpointWriteError& e) {
    summary_.iterations = done;
    if (loop_.on_write_error == OnWriteError::stop) throw;
    log_->print(fmt::format(
        "warning: the checkpoint of iteration {} was not written: {}; {}; the run goes on "
        "(solver.on_write_error: continue)",
        done, e.what(), last_checkpoint_text()));
  }
  progress_->pause_since(begin);
  return true;
}

// "the last checkpoint is <dir>", or that there is none.
std::string TrainingRun::last_checkpoint_text() {
  if (!std::filesystem::exists(start_.run_dir + "/checkpoints/last")) {
    return "no checkpoint was written before";
  }
  return "the last checkpoint is " + find_checkpoint(start_.run_dir);
}

// Ends a run whose checkpoint or final weights could not be written: one line naming the file and
// the reason, and where the run can resume from; `crema train` exits with 4.
TrainSummary TrainingRun::stop_write_failed(const std::string& what) {
  const bool kept = std::filesystem::exists(start_.run_dir + "/checkpoints/last");
  summary_.checkpoint = kept ? find_checkpoint(start_.run_dir) : "";
  const bool at_end = kept && std::filesystem::path(summary_.checkpoint).filename() ==
                                  fmt::format("iter_{:06d}", loop_.max_iter);
  log_->print(fmt::format("stopped after iteration {}: {}; {}{}", summary_.iterations, what,
                          last_checkpoint_text(),
                          at_end ? " (its model.safetensors holds the final weights)"
                          : kept ? fmt::format(" (continue with crema train {} --resume {})",
                                               options_.config_path, start_.run_dir)
                                 : ""));
  summary_.write_failed = true;
  summary_.first_loss = progress_->first_loss();
  summary_.last_loss = progress_->last_loss();
  return summary_;
}

void TrainingRun::print_start() {
  if (replaced_old_run_) {
    log_->print("note: " + start_.run_dir +
                " held an earlier run; its checkpoints and logs are replaced");
  }
  if (!options_.weights.empty()) log_->print(weights_message(options_.weights, start_.weights));
  const ParameterCounts parameters = count_parameters(*train_net_);
  log_->print(fmt::format(
      "{} {} on {} with {} thread(s): {} iterations of batch {}{} ({} per epoch), "
      "{} parameters{}, run in {}",
      start_.resumed ? "resume" : "train", options_.name, ctx_.device().str(), ctx_.num_threads(),
      loop_.max_iter, train_loader_->options().batch_size,
      solver_->iter_size() > 1 ? fmt::format(" x {} passes", solver_->iter_size()) : "",
      train_loader_->batches_per_epoch(), parameters.trainable,
      parameters.frozen > 0 ? fmt::format(" trained and {} frozen", parameters.frozen) : "",
      start_.run_dir));
  if (start_.resumed) {
    log_->print(fmt::format("resumed from {} at iteration {}", start_.resumed->dir, first_iter_));
  }
}

void TrainingRun::print_end() {
  const std::string& run_dir = start_.run_dir;
  log_->print(fmt::format(
      "trained {} iterations: {:.0f} img/s, waiting on data {:.1f}% of the time; "
      "weights in {}/final.safetensors",
      loop_.max_iter, summary_.images_per_second, 100.0 * summary_.data_wait_share, run_dir));
  if (state_.best) {
    log_->print(fmt::format("best {} {:.4f} at iteration {}: {}/checkpoints/best",
                            state_.best->metric, state_.best->value, state_.best->iteration,
                            run_dir));
  }
  // The allocator's high-water mark: on the CPU the process's host heap, data included.
  log_->print(
      fmt::format("{} memory: {:.1f} MiB in use, {:.1f} MiB at the peak ({})", ctx_.device().str(),
                  double(ctx_.allocator().current_bytes()) / (1 << 20),
                  double(ctx_.allocator().peak_bytes()) / (1 << 20),
                  train_net_->memory().planned ? "memory plan" : "model.memory_plan: false"));
  if (!summary_.final_test.empty()) {
    log_->print("final test: " + format_outputs(summary_.final_test));
  }
}

TrainSummary TrainingRun::run() {
  try {
    return run_steps();
  } catch (const CheckpointWriteError& e) {
    return stop_write_failed(e.what());
  }
}

TrainSummary TrainingRun::run_steps() {
  InterruptGuard interrupt;
  summary_.run_dir = start_.run_dir;
  first_iter_ = start_.resumed ? state_.iteration : 0;
  position_ = start_.resumed ? state_.data_position : 0;
  print_start();

  const int64_t per_epoch = train_loader_->batches_per_epoch();
  train_loader_->seek(position_ / per_epoch, position_ % per_epoch);
  wait_at_start_ = train_loader_->wait_seconds();
  progress_->start(first_iter_);
  if (start_.resumed && state_.test_pending) {
    test(first_iter_);
    save(first_iter_, false);
  }
  // A rollback needs a checkpoint to go back to, before the first snapshot too.
  if (loop_.on_nonfinite == OnNonfinite::rollback && !start_.resumed) save(0, false);

  const std::string loss_not_finite =
      loop_.display == 1 ? "the loss is not finite"
                         : "the loss summed since the last display line is not finite";
  feeder_.stage(train_loader_->next());
  for (int64_t iter = first_iter_; iter < loop_.max_iter; ++iter) {
    if (!step(iter)) {
      if (!handle_nonfinite(iter, "the loss or a gradient is not finite", true)) {
        return stop_diverged(iter);
      }
      if (loop_.on_nonfinite == OnNonfinite::rollback) continue;
    }
    const int64_t done = iter + 1;
    if (!progress_->after_step(done, position_)) {
      if (!handle_nonfinite(iter, loss_not_finite, false)) return stop_diverged(done);
      continue;
    }
    if (done == loop_.max_iter) break;
    const bool test_due = loop_.test_interval > 0 && done % loop_.test_interval == 0;
    if (interrupt.requested() || done == options_.stop_after) {
      if (!save(done, test_due)) {
        stop_report_ =
            fmt::format("a parameter is not finite at iteration {}: {}", done, diagnose());
        return stop_diverged(done);
      }
      log_->print(
          fmt::format("{} after iteration {}: checkpoint {}; continue with "
                      "crema train {} --resume {}",
                      interrupt.requested() ? "interrupted" : "stopped", done, summary_.checkpoint,
                      options_.config_path, start_.run_dir));
      summary_.stopped = true;
      summary_.interrupted = interrupt.requested();
      summary_.signal = interrupt.signal_number();
      summary_.iterations = done;
      summary_.first_loss = progress_->first_loss();
      summary_.last_loss = progress_->last_loss();
      return summary_;
    }
    const std::optional<BestMetric> best_before = state_.best;
    if (test_due) test(done);
    const bool new_best =
        state_.best && (!best_before || best_before->iteration != state_.best->iteration);
    const bool snapshot_due = loop_.snapshot_interval > 0 && done % loop_.snapshot_interval == 0;
    if ((snapshot_due || new_best) && !save(done, false) &&
        !handle_nonfinite(iter, "a parameter is not finite", false)) {
      return stop_diverged(done);
    }
  }
  ctx_.synchronize();
  const double seconds = progress_->train_seconds();
  summary_.iterations = loop_.max_iter;
  summary_.first_loss = progress_->first_loss();
  summary_.last_loss = progress_->last_loss();
  summary_.images_per_second = double(images_here_) / seconds;
  summary_.data_wait_share = (train_loader_->wait_seconds() - wait_at_start_) / seconds;
  summary_.final_test = test(loop_.max_iter);
  if (!save(loop_.max_iter, false)) {
    stop_report_ =
        fmt::format("a parameter is not finite at iteration {}: {}", loop_.max_iter, diagnose());
    return stop_diverged(loop_.max_iter);
  }
  try {
    train_net_->save_weights(start_.run_dir + "/final.safetensors");
  } catch (const DeviceError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointWriteError(e.what());
  }
  print_end();
  return summary_;
}

void TrainingRun::mark_failed(const std::string& error) {
  if (start_.resumed || !summary_.checkpoint.empty()) return;
  write_file_atomic(
      start_.run_dir + "/FAILED",
      "error: " + error + "\nno checkpoint was written; this run cannot be resumed\n");
}

}  // namespace

TrainSummary run(const ConfigNode& config, Context& ctx, const LayerRegistry& layers,
                 const RunOptions& options, std::ostream& out) {
  TrainingRun training(config, ctx, layers, options, out);
  try {
    return training.run();
  } catch (const std::exception& e) {
    training.mark_failed(e.what());
    throw;
  }
}

}  // namespace crema::training
