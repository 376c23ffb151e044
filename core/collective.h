// Collective: what a layer may ask of the other processes of a run that trains on several (one
// process per GPU, apps/distributed/): today SyncBatchNorm's per-channel sums. Declared here so
// that layers reach the other ranks without knowing how; implemented by apps/distributed's process
// group (NCCL on a GPU, the rendezvous sockets on the CPU). core and layers never depend on apps.
//
// A layer that needs it says so by deriving from UsesCollective; the training run of several
// processes hands the run's collective to each such layer of its net after building it (no global,
// and a layer of a one-process run simply has none).
//
// Every rank makes the same calls with the same shapes in the same order (a collective pairs up
// across the ranks); a rank that does not would hang the others until the run's watchdog stops
// them.
#pragma once

#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema {

class Collective {
 public:
  virtual ~Collective() = default;
  // How many processes the run has (1: the collectives change nothing).
  virtual int ranks() const = 0;
  // t <- the sum over the ranks of their t, in place: f32 or f64, contiguous, on the device of
  // the run, ordered on `stream` (the Context's; null on the CPU, where the call blocks).
  virtual void all_reduce_sum(Tensor& t, gpu::Stream stream) = 0;
};

// A layer that reaches the other ranks. The collective outlives the layer's use of it (the run
// owns both); null: a run of one process.
class UsesCollective {
 public:
  virtual void set_collective(Collective* collective) = 0;

 protected:
  ~UsesCollective() = default;
};

}  // namespace crema
