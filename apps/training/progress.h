// What the user sees of a training run while it goes, and the clocks behind it: the live line on
// a terminal (redrawn at most 4 times a second), the display line and metrics row every
// solver.display iterations, and the ETA. The display window's loss is summed on the device
// (`loss_sum`) and read back only for those lines, so a GPU step never waits for the host.
// Tests and checkpoint writes are not training time: `pause_since` takes them off the clocks.
// The display line ends with the window's share of time training waited for data (data_wait.h),
// read after the loss, when the host has waited for the stream anyway.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

#include "apps/training/checkpoint.h"
#include "apps/training/data_wait.h"
#include "apps/training/run_log.h"
#include "core/context.h"
#include "core/tensor.h"
#include "optim/solver.h"

namespace crema::training {

using Clock = std::chrono::steady_clock;

class Progress {
 public:
  // The run's shape, fixed for its length.
  struct Plan {
    int64_t max_iter = 0;
    int64_t display = 0;
    int64_t batches_per_epoch = 0;
    int64_t batch_size = 0;
    int iter_size = 1;
  };

  // `state` is the run's TrainingState: the open display window (its loss sum, iterations and
  // images) lives there, so that a checkpoint carries it. `data_wait` times the steps' waits.
  Progress(Context& ctx, RunLog& log, MetricsLog& metrics, const Solver& solver,
           DataWaitMeter& data_wait, Plan plan, TrainingState& state);

  // Starts the clocks, the first iteration of this process being `first_iter`.
  void start(int64_t first_iter);
  // Starts again from the TrainingState's window at `first_iter` (after a rollback), keeping the
  // device scalar that a captured CUDA graph writes to.
  void rewind(int64_t first_iter);
  // The device scalar the step adds its weighted losses to.
  Tensor& loss_sum() { return loss_sum_; }
  // After each step: the live line, and every solver.display iterations (and at the end) the
  // display line and a metrics row. `position` is the data stream's, in batches. Returns false,
  // printing nothing, when the display window's loss is no longer finite.
  bool after_step(int64_t done, int64_t position);
  // Takes the time since `begin` off the clocks (a test pass, a checkpoint write).
  void pause_since(Clock::time_point begin);
  // Training time since start(), pauses excluded.
  double train_seconds() const;

  double first_loss() const { return first_loss_; }
  double last_loss() const { return last_loss_; }

 private:
  void draw_live(int64_t done, int64_t position, bool force);
  bool display(int64_t done, int64_t position);
  double epoch(int64_t position) const {
    return double(position) / double(plan_.batches_per_epoch);
  }
  // Iterations per second of this process so far, `done` iterations in: what the ETA assumes.
  double mean_rate(int64_t done) const;

  Context& ctx_;
  RunLog& log_;
  MetricsLog& metrics_;
  const Solver& solver_;
  DataWaitMeter& data_wait_;
  const Plan plan_;
  TrainingState& state_;

  Tensor loss_sum_;  // a device scalar: the display window's summed loss
  int64_t first_iter_ = 0;
  Clock::time_point start_, window_start_, live_at_;
  double live_loss_base_ = 0.0, smoothed_loss_ = NAN;
  double window_wait_base_ = 0.0;  // data_wait_'s seconds when the display window opened
  int64_t live_iters_base_ = 0, live_done_ = 0;
  bool have_first_loss_ = false;
  double first_loss_ = 0.0, last_loss_ = 0.0;
};

}  // namespace crema::training
