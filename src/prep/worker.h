// A preprocessing-service worker process's main (worker.cpp), run by the
// dispatcher in a forked child.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "gpemu/prep_serve.h"

namespace gpemu::prep {

struct WorkerSetup {
  int index = 0, workers = 1;
  int listen_fd = -1;     // its own listening socket, bound by the dispatcher
  std::vector<int> cpus;  // the cores it is pinned to
  pid_t dispatcher = 0;   // it ends when this process does
  PrepServerOptions options;
};

// Pins the calling process (its threads to come) to `cpus`; why not, or "".
std::string pin_to_cores(const std::vector<int>& cpus);
// Serves until SIGTERM/SIGINT or the dispatcher's end; the exit status.
int run_worker(const WorkerSetup& setup);

}  // namespace gpemu::prep
