#include "cli/options.h"

#include <algorithm>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/output_path.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"

namespace gpemu::cli {

HostMemoryKind parse_host_memory(std::string_view s) {
  if (s == "pinned") return HostMemoryKind::Pinned;
  if (s == "pageable") return HostMemoryKind::Pageable;
  throw InputError(fmt::format("unknown host memory '{}': accepted 'pinned' or 'pageable'", s));
}

int machine_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int default_workers(int requested, int gpus) {
  return requested >= 0 ? requested : std::clamp(machine_cores() / std::max(gpus, 1), 1, 8);
}

std::filesystem::path training_data_dir(const std::string& data, bool quiet, std::vector<std::string>* notes) {
  if (!data.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(data, ec) && !pipeline::is_ffcv_file(data))
      throw InputError(fmt::format(
          "--data '{}' does not exist or is neither a folder nor an FFCV-style file ('gpemu dataset ffcv')", data));
    return data;
  }
  auto ensured = train::ensure_synthetic_dataset(train::cache_dir(), train::default_dataset_spec(),
                                                 [quiet](const std::string& line) {
                                                   if (!quiet) std::cerr << line << '\n';
                                                 });
  if (ensured.generated && notes)
    notes->push_back(fmt::format("generated the default dataset in {:.1f} s ({} images, median {:.1f} KB)",
                                 ensured.seconds, ensured.summary.images,
                                 static_cast<double>(ensured.summary.median_bytes) / 1000.0));
  return ensured.dir;
}

void check_run_outputs(const std::string& trace, const std::string& report) {
  if (!trace.empty()) check_output_path(trace, "--trace");
  if (!report.empty()) check_output_path(report, "--report");
}

std::string interrupted_note(int signal) {
  return fmt::format(
      "interrupted by {}: the figures cover the iterations finished before it (the last epoch is "
      "cut short)",
      signal_name(signal));
}

}  // namespace gpemu::cli
