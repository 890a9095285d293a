// One process-wide interruption facility. SIGINT and SIGTERM set a flag
// instead of killing the process; long loops (dataset generation, checkpoint
// writes, training steps) poll it and unwind with gpemu::Interrupted, so that
// partial files are removed by their owners on the way out and the command
// can still print what finished. A second signal while the first is being
// handled kills the process the default way (a user pressing ^C twice).
#pragma once

#include <string>

#include "gpemu/error.h"

namespace gpemu {

// Thrown by throw_if_interrupted(). exit_status() is 128 + signal, the shell's
// convention (130 for SIGINT, 143 for SIGTERM).
class Interrupted : public Error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }
  int exit_status() const { return 128 + signal_; }

 private:
  int signal_;
};

// Installs the SIGINT and SIGTERM handlers (idempotent; the gpemu command
// calls it once at start). Library users who do not call it keep the default
// behaviour.
void install_interrupt_handlers();

// The signal received, or 0.
int interrupt_signal();
bool interrupt_requested();

// Throws Interrupted when a signal was received.
void throw_if_interrupted();

// Sets or clears the flag as a signal would (tests; a caller cancelling work).
void request_interrupt(int signal);
void clear_interrupt();

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

}  // namespace gpemu
