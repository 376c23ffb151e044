#include "apps/interrupt.h"

#include <unistd.h>

#include "core/error.h"

namespace crema {
namespace {

volatile std::sig_atomic_t interrupts = 0;

// Only async-signal-safe calls here: write and _exit.
void on_sigint(int) {
  interrupts = interrupts + 1;
  if (interrupts >= 2) _exit(130);
  const char message[] =
      "\ncrema: stopping after this step to write a checkpoint (Ctrl-C again to quit at once)\n";
  const ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  interrupts = 0;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &action, &previous_) != 0) throw Error("cannot install the SIGINT handler");
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &previous_, nullptr);
}

bool InterruptGuard::requested() const {
  return interrupts != 0;
}

}  // namespace crema
