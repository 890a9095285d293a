// libFuzzer harness: gpemu-profile/1 JSON documents (parse_native_profile).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "gpemu/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] { gpemu::parse_native_profile(text, "fuzz.json"); });
  return 0;
}
