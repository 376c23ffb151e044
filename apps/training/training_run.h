// TrainingRun: the state of one training run and its parts, shared by loop.cpp (the constructor,
// the step, tests, checkpoints and the loop) and run_stops.cpp (how a run ends early: a
// non-finite value, a failed write; the start and end lines). Internal to apps/training/.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "apps/distributed/gradient_reducer.h"
#include "apps/distributed/process_group.h"
#include "apps/training/checkpoint.h"
#include "apps/training/data_wait.h"
#include "apps/training/divergence.h"
#include "apps/training/input_feeder.h"
#include "apps/training/interrupt.h"
#include "apps/training/progress.h"
#include "apps/training/run_log.h"
#include "apps/training/starting_point.h"
#include "apps/training/train_settings.h"
#include "apps/training/training.h"
#include "core/net.h"
#include "data/loader.h"
#include "optim/loss_scale.h"
#include "optim/solver.h"

namespace crema::training {

// An instantiated CUDA graph of the training step, destroyed with the run.
struct StepGraph {
  gpu::Graph exec = nullptr;
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph() { gpu::destroy_graph(exec); }
  // Drops the graph, so that the next step captures a new one (a new loss scale is a new constant
  // in the captured pass).
  void reset() {
    gpu::destroy_graph(exec);
    exec = nullptr;
  }
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
  void stage_next();
  bool step(int64_t iter);
  void skip_overflowed_step(int64_t iter);
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
  // Training on several processes (apps/distributed/): rank 0 alone writes the run directory,
  // checkpoints and final weights; the other ranks log into <run>/rank<r>/.
  bool leader() const { return group_ == nullptr || group_->rank() == 0; }
  // The test outputs of every rank's shard, as one mean over the whole test set.
  Scalars reduce_test(const Scalars& here);
  double epoch() const { return double(position_) / double(train_loader_->batches_per_epoch()); }

  const RunOptions& options_;
  Context& ctx_;
  distributed::ProcessGroup* group_;                       // null: one process
  std::unique_ptr<distributed::GradientReducer> reducer_;  // with group_
  const InterruptGuard* interrupt_ = nullptr;              // while run_steps runs
  std::ostream null_stream_{nullptr};                      // what ranks other than 0 print to
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
  DataWaitMeter data_wait_{training_timeline(ctx_)};  // the steps' waits for data
  std::unique_ptr<Progress> progress_;

  InputFeeder feeder_;
  StepGraph graph_;
  LossScaler scaler_;  // solver.loss_scale (optim/loss_scale.h); disabled in fp32 by default
  NanInjection test_nan_{"CREMA_TEST_NAN_AT", "CREMA_TEST_NAN_TIMES"};
  NanInjection test_inf_grad_{"CREMA_TEST_INF_GRAD_AT", "CREMA_TEST_INF_GRAD_TIMES"};
  NonfiniteCheck nonfinite_check_{ctx_};
  float loss_before_ = 0.0f;  // the loss sum before the step being checked
  std::string stop_report_;   // what stopped a diverged run
  int64_t position_ = 0;      // training batches fed so far: the data stream's position
  int64_t first_iter_ = 0, images_here_ = 0;
  double wait_at_start_ = 0.0;
  TrainSummary summary_;
};

}  // namespace crema::training
