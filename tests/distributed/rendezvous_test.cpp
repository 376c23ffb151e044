// The TCP rendezvous, with the ranks as threads of this process: the unique id reaches every
// rank, mismatched configs are refused naming both hashes, a missing rank is named at the
// timeout, a port in use is one line. And the sockets' group's collectives.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "apps/distributed/launcher.h"
#include "apps/distributed/process_group.h"
#include "apps/distributed/rendezvous.h"
#include "tests/support/error_text.h"

namespace crema::distributed {
namespace {

using testing::error_of;

World world_of(int rank, int size, int port) {
  World w;
  w.rank = rank;
  w.size = size;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  w.launcher = "torchrun";
  return w;
}

// Runs rank r's `body` in thread r; returns each rank's error text ("" for none).
std::vector<std::string> run_ranks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> std::string {
      try {
        body(r);
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    }));
  }
  std::vector<std::string> errors;
  for (auto& f : results) errors.push_back(f.get());
  return errors;
}

TEST(Rendezvous, EveryRankReceivesRank0sIdAndKeepsItsConnections) {
  const int port = free_port();
  const std::string id(128, 'x');
  std::vector<Rendezvous> done(3);
  const auto errors = run_ranks(3, [&](int r) {
    done[size_t(r)] = rendezvous(world_of(r, 3, port), 42, r == 0 ? id : "", 20);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  for (const Rendezvous& rv : done) EXPECT_EQ(rv.unique_id, id);
  EXPECT_EQ(done[0].peers.size(), 3u);
  EXPECT_TRUE(done[0].peers[1].valid() && done[0].peers[2].valid());
  EXPECT_TRUE(done[1].peers[0].valid());
}

TEST(Rendezvous, MismatchedConfigsAreRefusedNamingBothHashes) {
  const int port = free_port();
  const auto errors = run_ranks(
      2, [&](int r) { rendezvous(world_of(r, 2, port), r == 0 ? 0x1111 : 0x2222, "id", 20); });
  for (const std::string& e : errors) {
    EXPECT_CONTAINS(e,
                    "the config of rank 1 (hash 0000000000002222) differs from rank 0's "
                    "(hash 0000000000001111)");
  }
}

TEST(Rendezvous, MismatchedWorldSizesAreRefused) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    World w = world_of(r, 2, port);
    if (r == 1) w.size = 3;
    rendezvous(w, 7, "id", 20);
  });
  EXPECT_CONTAINS(errors[0], "rank 1 was started for a world of 3 ranks, rank 0 for 2");
}

TEST(Rendezvous, ARankThatDoesNotComeIsNamedAtTheTimeout) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    if (r == 0) rendezvous(world_of(0, 3, port), 7, "id", 1.0);
    if (r == 1) rendezvous(world_of(1, 3, port), 7, "", 5.0);
  });
  EXPECT_CONTAINS(errors[0], "rank 2 of 3 did not join before the timeout");
  EXPECT_CONTAINS(errors[1], "rank 0");  // its answer never came: the connection closed
}

TEST(Rendezvous, NobodyListeningIsOneLineAfterTheTimeout) {
  const int port = free_port();
  const std::string e = error_of([&] { rendezvous(world_of(1, 2, port), 7, "", 0.3); });
  EXPECT_CONTAINS(e, "nobody answered at 127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(Rendezvous, APortInUseIsOneLine) {
  const int port = free_port();
  const Socket taken = listen_on(port);
  const std::string e = error_of([&] { rendezvous(world_of(0, 2, port), 7, "id", 1.0); });
  EXPECT_CONTAINS(e, "MASTER_PORT " + std::to_string(port) + ": rank 0 cannot listen there");
  EXPECT_CONTAINS(e, "set MASTER_PORT to a free port");
}

// `crema train --gpus` opens the port before the ranks start and hands the listener to rank 0.
TEST(Rendezvous, Rank0ServesOnTheListenerTheLauncherHandsDown) {
  Socket handed = listen_on(0);
  const int port = bound_port(handed);
  setenv(kListenerFdVariable, std::to_string(handed.release()).c_str(), 1);
  const auto errors = run_ranks(2, [&](int r) {
    rendezvous(world_of(r, 2, port), 42, r == 0 ? "id" : "", 20);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(std::getenv(kListenerFdVariable), nullptr);  // used once, not handed on
}

TEST(Rendezvous, AHandedDownListenerThatIsNotOneIsOneLine) {
  struct Unset {
    ~Unset() { unsetenv(kListenerFdVariable); }
  } unset;
  setenv(kListenerFdVariable, "seven", 1);
  EXPECT_CONTAINS(error_of([&] { rendezvous_listener(29500); }),
                  "CREMA_RENDEZVOUS_FD=seven: not a listening socket");
  const Socket other = listen_on(0);
  setenv(kListenerFdVariable, std::to_string(other.fd()).c_str(), 1);
  const int port = bound_port(other) == 65535 ? 65534 : bound_port(other) + 1;
  EXPECT_CONTAINS(error_of([&] { rendezvous_listener(port); }),
                  "MASTER_PORT says " + std::to_string(port));
}

TEST(Rendezvous, TheConfigHashIsFnv1a) {
  EXPECT_EQ(config_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(config_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(config_hash("seed: 1"), config_hash("seed: 2"));
}

TEST(SocketGroup, AllReduceAndBroadcastOnTheCpu) {
  const int port = free_port();
  std::vector<std::vector<float>> sums(3), means(3), broadcasts(3);
  const auto errors = run_ranks(3, [&](int r) {
    auto group = join_process_group(world_of(r, 3, port), Device::cpu(), 9, 20);
    std::vector<float> v = {float(r), 1.0f, 10.0f * float(r + 1)};
    group->all_reduce(v.data(), 3, Reduce::sum, nullptr);
    sums[size_t(r)] = v;
    v = {float(r), 3.0f * float(r)};
    group->all_reduce(v.data(), 2, Reduce::average, nullptr);
    means[size_t(r)] = v;
    v = {float(r + 5)};
    group->broadcast(v.data(), 1, nullptr);
    broadcasts[size_t(r)] = v;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[size_t(r)], "");
    EXPECT_EQ(sums[size_t(r)], (std::vector<float>{3.0f, 3.0f, 60.0f}));
    EXPECT_EQ(means[size_t(r)], (std::vector<float>{1.0f, 3.0f}));
    EXPECT_EQ(broadcasts[size_t(r)], (std::vector<float>{5.0f}));
  }
}

TEST(SocketGroup, ALostPeerIsNamed) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    auto group = join_process_group(world_of(r, 2, port), Device::cpu(), 9, 20);
    if (r == 1) return;  // exits: its connection closes
    float v = 1.0f;
    group->all_reduce(&v, 1, Reduce::sum, nullptr);
  });
  EXPECT_CONTAINS(errors[0], "rank 1 exited");
}

}  // namespace
}  // namespace crema::distributed
