// The training run behind `crema train`: from a resolved config and a Context to a trained run
// directory. apps/train_command.cpp turns the command line into these arguments; everything after
// that lives in this folder (apps/training/README.md says how a step flows).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace crema {

class ConfigNode;
class Context;
class LayerRegistry;
namespace distributed {
class ProcessGroup;
}

// What a training run measured, for tests and the benchmark.
struct TrainSummary {
  int64_t iterations = 0;          // completed, resumed ones included
  double first_loss = 0.0;         // mean over this process's first display window
  double last_loss = 0.0;          // mean over the last display window
  double images_per_second = 0.0;  // training steps only
  // Of the training loop's time: how long training waited for data (on a GPU, the compute
  // stream idle for the next batch: DataWaitMeter, data_wait.h), and how long the host blocked in
  // the loader's next() (on a GPU mostly while the stream still had a step queued).
  double data_wait_share = 0.0;
  double loader_wait_share = 0.0;
  std::vector<std::pair<std::string, double>> final_test;  // e.g. accuracy, loss
  std::string run_dir;
  std::string checkpoint;     // the last checkpoint written
  bool stopped = false;       // ended before max_iter, with a checkpoint (Ctrl-C or --stop-after)
  bool interrupted = false;   // that was a signal (SIGINT, SIGTERM): the command exits with
  int signal = 0;             // 128 + this signal's number (130, 143)
  bool diverged = false;      // stopped by a non-finite loss or gradient: exits with 3
  bool write_failed = false;  // stopped as a checkpoint or final.safetensors could not be
                              // written (solver.on_write_error): exits with 4
  int64_t skipped_steps = 0;  // solver.on_nonfinite: skip: steps not applied
  int64_t overflows = 0;      // loss scaling: steps skipped as their gradients overflowed
  int64_t rollbacks = 0;      // solver.on_nonfinite: rollback: checkpoints reloaded
};

namespace training {

// How to run: the run's name and seed as the config resolved them, and the command line's say.
struct RunOptions {
  std::string config_path;  // the YAML file, named in config.yaml and in the resume hint
  std::string name;         // the run's name: runs/<name> unless out_dir is given
  uint64_t seed = 1;
  std::string out_dir;     // --out
  std::string weights;     // --weights: start from these weights, copied by layer name
  std::string resume;      // --resume: a run directory or a checkpoint to continue
  std::string algo_cache;  // --algo-cache: written back at every checkpoint
  int64_t stop_after = 0;  // --stop-after: stop after this iteration, as Ctrl-C
  bool live_progress = false;
  // Training on several processes, one per GPU (apps/distributed/README.md): this process's
  // group; null for a run of one process.
  distributed::ProcessGroup* group = nullptr;
};

// Trains the net of `config` (its data, model and solver sections) on `ctx`: from scratch, from
// --weights, or continuing --resume; tests every solver.test_interval iterations and at the end,
// checkpoints every solver.snapshot_interval iterations, and writes the run directory
// (apps/README.md lists its files). Throws crema::Error for anything the user should fix, before
// anything is written.
TrainSummary run(const ConfigNode& config, Context& ctx, const LayerRegistry& layers,
                 const RunOptions& options, std::ostream& out);

}  // namespace training
}  // namespace crema
