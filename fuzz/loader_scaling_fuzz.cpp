// libFuzzer harness: measured loader-scaling files (`gpemu train
// --loader-scaling FILE`, parse_loader_scaling).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_util.h"
#include "gpemu/pipeline/loader_scaling.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] {
    const auto s = gpemu::pipeline::parse_loader_scaling(text, "fuzz.csv");
    // A curve that parsed gives a positive, finite efficiency at any worker count.
    for (double busy : {0.0, 1.0, 1.5, 2.0, 7.0, 64.0, 1e6}) {
      const double e = s.efficiency(busy);
      if (!(e > 0) || !std::isfinite(e)) std::abort();
    }
  });
  return 0;
}
