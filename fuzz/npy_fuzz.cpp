// libFuzzer harness: .npy files, from the header parser to the records a
// DLIO dataset folder lists (open_dlio_dataset), where header counts meet
// the file's real size.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"
#include "pipeline/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gpemu::pipeline;
  gpemu::fuzz::expect_input_errors_only(
      [&] { p::parse_npy_header(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.npy"); });
  const auto dir = gpemu::fuzz::scratch_dir() / "npy";
  gpemu::fuzz::write_file(dir / "img_0_of_1.npy", data, size);
  p::DlioOptions o;
  o.format = p::DlioFormat::Npy;
  gpemu::fuzz::expect_input_errors_only([&] { p::open_dlio_dataset(dir, o); });
  return 0;
}
