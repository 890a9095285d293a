#include "common/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace gpemu {

double allocatable_bytes() {
  double bytes = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) bytes = static_cast<double>(kb) * 1024;
    std::fclose(f);
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    double used = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long long pages = 0;
      if (std::fscanf(f, "%llu", &pages) == 1) used = static_cast<double>(pages) * static_cast<double>(::getpagesize());
      std::fclose(f);
    }
    const double left = std::max(0.0, static_cast<double>(lim.rlim_cur) - used);
    bytes = bytes > 0 ? std::min(bytes, left) : left;
  }
  return bytes;
}

}  // namespace gpemu
