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
//
// Loss scaling (fp16: optim/loss_scale.h): the loss gradient is seeded with the scale, and after
// backward and the gradients' averaging over the ranks, one pass unscales them and finds any
// overflow. An overflowed step is skipped -- no update, the solver's state as before the step;
// batch norm's statistics keep the forward pass's update, as under GradScaler -- logged, and the
// scale backed off; it still counts as an iteration (its batch
// is consumed, the learning-rate schedule advances, its finite loss is displayed), as a loop that
// calls GradScaler.step and then scheduler.step every iteration does, while Adam's and AdaGrad's
// step t counts only applied updates, as torch.optim's state['step'] does.
#include <algorithm>
#include <cmath>
#include <csignal>
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
#include "apps/training/training_run.h"
#include "core/collective.h"
#include "core/config.h"
#include "core/error.h"
#include "core/net.h"
#include "core/net_precision.h"
#include "core/registry.h"
#include "core/serialization.h"
#include "kernels/convolution/select.h"
#include "kernels/elementwise/elementwise.h"
#include "optim/param_groups.h"
#include "optim/solver.h"

namespace crema::training {

TrainingRun::TrainingRun(const ConfigNode& config, Context& ctx, const LayerRegistry& layers,
                         const RunOptions& options, std::ostream& out)
    : options_(options), ctx_(ctx), group_(options.group), feeder_(ctx) {
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
  const std::pair<int, int> shard =
      group_ ? std::pair<int, int>{group_->rank(), group_->size()} : std::pair<int, int>{0, 1};
  train_loader_ = make_loader(data_node, "train", options.seed, pinned, nullptr, targets, shard);
  const ClassList classes{data::class_list(train_loader_->dataset()), "data.train's source"};
  if (data_node.has("test")) {
    test_loader_ = make_loader(data_node, "test", options.seed, pinned, &classes, targets, shard);
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

  if (group_) {  // SyncBatchNorm's statistics over the ranks
    for (size_t i = 0; i < train_net_->num_layers(); ++i) {
      auto* user = dynamic_cast<UsesCollective*>(&train_net_->layer(i));
      if (user != nullptr) user->set_collective(group_);
    }
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
  scaler_ = LossScaler(
      read_loss_scale_config(solver_node, read_net_precision(model, ctx_.device()).precision));
  solver_node.check_no_unknown_keys("solver");
  const distributed::DdpSettings ddp = distributed::read_ddp_settings(config);
  config.check_no_unknown_keys("the config");

  // The global batch: a run resumes on another number of GPUs when batch_size x GPUs is the same
  // (the data position counts global batches).
  state_.batch_size = train_loader_->options().batch_size * (group_ ? group_->size() : 1);
  state_.batches_per_epoch = train_loader_->batches_per_epoch();
  state_.iter_size = solver_->iter_size();
  state_.seed = options.seed;
  state_.model = model.to_yaml();
  state_.solver_type = solver_->config().type;
  state_.classes = classes.names;
  start_ = load_starting_point(options, *train_net_, *solver_, ctx_, loop_.max_iter, state_);
  if (start_.resumed && state_.loss_scale && scaler_.enabled()) {
    scaler_.set_state(*state_.loss_scale);
  }
  train_net_->set_loss_scale(scaler_.scale());
  state_.classes = classes.names;  // a checkpoint older than the class list has none
  const std::string classifier = classifier_of(*train_net_);
  if (!options.weights.empty() && !classifier.empty() &&
      std::none_of(start_.weights.missing.begin(), start_.weights.missing.end(),
                   [&](const std::string& name) { return name.rfind(classifier + ".", 0) == 0; })) {
    check_finetune_classes(classes_of_weights(options.weights), classes);  // the head was copied
  }
  solver_->scale_learning_rate(state_.lr_scale);  // lowered by earlier rollbacks of the run

  const bool resumed = bool(start_.resumed);
  std::string log_dir = start_.run_dir;
  if (leader()) {
    replaced_old_run_ =
        open_run_dir(start_.run_dir, resumed, options.config_path, config.to_yaml());
    write_file_atomic(start_.run_dir + "/classes.txt",
                      data::class_names_text(train_loader_->dataset()));
  } else {
    log_dir = fmt::format("{}/rank{}", start_.run_dir, group_->rank());
    std::filesystem::create_directories(log_dir);
  }
  log_ = std::make_unique<RunLog>(leader() ? out : null_stream_, log_dir + "/train.log", resumed,
                                  options.live_progress && leader());
  metrics_ = std::make_unique<MetricsLog>(log_dir, test_names_, resumed ? state_.iteration : -1,
                                          [this](const std::string& line) { log_->print(line); });
  progress_ = std::make_unique<Progress>(
      ctx_, *log_, *metrics_, *solver_, data_wait_,
      Progress::Plan{loop_.max_iter, loop_.display, train_loader_->batches_per_epoch(),
                     train_net_->batch_size(), solver_->iter_size()},
      state_);
  if (group_) {
    // Every rank starts from rank 0's weights (from scratch the fillers drew alike already; a
    // --weights or --resume file could differ if it changed on disk meanwhile). The display loss
    // rides with the gradients: every rank shows the global batch's.
    reducer_ = std::make_unique<distributed::GradientReducer>(*train_net_, *group_, ctx_, ddp,
                                                              &progress_->loss_sum());
    reducer_->broadcast_state();
  }
}

// The next training batch from the loader, staged for the next feed; the time the step waits
// for it is a span of data_wait_ (on a GPU, what of it the compute stream sits idle for).
void TrainingRun::stage_next() {
  data_wait_.begin();
  feeder_.stage(train_loader_->next());
  data_wait_.end();
}

// iter_size forward/backward passes, then one solver step. The step's losses are summed on the
// device and read back once per display window, so a GPU step never waits for the host. With
// cuda_graph (GPU only) forward, backward and the loss sum are captured once, at this process's
// second pass (the first allocates every buffer), and replayed. With several processes the last
// pass's backward also averages the gradients over the ranks, bucket by bucket as backward
// finishes them (apps/distributed/gradient_reducer.h). Returns false, the update not applied,
// when on_nonfinite is skip or rollback and the loss or a gradient is not finite.
bool TrainingRun::step(int64_t iter) {
  // With several processes the graph holds the gradients' exchange too (NCCL's calls are
  // captured): one graph serves every pass only when each pass reduces, so iter_size > 1 runs
  // without one.
  const bool use_graph =
      ctx_.device().is_cuda() && loop_.cuda_graph && (!reducer_ || solver_->iter_size() == 1);
  const bool check = loop_.on_nonfinite != OnNonfinite::stop;
  Tensor& loss_sum = progress_->loss_sum();
  if (check) loss_before_ = loss_sum.to_vector()[0];
  if (loop_.on_nonfinite == OnNonfinite::skip) {
    nonfinite_check_.keep_buffers(train_net_->buffers());
  }
  if (reducer_) reducer_->begin_step(interrupt_ != nullptr && interrupt_->requested());
  for (int k = 0; k < solver_->iter_size(); ++k) {
    feeder_.feed(*train_net_, &data_wait_);
    if (test_nan_.due(iter + 1)) {
      ctx_.fill(train_net_->blob(train_net_->inputs()[0].first).value, NAN);
    }
    ++position_;
    images_here_ += train_net_->batch_size();
    state_.window_images += train_net_->batch_size();
    const bool last_batch = iter + 1 == loop_.max_iter && k + 1 == solver_->iter_size();
    if (!last_batch) stage_next();
    // The gradients are averaged over the ranks once they hold the whole iteration's sum.
    const bool reduce = reducer_ && k + 1 == solver_->iter_size();
    auto forward_backward = [&] {
      train_net_->forward(ctx_);
      for (const auto& [top, weight] : train_net_->loss_tops()) {
        kernels::axpy(ctx_, weight / float(solver_->iter_size()), top->value, loss_sum);
      }
      if (reduce) {
        train_net_->backward(ctx_, [&](size_t layer) { reducer_->after_layer(layer); });
        reducer_->join();
      } else {
        train_net_->backward(ctx_);
      }
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
  if (reducer_) reducer_->end_step();
  const std::vector<Param*>& params = train_net_->learnable_params();
  if (test_inf_grad_.due(iter + 1) && !params.empty()) {
    ctx_.fill(params[0]->grad, INFINITY);  // the test hook: one step's gradients overflow
  }
  if (scaler_.enabled() && !scaler_.unscale(params, ctx_)) {
    // A loss that is not finite is divergence, not an overflow of the scaled gradients: it goes
    // to solver.on_nonfinite (at once with skip or rollback, at the display line with stop).
    if (check && !std::isfinite(loss_sum.to_vector()[0])) return false;
    skip_overflowed_step(iter);
    return true;
  }
  if (check && !nonfinite_check_.finite(params, loss_sum)) return false;
  solver_->step(params, iter, ctx_, scaler_.state().skipped);
  if (scaler_.enabled() && scaler_.update(true)) {
    train_net_->set_loss_scale(scaler_.scale());
    graph_.reset();
  }
  ++state_.window_iterations;
  return true;
}

// An overflowed loss-scaled step: its gradients dropped, the scale backed off (a new constant in
// the captured step: the graph is captured again). Its loss, unscaled and finite (one that is not
// is divergence, solver.on_nonfinite's), stays in the display window like any other, and the
// buffers keep what its forward pass made of them: only the backward overflowed.
void TrainingRun::skip_overflowed_step(int64_t iter) {
  const float scale = scaler_.scale();
  train_net_->zero_param_grads(ctx_);
  ++state_.window_iterations;
  if (scaler_.update(false)) {
    train_net_->set_loss_scale(scaler_.scale());
    graph_.reset();
  }
  ++summary_.overflows;
  log_->print(fmt::format(
      "iteration {}: gradients overflowed at loss scale {}; step skipped, {}", iter + 1, scale,
      scaler_.config().dynamic ? fmt::format("scale now {}", scaler_.scale())
                               : std::string("the scale is fixed (solver.loss_scale)")));
}

Scalars TrainingRun::test(int64_t done) {
  if (!test_net_) return {};
  const auto begin = Clock::now();
  if (reducer_) reducer_->broadcast_state();  // rank 0's running statistics, as checkpointed
  Scalars results = run_test(*test_net_, *test_loader_, ctx_, [this](Net&) {
    if (group_) group_->heartbeat();
  });
  if (group_) results = reduce_test(results);
  progress_->pause_since(begin);
  log_->print(fmt::format("test  iter {:>6}  {}", done, format_outputs(results)));
  metrics_->test(done, epoch(), results);
  update_best(state_.best, loop_, results, done);
  return results;
}

Scalars TrainingRun::reduce_test(const Scalars& here) {
  // sums[i] = mean_i x samples on this rank; the last entry counts the samples.
  const int64_t samples = test_loader_->samples_per_epoch();
  std::vector<float> sums;
  for (const auto& entry : here) sums.push_back(float(entry.second * double(samples)));
  sums.push_back(float(samples));
  const Tensor host = Tensor::from_vector(Shape{int64_t(sums.size())}, sums);
  Tensor t(host.shape(), DType::f32, ctx_.device(), &ctx_.allocator());
  ctx_.copy(t, host);
  group_->all_reduce(t.data<float>(), t.numel(), distributed::Reduce::sum, ctx_.stream());
  ctx_.synchronize();
  sums = t.to_vector();
  Scalars all = here;
  for (size_t i = 0; i < all.size(); ++i) all[i].second = double(sums[i]) / double(sums.back());
  return all;
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
  state_.loss_scale =
      scaler_.enabled() ? std::optional<LossScaleState>(scaler_.state()) : std::nullopt;
  if (!leader()) {  // rank 0 writes the checkpoint (every rank holds the same weights)
    progress_->pause_since(begin);
    return true;
  }
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

TrainSummary TrainingRun::run() {
  try {
    return run_steps();
  } catch (const CheckpointWriteError& e) {
    return stop_write_failed(e.what());
  }
}

TrainSummary TrainingRun::run_steps() {
  InterruptGuard interrupt;
  interrupt_ = &interrupt;
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
  stage_next();
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
    // With several processes a signal on any rank stops every rank after the same iteration: the
    // ranks' votes travel with the gradients (distributed/gradient_reducer.h).
    const bool interrupted = reducer_ ? reducer_->stop_votes() > 0 : interrupt.requested();
    if (interrupted || done == options_.stop_after) {
      if (!save(done, test_due)) {
        stop_report_ =
            fmt::format("a parameter is not finite at iteration {}: {}", done, diagnose());
        return stop_diverged(done);
      }
      log_->print(
          fmt::format("{} after iteration {}: checkpoint {}; continue with "
                      "crema train {} --resume {}",
                      interrupted ? "interrupted" : "stopped", done, summary_.checkpoint,
                      options_.config_path, start_.run_dir));
      summary_.stopped = true;
      summary_.interrupted = interrupted;
      // A rank stopped by another's signal exits as SIGTERM would have it (143).
      summary_.signal = interrupt.requested() ? interrupt.signal_number() : SIGTERM;
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
  // Every rank trains as many images in about the same time: the job's rate is world x this one's.
  summary_.images_per_second = double(images_here_) * (group_ ? group_->size() : 1) / seconds;
  summary_.data_wait_share = data_wait_.seconds() / seconds;
  summary_.loader_wait_share = (train_loader_->wait_seconds() - wait_at_start_) / seconds;
  summary_.final_test = test(loop_.max_iter);
  if (!save(loop_.max_iter, false)) {
    stop_report_ =
        fmt::format("a parameter is not finite at iteration {}: {}", loop_.max_iter, diagnose());
    return stop_diverged(loop_.max_iter);
  }
  if (!leader()) return summary_;
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
