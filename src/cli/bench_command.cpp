#include "cli/commands.h"

namespace gpemu::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks of the emulator itself");
  cmd->require_subcommand(1);
}

}  // namespace gpemu::cli
