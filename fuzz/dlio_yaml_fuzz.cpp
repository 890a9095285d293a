// libFuzzer harness: DLIO workload YAML (parse_dlio_config_string), the
// parser, the schema and the cross-field and magnitude checks.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "gpemu/dlio.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] { gpemu::dlio::parse_dlio_config_string(text, {}, {}, "fuzz.yaml"); });
  return 0;
}
