// Ctrl-C during training: the first SIGINT asks the loop to stop after the current step (it then
// writes a checkpoint and exits with status 130, the shell's code for "ended by SIGINT"); a
// second SIGINT ends the process at once (_exit(130)), which the atomic checkpoint writes
// survive: the previous checkpoint stays whole.
#pragma once

#include <csignal>

namespace crema {

// Installs the SIGINT handler for its lifetime and restores the previous one afterwards. One at a
// time: a signal handler can only reach a process-wide flag, so this is crema's one piece of
// global state, confined to this file.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // True once SIGINT has arrived.
  bool requested() const;

 private:
  struct sigaction previous_ {};
};

}  // namespace crema
