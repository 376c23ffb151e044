// `crema train CONFIG --gpus 0,1` (or `--gpus all`): one training process per GPU on this host,
// as torchrun --nproc-per-node would start them. The parent re-runs its own binary (/proc/self/exe)
// once per GPU with the same arguments, `--gpus` replaced by `--device cuda:G`, and the variables
// of a torchrun job (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT: the
// caller's MASTER_PORT, else a free port). Then it waits:
//
//   - Ctrl-C or SIGTERM to the parent is passed on to every child once (the children run in
//     their own process group, so a terminal's Ctrl-C does not reach them twice); they stop
//     together after one checkpoint, and the parent exits with 128 + the signal.
//   - A child that fails is named ("rank 1 (cuda:1) exited with 5", "was killed by signal 9")
//     and the others get SIGTERM (one still in the rendezvous would otherwise wait for the
//     timeout); the parent exits with the first failure's status (128 + signal for a signal).
#pragma once

#include <string>
#include <vector>

namespace crema::distributed {

// `args`: the command line after the program's name, `--gpus` already removed. Returns the exit
// status for the parent. `device_format` names a child's device from its GPU index: "cuda:{}";
// the tests pass "cpu" (CREMA_TEST_LAUNCH_CPU, main.cpp) to run the launcher without a GPU.
int launch_per_gpu(const std::vector<int>& gpus, const std::vector<std::string>& args,
                   const std::string& device_format = "cuda:{}");

// The command line without `--gpus X` / `--gpus=X` (for the children).
std::vector<std::string> without_gpus_option(const std::vector<std::string>& args);

// A TCP port that nobody listens on now (the kernel's choice), for MASTER_PORT.
int free_port();

}  // namespace crema::distributed
