// How a training run ends early -- a non-finite loss or gradient (solver.on_nonfinite: skip,
// roll back, stop), a checkpoint that cannot be written (solver.on_write_error) -- and the lines
// that open and close a run. The loop itself is loop.cpp.
#include <filesystem>

#include <fmt/format.h>

#include "apps/training/evaluation.h"
#include "apps/training/training_run.h"
#include "core/serialization.h"
#include "optim/param_groups.h"

namespace crema::training {

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
  if (scaler_.enabled()) {
    scaler_.set_state(state_.loss_scale.value_or(LossScaleState{scaler_.config().init}));
    train_net_->set_loss_scale(scaler_.scale());
    graph_.reset();
  }
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
      "{} {} on {}{} with {} thread(s): {} iterations of batch {}{} ({} per epoch), "
      "{} parameters{}, run in {}",
      start_.resumed ? "resume" : "train", options_.name, ctx_.device().str(),
      group_ ? fmt::format(" (rank {} of {}, {} launch; batch {} per rank)", group_->rank(),
                           group_->size(), group_->world().launcher,
                           train_loader_->options().batch_size)
             : "",
      ctx_.num_threads(), loop_.max_iter, state_.batch_size,
      solver_->iter_size() > 1 ? fmt::format(" x {} passes", solver_->iter_size()) : "",
      train_loader_->batches_per_epoch(), parameters.trainable,
      parameters.frozen > 0 ? fmt::format(" trained and {} frozen", parameters.frozen) : "",
      start_.run_dir));
  if (start_.resumed) {
    const std::string& notes = start_.resumed->notes;
    log_->print(fmt::format("resumed from {} at iteration {}{}", start_.resumed->dir, first_iter_,
                            notes.empty() ? "" : " (" + notes + ")"));
  }
  if (scaler_.enabled()) {
    const LossScaleConfig& c = scaler_.config();
    log_->print(c.dynamic ? fmt::format("loss scaling: scale {}, x {} after {} finite steps in a "
                                        "row, x {} at an overflow (solver.loss_scale)",
                                        scaler_.scale(), c.growth_factor, c.growth_interval,
                                        c.backoff_factor)
                          : fmt::format("loss scaling: a fixed scale of {} (solver.loss_scale)",
                                        scaler_.scale()));
  }
}

void TrainingRun::print_end() {
  const std::string& run_dir = start_.run_dir;
  // On a GPU the host's wait in the loader overlaps the queued step; the stream's idle time is
  // what the data cost.
  const std::string waited =
      ctx_.device().is_cuda()
          ? fmt::format(
                "the GPU stalled on data {:.1f}% of the time (the host waited in the "
                "loader {:.1f}%)",
                100.0 * summary_.data_wait_share, 100.0 * summary_.loader_wait_share)
          : fmt::format("waiting on data {:.1f}% of the time", 100.0 * summary_.data_wait_share);
  log_->print(
      fmt::format("trained {} iterations: {:.0f} img/s, {}; weights in {}/final.safetensors",
                  loop_.max_iter, summary_.images_per_second, waited, run_dir));
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
  if (scaler_.enabled()) {
    log_->print(fmt::format("loss scale {} at the end; {} step(s) skipped for overflowed gradients",
                            scaler_.scale(), scaler_.state().skipped));
  }
  if (!summary_.final_test.empty()) {
    log_->print("final test: " + format_outputs(summary_.final_test));
  }
}

void TrainingRun::mark_failed(const std::string& error) {
  if (!leader() || start_.resumed || !summary_.checkpoint.empty()) return;
  write_file_atomic(
      start_.run_dir + "/FAILED",
      "error: " + error + "\nno checkpoint was written; this run cannot be resumed\n");
}

}  // namespace crema::training
