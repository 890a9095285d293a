// libFuzzer harness: a virtual dataset's sizes file (--virtual-dataset
// sizes=FILE), one size in bytes per line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] { gpemu::pipeline::parse_sample_sizes(text, "sizes.txt"); });
  return 0;
}
