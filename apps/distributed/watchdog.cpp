#include "apps/distributed/watchdog.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::distributed {
namespace {

// A liveness message: 'B' (the sender finished) or 'D' (rank 0 saw `rank` die).
struct Notice {
  char kind;
  uint32_t rank;
} __attribute__((packed));

// Reads one notice if the connection has data: nullopt-like `kind` 0 when none, 'X' at its end.
Notice poll_notice(Socket& s) {
  if (!s.valid() || !s.readable(0)) return {0, 0};
  Notice n{};
  const ssize_t got = recv(s.fd(), &n, sizeof n, MSG_WAITALL);
  if (got != ssize_t(sizeof n)) return {'X', 0};
  return n;
}

}  // namespace

Watchdog::Watchdog(ProcessGroup& group, double timeout_seconds, OnFailure on_failure)
    : group_(group),
      connections_(group.liveness()),
      timeout_(timeout_seconds),
      on_failure_(std::move(on_failure)) {
  finished_.assign(size_t(group.size()), false);
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Watchdog::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (connections_ == nullptr) return;
  const Notice bye{'B', uint32_t(group_.rank())};
  for (Socket& s : connections_->peers) {
    if (!s.valid()) continue;
    try {
      s.send_all(&bye, sizeof bye, "a peer");
    } catch (const Error&) {
      // the peer is gone already: nothing to tell it
    }
  }
}

std::string Watchdog::check_connections() {
  if (connections_ == nullptr) return "";
  std::vector<Socket>& peers = connections_->peers;
  if (group_.rank() != 0) {
    const Notice n = poll_notice(peers[0]);
    if (n.kind == 'X') return "rank 0 exited (lost its connection)";
    if (n.kind == 'D') {
      const uint32_t rank = n.rank;  // a copy: fmt takes a reference; the packed field is unaligned
      return fmt::format("rank {} exited (rank 0 lost its connection)", rank);
    }
    if (n.kind == 'B') peers[0] = Socket();  // rank 0 finished: nothing more will come
    return "";
  }
  for (size_t r = 1; r < peers.size(); ++r) {
    if (finished_[r]) continue;
    const Notice n = poll_notice(peers[r]);
    if (n.kind == 'B') finished_[r] = true;
    if (n.kind != 'X') continue;
    const Notice dead{'D', uint32_t(r)};
    for (size_t other = 1; other < peers.size(); ++other) {
      if (other == r || finished_[other]) continue;
      ::send(peers[other].fd(), &dead, sizeof dead, MSG_NOSIGNAL);
    }
    return fmt::format("rank {} exited (lost its connection)", r);
  }
  return "";
}

void Watchdog::watch() {
  using namespace std::chrono;
  while (!stop_) {
    std::this_thread::sleep_for(milliseconds(100));
    if (stop_) return;
    std::string failure = group_.failure();
    if (failure.empty()) failure = check_connections();
    const double idle = duration<double>(steady_clock::now() - group_.last_heartbeat()).count();
    if (failure.empty() && idle > timeout_) {
      failure = fmt::format(
          "no step finished in {:.0f} s (--timeout): a rank hung, or a link stalled", idle);
    }
    if (failure.empty()) continue;
    if (!on_failure_) fail(failure);
    on_failure_(failure);
    return;
  }
}

void Watchdog::fail(const std::string& what) {
  std::cerr << fmt::format(
                   "crema: error: rank {}: {}; stopping (the last checkpoint is whole and "
                   "resumes with --resume)\n",
                   group_.rank(), what)
            << std::flush;
  // No ncclCommAbort here: the training thread may be inside NCCL with the same communicator
  // (measured on 2 H200s: the abort took a minute and the process then died of SIGSEGV). The
  // process ends at once instead; the driver reclaims its GPU work, kernels waiting for the lost
  // peer included.
  std::_Exit(kPeerFailedExitCode);
}

}  // namespace crema::distributed
