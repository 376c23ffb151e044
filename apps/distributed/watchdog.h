// The watchdog of a run on several GPUs: a thread that makes sure a rank never waits forever for
// a peer that is gone. Every 100 ms it looks at
//
//   - NCCL's asynchronous error (ncclCommGetAsyncError): a failed link, a peer's abort;
//   - the rendezvous connections, kept open as a liveness channel: a rank that exits (crash,
//     SIGKILL, an error) closes its connection, which rank 0 sees at once and tells the others
//     ('D' + the rank); a rank that ends its run normally says goodbye first ('B'), so its exit
//     is no alarm;
//   - this rank's heartbeat (ProcessGroup::heartbeat, once per step): no step for
//     `timeout_seconds` means a rank hung (the others wait for it inside an all-reduce).
//
// On a failure it prints one line naming the rank ("crema: error: rank 1 exited (lost its
// connection) ...") and ends the process at once with exit status 5 (the driver reclaims the GPU
// work, kernels waiting for the lost peer included; ncclCommAbort from this thread, while the
// training thread was inside NCCL, took a minute and then crashed). The checkpoints on disk are whole (they are
// written atomically), so the run resumes from the last one, on any number of GPUs with the same
// global batch.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "apps/distributed/process_group.h"

namespace crema::distributed {

constexpr int kPeerFailedExitCode = 5;

class Watchdog {
 public:
  // `on_failure` receives the line naming what failed; the default prints it and ends the
  // process (exit 5). The tests pass their own.
  using OnFailure = std::function<void(const std::string& line)>;
  Watchdog(ProcessGroup& group, double timeout_seconds, OnFailure on_failure = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The run ended normally on this rank: says goodbye to the peers and stops watching.
  void finish();

 private:
  void watch();
  // The failure seen on the connections ("" when none).
  std::string check_connections();
  // Prints, aborts the group and exits: the default OnFailure.
  [[noreturn]] void fail(const std::string& what);

  ProcessGroup& group_;
  Rendezvous* connections_;
  double timeout_;
  OnFailure on_failure_;
  std::atomic<bool> stop_{false};
  std::vector<bool> finished_;  // rank 0: the peers that said goodbye
  std::thread thread_;
};

}  // namespace crema::distributed
