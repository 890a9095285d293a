// libFuzzer harness: FFCV-style files (open_ffcv_file), from the header's
// figures to every per-sample table entry checked against the file's size
// and pages.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gpemu::pipeline;
  const auto file = gpemu::fuzz::scratch_dir() / "ffcv" / "fuzz.ffcv";
  gpemu::fuzz::write_file(file, data, size);
  gpemu::fuzz::expect_input_errors_only([&] {
    if (p::is_ffcv_file(file)) p::open_ffcv_file(file);
  });
  return 0;
}
