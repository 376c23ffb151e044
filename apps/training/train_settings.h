// The keys of `solver:` that the training loop reads (the update rule's keys are optim/'s):
//
//   max_iter: 5000           iterations (solver steps); or
//   max_epochs: 10           passes over the training set (max_iter wins when both are given)
//   display: 100             a log line and a metrics row every N iterations
//   test_interval: 1000      a test pass every N iterations (0: only at the end)
//   snapshot_interval: 1000  a checkpoint every N iterations (0: only at the end, at a new best
//                            test metric, and at Ctrl-C)
//   keep_best: accuracy      a test output: the checkpoint with its best value is kept as
//                            checkpoints/best beside checkpoints/last
//   keep_best_mode: max      max or min (default: min for outputs named *loss*, else max)
//   cuda_graph: true         on a GPU, replay the forward/backward pass as a CUDA graph
//   on_nonfinite: stop       what a NaN or infinite loss or gradient does
//   (apps/training/README.md):
//                            stop (exit code 3), skip the step, or rollback to the last checkpoint
//                            (apps/README.md, "Divergence")
//   rollback_lr_factor: 0.5  rollback: the learning rate is multiplied by this at each rollback
//   max_rollbacks: 3         rollback: after this many, the next non-finite step stops the run
//   on_write_error: stop     a checkpoint that cannot be written (disk full, I/O error): stop
//                            (exit code 4, the last checkpoint whole) or continue (a warning;
//                            the next checkpoint tries again) (apps/training/README.md)
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace crema {

enum class OnNonfinite { stop, skip, rollback };
enum class OnWriteError { stop, keep_going };

struct LoopSettings {
  int64_t max_iter = 0;
  int64_t test_interval = 0;
  int64_t display = 100;
  int64_t snapshot_interval = 0;
  std::string keep_best;  // "" when no best checkpoint is kept
  bool keep_best_max = true;
  bool cuda_graph = true;
  OnNonfinite on_nonfinite = OnNonfinite::stop;
  double rollback_lr_factor = 0.5;
  int64_t max_rollbacks = 3;
  OnWriteError on_write_error = OnWriteError::stop;
};

// Reads the keys above; an epoch is `batches_per_epoch` batches, and with solver.iter_size
// batches per iteration, max_epochs counts iterations of iter_size batches.
LoopSettings read_loop_settings(const ConfigNode& solver, int64_t batches_per_epoch);

}  // namespace crema
