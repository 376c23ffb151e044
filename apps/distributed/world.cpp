#include "apps/distributed/world.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::distributed {
namespace {

// The variables of one launcher.
struct Names {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
};

constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
};

// The integer value of `name` in [low, high]; `fallback` when unset.
int read_int(const Environment& env, const std::string& name, const std::string& launcher, int low,
             int high, std::optional<int> fallback) {
  const std::optional<std::string> text = env(name);
  if (!text) {
    if (fallback) return *fallback;
    throw Error(fmt::format("{} is not set (a {} job sets it)", name, launcher));
  }
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno != 0 || value < low || value > high) {
    throw Error(fmt::format("{}={}: expected an integer from {} to {} ({} job)", name, *text, low,
                            high, launcher));
  }
  return int(value);
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<World> read_world(const Environment& env) {
  for (const Names& names : kLaunchers) {
    if (!env(names.rank) && !env(names.size)) continue;
    World world;
    world.launcher = names.launcher;
    constexpr int kMaxRanks = 1 << 20;
    world.size = read_int(env, names.size, names.launcher, 1, kMaxRanks, std::nullopt);
    world.rank = read_int(env, names.rank, names.launcher, 0, world.size - 1, std::nullopt);
    world.local_rank = read_int(env, names.local_rank, names.launcher, 0, kMaxRanks, 0);
    world.master_port = read_int(env, "MASTER_PORT", names.launcher, 1, 65535, 29500);
    const std::optional<std::string> addr = env("MASTER_ADDR");
    if (addr && !addr->empty()) {
      world.master_addr = *addr;
    } else if (world.size > 1) {
      throw Error(fmt::format(
          "MASTER_ADDR is not set: a {} job of {} ranks needs the host of rank 0 (export "
          "MASTER_ADDR=<host>; MASTER_PORT defaults to 29500)",
          names.launcher, world.size));
    } else {
      world.master_addr = "127.0.0.1";
    }
    return world;
  }
  return std::nullopt;
}

std::vector<int> parse_gpu_list(const std::string& text, int device_count) {
  auto present = [&] {
    if (device_count == 0) return std::string("this machine has no GPU");
    return fmt::format("this machine has {} GPU(s): cuda:0..cuda:{}", device_count,
                       device_count - 1);
  };
  std::vector<int> gpus;
  if (text == "all") {
    if (device_count == 0) throw Error("--gpus all: " + present());
    for (int i = 0; i < device_count; ++i) gpus.push_back(i);
    return gpus;
  }
  std::set<int> seen;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    char* end = nullptr;
    const long index = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || index < 0 || index > 1 << 16) {
      throw Error(
          fmt::format("--gpus {}: '{}' is not a GPU index (expected e.g. 0,1 or all)", text, item));
    }
    if (index >= device_count) {
      throw Error(fmt::format("--gpus {}: cuda:{} does not exist; {}", text, index, present()));
    }
    if (!seen.insert(int(index)).second) {
      throw Error(fmt::format("--gpus {}: cuda:{} is named twice", text, index));
    }
    gpus.push_back(int(index));
    begin = comma + 1;
  }
  return gpus;
}

}  // namespace crema::distributed
