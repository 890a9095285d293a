// libFuzzer harness: the published step-time CSV format
// (gpu_training_step_times.csv), read through read_step_times. The input is
// the whole file: header, quoted fields with commas and line breaks, and the
// enumerated, numeric and free-text columns.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "cost/step_times.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file = gpemu::fuzz::scratch_dir() / "step_times.csv";
  gpemu::fuzz::write_file(file, data, size);
  gpemu::fuzz::expect_input_errors_only([&] {
    for (const gpemu::StepTimeRow& row : gpemu::read_step_times(file)) (void)row.source_repo();
  });
  return 0;
}
