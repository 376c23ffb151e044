// crema train: the command line's options into a training run. The loop, its checkpoints, logs
// and progress live in apps/training/ (its README.md says how a step flows).
#include <ostream>

#include "apps/commands.h"
#include "apps/session.h"
#include "apps/training/training.h"

namespace crema {

TrainSummary train_command(const CommandOptions& options, std::ostream& out) {
  Session s(options);
  training::RunOptions run;
  run.config_path = options.config;
  run.name = s.name;
  run.seed = s.seed;
  run.out_dir = options.out_dir;
  run.weights = options.weights;
  run.resume = options.resume;
  run.algo_cache = options.algo_cache;
  run.stop_after = options.stop_after;
  run.live_progress = options.live_progress;
  return training::run(s.root, *s.ctx, s.registry, run, out);
}

}  // namespace crema
