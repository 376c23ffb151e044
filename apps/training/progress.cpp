#include "apps/training/progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace crema::training {
namespace {

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

}  // namespace

Progress::Progress(Context& ctx, RunLog& log, MetricsLog& metrics, const Solver& solver,
                   DataWaitMeter& data_wait, Plan plan, TrainingState& state)
    : ctx_(ctx),
      log_(log),
      metrics_(metrics),
      solver_(solver),
      data_wait_(data_wait),
      plan_(std::move(plan)),
      state_(state) {}

void Progress::start(int64_t first_iter) {
  loss_sum_ = ctx_.zeros({});  // a scalar, like the loss tops
  rewind(first_iter);
}

void Progress::rewind(int64_t first_iter) {
  ctx_.fill(loss_sum_, state_.loss_sum);
  first_iter_ = first_iter;
  start_ = window_start_ = live_at_ = Clock::now();
  window_wait_base_ = data_wait_.seconds();
  live_done_ = first_iter;
  live_loss_base_ = state_.loss_sum, live_iters_base_ = state_.window_iterations;
}

double Progress::train_seconds() const {
  return seconds_between(start_, Clock::now());
}

double Progress::mean_rate(int64_t done) const {
  return double(done - first_iter_) / std::max(1e-9, train_seconds());
}

void Progress::pause_since(Clock::time_point begin) {
  const auto pause = Clock::now() - begin;
  start_ += pause;
  window_start_ += pause;
  live_at_ += pause;
}

bool Progress::after_step(int64_t done, int64_t position) {
  const int64_t per_epoch = plan_.batches_per_epoch;
  const bool epoch_ended = position / per_epoch != (position - plan_.iter_size) / per_epoch;
  draw_live(done, position, epoch_ended || done == plan_.max_iter);
  if (epoch_ended || done == plan_.max_iter) log_.end_live();
  if (done % plan_.display == 0 || done == plan_.max_iter) return display(done, position);
  return true;
}

void Progress::draw_live(int64_t done, int64_t position, bool force) {
  const auto now = Clock::now();
  if (!log_.is_live() || (!force && seconds_between(live_at_, now) < 0.25)) return;
  const double sum = double(loss_sum_.to_vector()[0]);  // synchronizes, 4 times a second at most
  const int64_t iters = state_.window_iterations - live_iters_base_;
  if (iters > 0) {
    const double recent = (sum - live_loss_base_) / double(iters);
    smoothed_loss_ = std::isnan(smoothed_loss_) ? recent : 0.8 * smoothed_loss_ + 0.2 * recent;
  }
  const double seconds = seconds_between(live_at_, now);
  const double rate = seconds > 0 ? double(done - live_done_) / seconds : 0.0;
  const int64_t per_epoch = plan_.batches_per_epoch;
  const int64_t epochs = (plan_.max_iter * plan_.iter_size + per_epoch - 1) / per_epoch;
  const int64_t epoch_now = std::min(epochs, (position - (force ? 1 : 0)) / per_epoch + 1);
  const int64_t images = plan_.batch_size * plan_.iter_size;
  log_.live(fmt::format(
      "epoch {}/{}  iter {}/{}  ETA {}  {:.1f} it/s  {:.0f} img/s  lr {:.4g}  loss {:.4f}",
      epoch_now, epochs, done, plan_.max_iter,
      duration_text(double(plan_.max_iter - done) / mean_rate(done)), rate, rate * double(images),
      solver_.learning_rate(done - 1), smoothed_loss_));
  live_at_ = now;
  live_done_ = done;
  live_loss_base_ = sum;
  live_iters_base_ = state_.window_iterations;
}

bool Progress::display(int64_t done, int64_t position) {
  const double sum = double(loss_sum_.to_vector()[0]);
  if (!std::isfinite(sum)) return false;
  if (state_.window_iterations == 0) return true;  // every step of the window was skipped
  const double mean_loss = sum / double(state_.window_iterations);
  const auto now = Clock::now();
  const double seconds = seconds_between(window_start_, now);
  const double lr = solver_.learning_rate(done - 1);
  const double its = double(state_.window_iterations) / seconds;
  const double ips = double(state_.window_images) / seconds;
  const double waited = data_wait_.seconds();
  if (!have_first_loss_) first_loss_ = mean_loss, have_first_loss_ = true;
  last_loss_ = mean_loss;
  log_.periodic(
      fmt::format("iter {:>6}  loss {:.6g}  lr {:.6g}  {:.0f} img/s  {:.1f} it/s  "
                  "epoch {:.2f}  ETA {}  data wait {:.1f}%",
                  done, mean_loss, lr, ips, its, epoch(position),
                  duration_text(double(plan_.max_iter - done) / mean_rate(done)),
                  100.0 * (waited - window_wait_base_) / seconds));
  metrics_.train(done, epoch(position),
                 {{"loss", mean_loss},
                  {"lr", lr},
                  {"images_per_second", ips},
                  {"iterations_per_second", its}});
  ctx_.fill(loss_sum_, 0.0f);
  state_.window_iterations = state_.window_images = 0;
  live_loss_base_ = 0.0, live_iters_base_ = 0;
  window_start_ = Clock::now();
  window_wait_base_ = waited;
  return true;
}

}  // namespace crema::training
