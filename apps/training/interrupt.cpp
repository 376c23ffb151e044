#include "apps/training/interrupt.h"

#include <unistd.h>

#include "core/error.h"

namespace crema {
namespace {

volatile std::sig_atomic_t interrupts = 0;
volatile std::sig_atomic_t first_signal = 0;

// Only async-signal-safe calls here: write and _exit.
void on_signal(int signal) {
  if (interrupts == 0) first_signal = signal;  // before the count, which the loop reads first
  interrupts = interrupts + 1;
  if (interrupts >= 2) _exit(128 + signal);
  const char message[] =
      "\ncrema: stopping after this step to write a checkpoint (Ctrl-C again to quit at once)\n";
  const ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  interrupts = 0;
  first_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &action, &previous_int_) != 0) {
    throw Error("cannot install the SIGINT handler");
  }
  if (sigaction(SIGTERM, &action, &previous_term_) != 0) {
    sigaction(SIGINT, &previous_int_, nullptr);
    throw Error("cannot install the SIGTERM handler");
  }
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGINT, &previous_int_, nullptr);
}

bool InterruptGuard::requested() const {
  return interrupts != 0;
}

int InterruptGuard::signal_number() const {
  return first_signal;
}

}  // namespace crema
