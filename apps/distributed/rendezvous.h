// The rendezvous: how the processes of a job find each other before NCCL can. Rank 0 listens at
// MASTER_PORT; every other rank connects to MASTER_ADDR:MASTER_PORT and says who it is:
//
//   rank -> 0   "crema-rv" (8 bytes), rank, world size (u32 each), hash of the resolved config
//   (u64) 0 -> rank   status (u32: 0 ok, 1 refused), then a length (u32) and that many bytes: the
//               communicator's unique id (NCCL's 128-byte ncclUniqueId) or the one-line reason
//
// Rank 0 answers only once all world.size - 1 ranks have joined, and refuses them all when a
// rank's config hash differs from its own (naming both hashes: the ranks resolved different files,
// --set or --seed), when a world size differs, or when a rank joins twice. A rank missing at the
// timeout is named. The connections stay open afterwards: the watchdog reads them to learn that a
// rank died (apps/distributed/watchdog.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/distributed/socket.h"
#include "apps/distributed/world.h"

namespace crema::distributed {

// 64-bit FNV-1a of `text` (the resolved config's YAML): equal on every rank that resolved the
// same config, and cheap to send.
uint64_t config_hash(const std::string& text);

struct Rendezvous {
  World world;
  std::string unique_id;      // rank 0's, as every rank received it
  std::vector<Socket> peers;  // rank 0: peers[r] is rank r's connection (peers[0] unused);
                              // other ranks: peers[0] is the connection to rank 0
};

// Joins the job: rank 0 passes the `unique_id` it made, the others receive it. Throws
// crema::Error, one line, for a port in use, a rank that does not join within `timeout_seconds`,
// or a refusal (mismatched configs).
Rendezvous rendezvous(const World& world, uint64_t hash, const std::string& unique_id,
                      double timeout_seconds);

}  // namespace crema::distributed
