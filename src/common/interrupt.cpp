#include "common/interrupt.h"

#include <signal.h>

#include <atomic>
#include <csignal>

#include <fmt/format.h>

namespace gpemu {

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) {
    // A second signal: the user wants out now.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

Interrupted::Interrupted(int signal) : Error(fmt::format("interrupted by {}", signal_name(signal))), signal_(signal) {}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: reads and writes in progress continue; the loops poll the flag.
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

bool interrupt_requested() { return interrupt_signal() != 0; }

void throw_if_interrupted() {
  if (const int s = interrupt_signal()) throw Interrupted(s);
}

void request_interrupt(int signal) { g_signal.store(signal); }

void clear_interrupt() { g_signal.store(0); }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return fmt::format("signal {}", signal);
  }
}

}  // namespace gpemu
