// Where a run starts: from the nets' fillers, from --weights (copied by layer name) or from a
// --resume checkpoint (everything restored exactly), and the run directory it is written to.
// Everything is read and checked before anything is written, so bad input never damages a run
// on disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "apps/training/checkpoint.h"
#include "apps/training/training.h"
#include "core/context.h"
#include "core/net.h"
#include "optim/solver.h"

namespace crema::training {

struct StartingPoint {
  std::optional<Checkpoint> resumed;  // --resume: the checkpoint continued
  WeightsReport weights;              // --weights: what was copied and what was not
  std::string run_dir;                // where the run is written
};

// Loads --weights into `net`, or restores the --resume checkpoint into `net`, the solver's state,
// the layers' run state and ctx's random generator after checking that it is the same run as
// `state` describes (model, seed, batch size, iter_size, solver); `state` then takes the saved
// one (its model YAML excepted). Throws crema::Error naming the mismatch.
StartingPoint load_starting_point(const RunOptions& options, Net& net, Solver& solver, Context& ctx,
                                  int64_t max_iter, TrainingState& state);

// "weights from F: copied N tensors; not in the file, so they keep their fillers: ...; in the
// file but not in this model (ignored): ..."
std::string weights_message(const std::string& path, const WeightsReport& report);

// Creates the run directory and writes config.yaml (the resolved config, `resolved_yaml`). A new
// run in a directory that holds an earlier run's checkpoints removes them; returns whether it did.
// Throws crema::Error "the run directory '<dir>' is not writable: ..." (with the system's reason)
// when it cannot be created or written: before the first step, so nothing is trained in vain.
bool open_run_dir(const std::string& run_dir, bool resumed, const std::string& config_path,
                  const std::string& resolved_yaml);

}  // namespace crema::training
