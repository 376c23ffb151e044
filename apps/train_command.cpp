// crema train: the command line's options into a training run. The loop, its checkpoints, logs
// and progress live in apps/training/ (its README.md says how a step flows). Started by a
// launcher of several processes (crema train --gpus, torchrun, srun, mpirun), it first joins the
// job: apps/distributed/README.md.
#include <memory>
#include <ostream>
#include <string>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/distributed/process_group.h"
#include "apps/distributed/rendezvous.h"
#include "apps/distributed/watchdog.h"
#include "apps/distributed/world.h"
#include "apps/session.h"
#include "apps/training/training.h"

namespace crema {

TrainSummary train_command(const CommandOptions& options, std::ostream& out) {
  const std::optional<distributed::World> world =
      distributed::read_world(distributed::process_environment());
  const bool several = world && world->size > 1;
  CommandOptions here = options;
  if (several && !options.device_given) here.device = fmt::format("cuda:{}", world->local_rank);
  Session s(here);
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
  if (!several) return training::run(s.root, *s.ctx, s.registry, run, out);

  // Every rank must train the same config: its resolved text and the seed, hashed.
  const uint64_t hash =
      distributed::config_hash(s.root.to_yaml() + fmt::format("\nseed: {}\n", s.seed));
  const std::unique_ptr<distributed::ProcessGroup> group =
      distributed::join_process_group(*world, s.ctx->device(), hash, options.timeout);
  distributed::Watchdog watchdog(*group, options.timeout);
  run.group = group.get();
  const TrainSummary summary = training::run(s.root, *s.ctx, s.registry, run, out);
  s.ctx->synchronize();
  watchdog.finish();
  return summary;
}

}  // namespace crema
