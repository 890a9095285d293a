// A script's own compiled code (loaded with ctypes by test_torch_clock.py):
// it reads the C clocks and sleeps as a C extension would.
#include <sys/time.h>
#include <time.h>

extern "C" {
long long probe_monotonic_ns() {
  struct timespec t {};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}
long long probe_gettimeofday_ns() {
  struct timeval t {};
  gettimeofday(&t, nullptr);
  return t.tv_sec * 1'000'000'000LL + t.tv_usec * 1000LL;
}
void probe_nanosleep(long long ns) {
  const struct timespec t { static_cast<time_t>(ns / 1'000'000'000LL), static_cast<long>(ns % 1'000'000'000LL) };
  nanosleep(&t, nullptr);
}
}
