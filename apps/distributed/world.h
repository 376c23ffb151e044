// Who this process is in a training job of several processes, one per GPU: its rank, the number
// of ranks, its GPU on this host, and where rank 0 listens. Read from the environment that the
// launcher of the job sets, in this order (the first that is present decides):
//
//   crema train --gpus / torchrun   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//   Slurm's srun                    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ MASTER_ADDR,
//                                   MASTER_PORT, which the job script exports)
//   Open MPI's mpirun               OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                                   OMPI_COMM_WORLD_LOCAL_RANK (+ MASTER_ADDR, MASTER_PORT)
//
// MASTER_PORT defaults to 29500 (torchrun's); MASTER_ADDR has no default when the world has
// several ranks (a wrong guess would wait for a rank 0 that is elsewhere). A world of one rank is
// a plain run. Bad values (not a number, rank >= size, a port outside 1..65535) are one-line
// errors naming the variable and the launcher it belongs to.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace crema::distributed {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;       // this process's index on its host: its GPU, cuda:local_rank
  std::string launcher;     // "torchrun", "srun" or "mpirun" (for messages)
  std::string master_addr;  // rank 0's host
  int master_port = 29500;  // rank 0 listens there for the rendezvous
};

// Looks up an environment variable; returns nullopt when it is not set.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
// The process's environment.
Environment process_environment();

// The world the environment describes, or nullopt when no launcher's variables are set.
// Throws crema::Error for a bad value.
std::optional<World> read_world(const Environment& env);

// `--gpus`: "all" (every GPU of `device_count`) or a comma-separated list of distinct indices
// ("0,1", "2,3"). Throws crema::Error naming the GPU that does not exist and those that do.
std::vector<int> parse_gpu_list(const std::string& text, int device_count);

}  // namespace crema::distributed
