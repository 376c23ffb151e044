// Divergence: what the training loop uses when the loss or a gradient holds a NaN or an infinity
// (solver.on_nonfinite: stop | skip | rollback; loop.cpp applies the mode).
//
// Detection reads sums the device already keeps, so it costs no synchronization where none is
// needed. With `stop` (the default) the display window's loss sum is read at each display line,
// as it always was, and the parameters and buffers are read back and checked before each
// checkpoint is written (a second copy to the host of what the checkpoint copies anyway), so no
// checkpoint holds a diverged run; a step that went non-finite is found at the next display line
// (solver.display: 1 names the exact iteration). `skip` and `rollback` must know before the
// solver step, so NonfiniteCheck sums every gradient into one device scalar (a sum is NaN or
// infinite when one of its terms is, or when finite gradients overflow float, which is divergence
// too) and reads it back with the loss sum: one synchronization per step. It adds one reduction
// and one axpy per parameter after the captured graph, never inside it, and on a GPU the host no
// longer runs ahead of the device by a step (CPU LeNet: within run-to-run noise).
//
// Once found, diagnose_nonfinite names the culprit by re-running forward layer by layer on the
// batch the net still holds and scanning the parameters: slow, but it happens once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/training/checkpoint.h"
#include "core/context.h"
#include "core/net.h"
#include "optim/solver.h"

namespace crema::training {

// The per-step check of skip and rollback.
class NonfiniteCheck {
 public:
  explicit NonfiniteCheck(Context& ctx) : ctx_(ctx) {}
  // Whether `loss_sum` and the sum of every gradient of the parameters not frozen are finite.
  // Reads two device scalars back (a synchronization on a GPU).
  bool finite(const std::vector<Param*>& params, const Tensor& loss_sum);
  // Skip: a step's forward pass updates the buffers (batch norm's running statistics) even when
  // its update is dropped, so they are kept before each step (device copies, a few KB) and put
  // back when the step is skipped.
  void keep_buffers(const std::vector<Buffer*>& buffers);
  void restore_buffers(const std::vector<Buffer*>& buffers);

 private:
  Context& ctx_;
  Tensor grad_sum_, grad_flag_;  // device scalars: one gradient's sum, and their running sum
  std::vector<Tensor> kept_;     // by position in the buffers' list
};

// "layer 'conv1' is the first whose output is not finite (forward); conv1.weight is the first
// parameter whose gradient is not finite (backward)": what the net, as the step left it, shows.
// Runs forward again (dropout draws again, batch norm updates its statistics again).
std::string diagnose_nonfinite(Net& net, Context& ctx);

// A rollback's reload: checkpoint `dir`'s weights, buffers, solver state, layers' run state and
// random generator state copied into `net`, `solver` and `ctx`; returns its TrainingState.
TrainingState restore_checkpoint(const std::string& dir, Net& net, Solver& solver, Context& ctx);

// The test hooks, read from the environment: CREMA_TEST_NAN_AT=K fills the first net input with
// NaN in iteration K (counted from 1), CREMA_TEST_NAN_TIMES=N (default 1) times in all, so a
// rollback that runs iteration K again meets it again until N is spent; CREMA_TEST_INF_GRAD_AT=K
// (and CREMA_TEST_INF_GRAD_TIMES) puts an infinity into the first parameter's gradient after
// iteration K's backward, as an fp16 overflow would, the loss left finite (a loss-scaled run
// skips that step: optim/loss_scale.h). Tests set them; runs never do.
class NanInjection {
 public:
  // `at` and `times`: the two variables' names.
  NanInjection(const char* at, const char* times);
  // Whether iteration `iteration`'s first pass gets the NaN; counts it.
  bool due(int64_t iteration);

 private:
  int64_t iteration_ = 0, times_left_ = 0;
};

}  // namespace crema::training
