#include "apps/distributed/rendezvous.h"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::distributed {
namespace {

constexpr char kMagic[8] = {'c', 'r', 'e', 'm', 'a', '-', 'r', 'v'};

struct Hello {
  char magic[8];
  uint32_t rank;
  uint32_t size;
  uint64_t hash;
};

std::string rank_name(int rank) {
  return fmt::format("rank {}", rank);
}

void send_answer(Socket& s, uint32_t status, const std::string& payload, const std::string& peer) {
  const uint32_t header[2] = {status, uint32_t(payload.size())};
  s.send_all(header, sizeof header, peer);
  s.send_all(payload.data(), payload.size(), peer);
}

Rendezvous serve(const World& world, uint64_t hash, const std::string& unique_id,
                 Clock::time_point deadline) {
  Rendezvous rv{world, unique_id, {}};
  rv.peers.resize(size_t(world.size));
  Socket listener = rendezvous_listener(world.master_port);
  int joined = 1;
  std::optional<std::string> refusal;
  while (joined < world.size) {
    Socket s = accept_until(listener, deadline);
    if (!s.valid()) {
      std::string missing;
      for (int r = 1; r < world.size; ++r) {
        if (!rv.peers[size_t(r)].valid()) missing += (missing.empty() ? "" : ", ") + rank_name(r);
      }
      throw Error(fmt::format("rendezvous at port {}: {} of {} did not join before the timeout",
                              world.master_port, missing, world.size));
    }
    Hello hello{};
    try {
      s.receive_all(&hello, sizeof hello, deadline, "a joining rank");
    } catch (const Error&) {
      continue;  // not one of ours (a port scan, a health check): ignored
    }
    if (std::memcmp(hello.magic, kMagic, sizeof kMagic) != 0) continue;
    const int r = int(hello.rank);
    if (r <= 0 || r >= world.size || rv.peers[size_t(r)].valid()) {
      send_answer(
          s, 1,
          fmt::format("rank {} cannot join a world of {} (or it joined twice)", r, world.size),
          rank_name(r));
      continue;
    }
    if (!refusal && int(hello.size) != world.size) {
      refusal = fmt::format("rank {} was started for a world of {} ranks, rank 0 for {}", r,
                            hello.size, world.size);
    }
    if (!refusal && hello.hash != hash) {
      refusal = fmt::format(
          "the config of rank {} (hash {:016x}) differs from rank 0's (hash {:016x}): every "
          "rank must resolve the same config (the same file, --set and --seed)",
          r, hello.hash, hash);
    }
    rv.peers[size_t(r)] = std::move(s);
    ++joined;
  }
  for (int r = 1; r < world.size; ++r) {
    send_answer(rv.peers[size_t(r)], refusal ? 1 : 0, refusal ? *refusal : unique_id, rank_name(r));
  }
  if (refusal) throw Error(*refusal);
  return rv;
}

Rendezvous join(const World& world, uint64_t hash, Clock::time_point deadline) {
  Rendezvous rv{world, "", {}};
  Socket s = connect_until(world.master_addr, world.master_port, deadline);
  Hello hello{};
  std::memcpy(hello.magic, kMagic, sizeof kMagic);
  hello.rank = uint32_t(world.rank);
  hello.size = uint32_t(world.size);
  hello.hash = hash;
  s.send_all(&hello, sizeof hello, "rank 0");
  uint32_t header[2] = {0, 0};
  s.receive_all(header, sizeof header, deadline, "rank 0");
  if (header[1] > (1u << 16)) throw Error("rendezvous: rank 0 sent a malformed answer");
  std::string payload(header[1], '\0');
  s.receive_all(payload.data(), payload.size(), deadline, "rank 0");
  if (header[0] != 0) throw Error(payload);
  rv.unique_id = std::move(payload);
  rv.peers.push_back(std::move(s));
  return rv;
}

}  // namespace

uint64_t config_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Rendezvous rendezvous(const World& world, uint64_t hash, const std::string& unique_id,
                      double timeout_seconds) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_seconds * 1000.0));
  if (world.rank == 0) return serve(world, hash, unique_id, deadline);
  return join(world, hash, deadline);
}

}  // namespace crema::distributed
