// Parsing of option values shared by several subcommands.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/device.h"

namespace gpemu::cli {

// "pinned" or "pageable"; InputError otherwise.
HostMemoryKind parse_host_memory(std::string_view s);

// Cores of this machine (at least 1).
int machine_cores();
// Loader workers per GPU: the requested count, or cores / GPUs within 1..8.
int default_workers(int requested, int gpus);

// The ImageFolder that `gpemu train` and `gpemu analyze` read: --data when
// given (InputError when it is not a folder), else the cached synthetic
// dataset, generated once (progress on stderr unless quiet; a line about the
// generation appended to notes when it happened).
std::filesystem::path training_data_dir(const std::string& data, bool quiet, std::vector<std::string>* notes = nullptr);

// Checks the --trace and --report paths (either may be empty: not asked)
// before a run starts, so that a long run does not end in "cannot write".
void check_run_outputs(const std::string& trace, const std::string& report);

// The note a run interrupted by `signal` prints with its figures.
std::string interrupted_note(int signal);

}  // namespace gpemu::cli
