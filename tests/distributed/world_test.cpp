// Who a process is in a job: the variables of torchrun, srun and mpirun, their bad values, and
// `--gpus`.
#include <gtest/gtest.h>

#include <map>

#include "apps/distributed/world.h"
#include "tests/support/error_text.h"

namespace crema::distributed {
namespace {

using testing::error_of;

Environment env_of(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(World, NoLauncherVariablesIsAPlainRun) {
  EXPECT_FALSE(read_world(env_of({})));
}

TEST(World, TorchrunVariables) {
  const auto w = read_world(env_of({{"RANK", "3"},
                                    {"WORLD_SIZE", "4"},
                                    {"LOCAL_RANK", "1"},
                                    {"MASTER_ADDR", "node7"},
                                    {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->rank, 3);
  EXPECT_EQ(w->size, 4);
  EXPECT_EQ(w->local_rank, 1);
  EXPECT_EQ(w->master_addr, "node7");
  EXPECT_EQ(w->master_port, 29400);
  EXPECT_EQ(w->launcher, "torchrun");
}

TEST(World, SrunVariablesWithTheDefaultPort) {
  const auto w = read_world(env_of({{"SLURM_PROCID", "5"},
                                    {"SLURM_NTASKS", "8"},
                                    {"SLURM_LOCALID", "1"},
                                    {"MASTER_ADDR", "10.0.0.2"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->rank, 5);
  EXPECT_EQ(w->size, 8);
  EXPECT_EQ(w->local_rank, 1);
  EXPECT_EQ(w->master_port, 29500);
  EXPECT_EQ(w->launcher, "srun");
}

TEST(World, MpirunVariables) {
  const auto w = read_world(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                    {"OMPI_COMM_WORLD_SIZE", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                    {"MASTER_ADDR", "head"},
                                    {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->rank, 1);
  EXPECT_EQ(w->local_rank, 1);
  EXPECT_EQ(w->launcher, "mpirun");
}

TEST(World, TorchrunsVariablesWinOverSlurmsInsideAnAllocation) {
  const auto w = read_world(env_of({{"RANK", "0"},
                                    {"WORLD_SIZE", "2"},
                                    {"SLURM_PROCID", "0"},
                                    {"SLURM_NTASKS", "1"},
                                    {"MASTER_ADDR", "h"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->size, 2);
  EXPECT_EQ(w->launcher, "torchrun");
}

TEST(World, AOneRankJobNeedsNoMasterAddr) {
  const auto w = read_world(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->size, 1);
}

TEST(World, BadValuesAreOneLineNamingTheVariable) {
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto values = good;
    values[name] = value;
    return env_of(values);
  };
  std::string e = error_of([&] { read_world(with("RANK", "one")); });
  EXPECT_CONTAINS(e, "RANK=one: expected an integer from 0 to 1 (torchrun job)");
  e = error_of([&] { read_world(with("RANK", "2")); });
  EXPECT_CONTAINS(e, "RANK=2: expected an integer from 0 to 1");
  e = error_of([&] { read_world(with("WORLD_SIZE", "0")); });
  EXPECT_CONTAINS(e, "WORLD_SIZE=0");
  e = error_of([&] { read_world(with("MASTER_PORT", "70000")); });
  EXPECT_CONTAINS(e, "MASTER_PORT=70000: expected an integer from 1 to 65535");
  e = error_of([&] { read_world(with("LOCAL_RANK", "-1")); });
  EXPECT_CONTAINS(e, "LOCAL_RANK=-1");
  e = error_of([&] { read_world(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}})); });
  EXPECT_CONTAINS(e, "MASTER_ADDR is not set: a torchrun job of 2 ranks needs the host of rank 0");
  e = error_of([&] { read_world(env_of({{"SLURM_PROCID", "0"}, {"MASTER_ADDR", "h"}})); });
  EXPECT_CONTAINS(e, "SLURM_NTASKS is not set (a srun job sets it)");
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(GpuList, ListsAndAll) {
  EXPECT_EQ(parse_gpu_list("0,1", 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_gpu_list("3,1", 4), (std::vector<int>{3, 1}));
  EXPECT_EQ(parse_gpu_list("all", 3), (std::vector<int>{0, 1, 2}));
}

TEST(GpuList, AGpuThatDoesNotExistIsNamedWithThoseThatDo) {
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("0,2", 2); }),
                  "--gpus 0,2: cuda:2 does not exist; this machine has 2 GPU(s): cuda:0..cuda:1");
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("0", 0); }),
                  "--gpus 0: cuda:0 does not exist; this machine has no GPU");
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("all", 0); }),
                  "--gpus all: this machine has no GPU");
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("0,x", 2); }), "'x' is not a GPU index");
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("0,", 2); }), "'' is not a GPU index");
  EXPECT_CONTAINS(error_of([] { parse_gpu_list("1,1", 2); }), "cuda:1 is named twice");
}

}  // namespace
}  // namespace crema::distributed
