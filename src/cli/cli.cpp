#include "cli/cli.h"

#include <iostream>

namespace gpemu::cli {
int run(int argc, char** argv) {
  std::cerr << "gpemu: not built yet\n";
  return 1;
}
}  // namespace gpemu::cli
