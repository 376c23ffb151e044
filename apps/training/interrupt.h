// Ctrl-C (SIGINT) or SIGTERM (what job schedulers send before preempting) during training: the
// first one asks the loop to stop after the current step (it then writes a checkpoint and exits
// with 128 + the signal's number, as shells report it: 130 for SIGINT, 143 for SIGTERM); a second
// one ends the process at once (_exit with that status), which the atomic checkpoint writes
// survive: the previous checkpoint stays whole.
#pragma once

#include <csignal>

namespace crema {

// Installs the SIGINT and SIGTERM handler for its lifetime and restores the previous ones
// afterwards. One at a
// time: a signal handler can only reach a process-wide flag, so this is crema's one piece of
// global state, confined to this file.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // True once SIGINT or SIGTERM has arrived.
  bool requested() const;
  // The signal that asked to stop (SIGINT, SIGTERM), 0 when none did.
  int signal_number() const;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace crema
