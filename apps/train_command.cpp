// crema train: the training loop, its checkpoints, logs and progress.
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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "apps/checkpoint.h"
#include "apps/commands.h"
#include "apps/data_config.h"
#include "apps/input_feeder.h"
#include "apps/interrupt.h"
#include "apps/run_log.h"
#include "apps/session.h"
#include "apps/train_settings.h"
#include "core/error.h"
#include "core/serialization.h"
#include "kernels/elementwise/elementwise.h"
#include "optim/solver.h"

namespace crema {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "0:42", "12:05", "3:02:10"
std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

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
  TrainingRun(const CommandOptions& options, std::ostream& out);
  TrainSummary run();

 private:
  void load_starting_point();
  void open_run_dir();
  void step(int64_t iter);
  void after_step(int64_t done);
  void draw_live(int64_t done, bool force);
  Scalars test(int64_t done);
  void save(int64_t done, bool test_pending);
  double epoch() const { return double(position_) / double(train_loader_->batches_per_epoch()); }
  double train_seconds() const { return seconds_between(start_, Clock::now()); }
  // Tests and checkpoints are not training time: the clocks skip the time since `begin`.
  void exclude_time_since(Clock::time_point begin);

  const CommandOptions& options_;
  std::ostream& out_;
  Session s_;
  Context& ctx_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  std::unique_ptr<Net> train_net_, test_net_;
  LoopSettings loop_;
  std::unique_ptr<Solver> solver_;
  std::vector<std::string> test_names_;

  std::optional<Checkpoint> resumed_;
  WeightsReport weights_report_;
  TrainingState state_;  // what the next checkpoint records; restored from --resume
  std::string run_dir_;
  bool replaced_old_run_ = false;
  std::unique_ptr<RunLog> log_;
  std::unique_ptr<MetricsLog> metrics_;

  InputFeeder feeder_;
  Tensor loss_sum_;  // a device scalar: the display window's summed loss
  StepGraph graph_;
  int64_t position_ = 0;  // training batches fed so far: the data stream's position
  int64_t first_iter_ = 0, steps_here_ = 0, images_here_ = 0;
  Clock::time_point start_, window_start_, live_at_;
  double wait_at_start_ = 0.0;
  double live_loss_base_ = 0.0, smoothed_loss_ = NAN;
  int64_t live_iters_base_ = 0, live_done_ = 0;
  bool have_first_loss_ = false;
  TrainSummary summary_;
};

TrainingRun::TrainingRun(const CommandOptions& options, std::ostream& out)
    : options_(options), out_(out), s_(options), ctx_(*s_.ctx), feeder_(ctx_) {
  if (!options.weights.empty() && !options.resume.empty()) {
    throw Error(
        "--weights and --resume cannot be combined: --resume continues a run with its own "
        "weights, --weights starts a new run from given ones");
  }
  const ConfigNode& data_node = s_.root.at("data");
  // Batches are assembled straight into pinned memory on a GPU, so the copy to the device is
  // asynchronous and overlaps the step.
  Allocator* pinned = &ctx_.staging_allocator();
  train_loader_ = make_loader(data_node, "train", s_.seed, pinned);
  if (data_node.has("test")) test_loader_ = make_loader(data_node, "test", s_.seed, pinned);
  data_node.check_no_unknown_keys("data");

  const ConfigNode& model = s_.root.at("model");
  train_net_ = std::make_unique<Net>(model, Phase::train, train_loader_->options().batch_size,
                                     s_.registry, ctx_);
  check_inputs(*train_net_, *train_loader_, model);
  if (test_loader_) {
    test_net_ = std::make_unique<Net>(model, Phase::test, test_loader_->options().batch_size,
                                      s_.registry, ctx_);
    test_net_->share_params_from(*train_net_);
    check_inputs(*test_net_, *test_loader_, model);
    for (const auto& output : test_net_->outputs()) test_names_.push_back(output.first);
  }

  const ConfigNode& solver_node = s_.root.at("solver");
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
  s_.root.check_no_unknown_keys("the config");

  state_.batch_size = train_loader_->options().batch_size;
  state_.batches_per_epoch = train_loader_->batches_per_epoch();
  state_.iter_size = solver_->iter_size();
  state_.seed = s_.seed;
  state_.model = model.to_yaml();
  state_.solver_type = solver_->config().type;
  load_starting_point();
  open_run_dir();
}

// --resume or --weights: everything read and checked, nothing written yet.
void TrainingRun::load_starting_point() {
  if (!options_.weights.empty()) {
    weights_report_ = copy_weights_by_name(*train_net_, options_.weights);
  }
  if (options_.resume.empty()) {
    run_dir_ = options_.out_dir.empty() ? "runs/" + s_.name : options_.out_dir;
    return;
  }
  const std::string dir = find_checkpoint(options_.resume);
  resumed_ = read_checkpoint(dir);
  const TrainingState& saved = resumed_->state;
  const std::string cannot = "cannot resume from " + dir + ": ";
  const std::string mismatch = tensor_mismatch(net_tensors(*train_net_), resumed_->model);
  if (!mismatch.empty()) {
    throw Error(cannot + "it holds a different model (" + mismatch + "); to start a new run " +
                "from its weights, use --weights " + dir + "/model.safetensors");
  }
  restore_exactly(net_tensors(*train_net_), resumed_->model, dir + "/model.safetensors",
                  "the model of " + options_.config);
  check_same_run(saved, state_, dir);
  if (saved.iteration >= loop_.max_iter) {
    throw Error(cannot + fmt::format("it has already run {} iterations and solver.max_iter is {}; "
                                     "raise it (--set ++solver.max_iter=N) to train further",
                                     saved.iteration, loop_.max_iter));
  }
  restore_exactly(solver_->state(train_net_->learnable_params(), ctx_), resumed_->solver,
                  dir + "/solver.safetensors", "the " + state_.solver_type + " solver");
  restore_exactly(layer_state(*train_net_), resumed_->layers, dir + "/layers.safetensors",
                  "the layers' run state");
  ctx_.random().set_state(saved.rng);
  const std::string model = state_.model;
  state_ = saved;
  state_.model = model;
  run_dir_ = options_.out_dir.empty() ? run_dir_of(dir) : options_.out_dir;
  if (run_dir_.empty()) {
    throw Error("--resume " + options_.resume + ": the checkpoint is not inside a run " +
                "directory (<run>/checkpoints/<name>); give --out DIR for the continued run");
  }
}

void TrainingRun::open_run_dir() {
  fs::create_directories(run_dir_);
  if (!resumed_ && fs::exists(fs::path(run_dir_) / "checkpoints")) {
    // A new run under the name of an earlier one replaces it.
    const fs::path old = fs::path(run_dir_) / ".trash-checkpoints";
    fs::remove_all(old);
    fs::rename(fs::path(run_dir_) / "checkpoints", old);
    fs::remove_all(old);
    replaced_old_run_ = true;
  }
  write_file_atomic(run_dir_ + "/config.yaml",
                    "# resolved from " + options_.config + "\n" + s_.root.to_yaml() + "\n");
  log_ = std::make_unique<RunLog>(out_, run_dir_ + "/train.log", bool(resumed_),
                                  options_.live_progress);
  metrics_ = std::make_unique<MetricsLog>(run_dir_, test_names_, resumed_ ? state_.iteration : -1);
}

// iter_size forward/backward passes, then one solver step. The step's losses are summed on the
// device and read back once per display window, so a GPU step never waits for the host. With
// cuda_graph (GPU only) forward, backward and the loss sum are captured once, at this process's
// second pass (the first allocates every buffer), and replayed.
void TrainingRun::step(int64_t iter) {
  const bool use_graph = ctx_.device().is_cuda() && loop_.cuda_graph;
  for (int k = 0; k < solver_->iter_size(); ++k) {
    feeder_.feed(*train_net_);
    ++position_;
    images_here_ += train_net_->batch_size();
    state_.window_images += train_net_->batch_size();
    const bool last_batch = iter + 1 == loop_.max_iter && k + 1 == solver_->iter_size();
    if (!last_batch) feeder_.stage(train_loader_->next());
    auto forward_backward = [&] {
      train_net_->forward(ctx_);
      for (const auto& [top, weight] : train_net_->loss_tops()) {
        kernels::axpy(ctx_, weight / float(solver_->iter_size()), top->value, loss_sum_);
      }
      train_net_->backward(ctx_);
    };
    if (use_graph && graph_.exec == nullptr && (steps_here_ > 0 || k > 0)) {
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
  solver_->step(train_net_->learnable_params(), iter, ctx_);
  ++steps_here_;
  ++state_.window_iterations;
}

void TrainingRun::draw_live(int64_t done, bool force) {
  const auto now = Clock::now();
  if (!log_->is_live() || (!force && seconds_between(live_at_, now) < 0.25)) return;
  const double sum = double(loss_sum_.to_vector()[0]);  // synchronizes, 4 times a second at most
  const int64_t iters = state_.window_iterations - live_iters_base_;
  if (iters > 0) {
    const double recent = (sum - live_loss_base_) / double(iters);
    smoothed_loss_ = std::isnan(smoothed_loss_) ? recent : 0.8 * smoothed_loss_ + 0.2 * recent;
  }
  const double seconds = seconds_between(live_at_, now);
  const double rate = seconds > 0 ? double(done - live_done_) / seconds : 0.0;
  const double mean_rate = double(steps_here_) / std::max(1e-9, train_seconds());
  const int64_t per_epoch = train_loader_->batches_per_epoch();
  const int64_t epochs = (loop_.max_iter * solver_->iter_size() + per_epoch - 1) / per_epoch;
  const int64_t epoch_now = std::min(epochs, (position_ - (force ? 1 : 0)) / per_epoch + 1);
  const int64_t images = train_net_->batch_size() * solver_->iter_size();
  log_->live(fmt::format(
      "epoch {}/{}  iter {}/{}  ETA {}  {:.1f} it/s  {:.0f} img/s  lr {:.4g}  loss {:.4f}",
      epoch_now, epochs, done, loop_.max_iter,
      duration_text(double(loop_.max_iter - done) / mean_rate), rate, rate * double(images),
      solver_->learning_rate(done - 1), smoothed_loss_));
  live_at_ = now;
  live_done_ = done;
  live_loss_base_ = sum;
  live_iters_base_ = state_.window_iterations;
}

Scalars TrainingRun::test(int64_t done) {
  if (!test_net_) return {};
  const auto begin = Clock::now();
  Scalars results = run_test(*test_net_, *test_loader_, ctx_);
  exclude_time_since(begin);
  log_->print(fmt::format("test  iter {:>6}  {}", done, format_outputs(results)));
  metrics_->test(done, epoch(), results);
  if (!loop_.keep_best.empty()) {
    double value = 0.0;
    for (const auto& [name, v] : results) {
      if (name == loop_.keep_best) value = v;
    }
    const bool better = !state_.best || (loop_.keep_best_max ? value > state_.best->value
                                                             : value < state_.best->value);
    if (better) {
      state_.best = BestMetric{loop_.keep_best, loop_.keep_best_max, value, done,
                               fmt::format("iter_{:06d}", done)};
    }
  }
  return results;
}

void TrainingRun::exclude_time_since(Clock::time_point begin) {
  const auto pause = Clock::now() - begin;
  start_ += pause;
  window_start_ += pause;
  live_at_ += pause;
}

void TrainingRun::save(int64_t done, bool test_pending) {
  const auto begin = Clock::now();
  state_.iteration = done;
  state_.data_position = position_;
  state_.rng = ctx_.random().state();
  state_.loss_sum = loss_sum_.to_vector()[0];
  state_.test_pending = test_pending;
  s_.save_algorithm_cache();
  summary_.checkpoint =
      write_checkpoint(run_dir_, *train_net_, solver_->state(train_net_->learnable_params(), ctx_),
                       layer_state(*train_net_), state_);
  exclude_time_since(begin);
}

void TrainingRun::after_step(int64_t done) {
  const int64_t per_epoch = train_loader_->batches_per_epoch();
  const bool epoch_ended = position_ / per_epoch != (position_ - solver_->iter_size()) / per_epoch;
  draw_live(done, epoch_ended || done == loop_.max_iter);
  if (epoch_ended || done == loop_.max_iter) log_->end_live();
  if (done % loop_.display == 0 || done == loop_.max_iter) {
    const double mean_loss = double(loss_sum_.to_vector()[0]) / double(state_.window_iterations);
    if (!std::isfinite(mean_loss)) {
      throw Error(
          fmt::format("the loss became {} by iteration {}; lower solver.base_lr or check the "
                      "data (checkpoints written before stay in {}/checkpoints)",
                      mean_loss, done, run_dir_));
    }
    const auto now = Clock::now();
    const double seconds = seconds_between(window_start_, now);
    const double lr = solver_->learning_rate(done - 1);
    const double its = double(state_.window_iterations) / seconds;
    const double ips = double(state_.window_images) / seconds;
    if (!have_first_loss_) summary_.first_loss = mean_loss, have_first_loss_ = true;
    summary_.last_loss = mean_loss;
    const double mean_rate = double(steps_here_) / std::max(1e-9, train_seconds());
    log_->periodic(
        fmt::format("iter {:>6}  loss {:.6g}  lr {:.6g}  {:.0f} img/s  {:.1f} it/s  "
                    "epoch {:.2f}  ETA {}",
                    done, mean_loss, lr, ips, its, epoch(),
                    duration_text(double(loop_.max_iter - done) / mean_rate)));
    metrics_->train(done, epoch(),
                    {{"loss", mean_loss},
                     {"lr", lr},
                     {"images_per_second", ips},
                     {"iterations_per_second", its}});
    ctx_.fill(loss_sum_, 0.0f);
    state_.window_iterations = state_.window_images = 0;
    live_loss_base_ = 0.0, live_iters_base_ = 0;
    window_start_ = Clock::now();
  }
}

TrainSummary TrainingRun::run() {
  InterruptGuard interrupt;
  summary_.run_dir = run_dir_;
  if (replaced_old_run_) {
    log_->print("note: " + run_dir_ +
                " held an earlier run; its checkpoints and logs are replaced");
  }
  if (!options_.weights.empty()) {
    std::string text =
        fmt::format("weights from {}: copied {} tensors", options_.weights, weights_report_.copied);
    if (!weights_report_.missing.empty()) {
      std::string names;
      for (const std::string& n : weights_report_.missing) names += (names.empty() ? "" : ", ") + n;
      text += "; not in the file, so they keep their fillers: " + names;
    }
    if (!weights_report_.unused.empty()) {
      std::string names;
      for (const std::string& n : weights_report_.unused) names += (names.empty() ? "" : ", ") + n;
      text += "; in the file but not in this model (ignored): " + names;
    }
    log_->print(text);
  }
  first_iter_ = resumed_ ? state_.iteration : 0;
  position_ = resumed_ ? state_.data_position : 0;
  int64_t parameters = 0;
  for (const Param* p : train_net_->learnable_params()) parameters += p->value.numel();
  log_->print(
      fmt::format("{} {} on {} with {} thread(s): {} iterations of batch {}{} ({} per epoch), "
                  "{} parameters, run in {}",
                  resumed_ ? "resume" : "train", s_.name, ctx_.device().str(), ctx_.num_threads(),
                  loop_.max_iter, train_loader_->options().batch_size,
                  solver_->iter_size() > 1 ? fmt::format(" x {} passes", solver_->iter_size()) : "",
                  train_loader_->batches_per_epoch(), parameters, run_dir_));
  if (resumed_) {
    log_->print(fmt::format("resumed from {} at iteration {}", resumed_->dir, first_iter_));
  }

  loss_sum_ = ctx_.zeros({});  // a scalar, like the loss tops
  ctx_.fill(loss_sum_, state_.loss_sum);
  train_loader_->seek(position_ / train_loader_->batches_per_epoch(),
                      position_ % train_loader_->batches_per_epoch());
  wait_at_start_ = train_loader_->wait_seconds();
  start_ = window_start_ = live_at_ = Clock::now();
  live_done_ = first_iter_;
  live_loss_base_ = state_.loss_sum, live_iters_base_ = state_.window_iterations;
  if (resumed_ && state_.test_pending) {
    test(first_iter_);
    save(first_iter_, false);
  }

  feeder_.stage(train_loader_->next());
  for (int64_t iter = first_iter_; iter < loop_.max_iter; ++iter) {
    step(iter);
    const int64_t done = iter + 1;
    after_step(done);
    if (done == loop_.max_iter) break;
    const bool test_due = loop_.test_interval > 0 && done % loop_.test_interval == 0;
    if (interrupt.requested() || done == options_.stop_after) {
      save(done, test_due);
      log_->print(
          fmt::format("{} after iteration {}: checkpoint {}; continue with "
                      "crema train {} --resume {}",
                      interrupt.requested() ? "interrupted" : "stopped", done, summary_.checkpoint,
                      options_.config, run_dir_));
      summary_.stopped = true;
      summary_.interrupted = interrupt.requested();
      summary_.signal = interrupt.signal_number();
      summary_.iterations = done;
      return summary_;
    }
    const std::optional<BestMetric> best_before = state_.best;
    if (test_due) test(done);
    const bool new_best =
        state_.best && (!best_before || best_before->iteration != state_.best->iteration);
    const bool snapshot_due = loop_.snapshot_interval > 0 && done % loop_.snapshot_interval == 0;
    if (snapshot_due || new_best) save(done, false);
  }
  ctx_.synchronize();
  const double seconds = train_seconds();
  summary_.iterations = loop_.max_iter;
  summary_.images_per_second = double(images_here_) / seconds;
  summary_.data_wait_share = (train_loader_->wait_seconds() - wait_at_start_) / seconds;
  summary_.final_test = test(loop_.max_iter);
  save(loop_.max_iter, false);
  train_net_->save_weights(run_dir_ + "/final.safetensors");
  log_->print(fmt::format(
      "trained {} iterations: {:.0f} img/s, waiting on data {:.1f}% of the time; "
      "weights in {}/final.safetensors",
      loop_.max_iter, summary_.images_per_second, 100.0 * summary_.data_wait_share, run_dir_));
  if (state_.best) {
    log_->print(fmt::format("best {} {:.4f} at iteration {}: {}/checkpoints/best",
                            state_.best->metric, state_.best->value, state_.best->iteration,
                            run_dir_));
  }
  if (ctx_.device().is_cuda()) {
    log_->print(fmt::format("{} memory: {:.1f} MiB in use, {:.1f} MiB at the peak",
                            ctx_.device().str(),
                            double(ctx_.allocator().current_bytes()) / (1 << 20),
                            double(ctx_.allocator().peak_bytes()) / (1 << 20)));
  }
  if (!summary_.final_test.empty()) {
    log_->print("final test: " + format_outputs(summary_.final_test));
  }
  return summary_;
}

}  // namespace

TrainSummary train_command(const CommandOptions& options, std::ostream& out) {
  TrainingRun run(options, out);
  return run.run();
}

}  // namespace crema
