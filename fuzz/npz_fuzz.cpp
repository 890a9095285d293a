// libFuzzer harness: .npz (stored ZIP) files through read_zip_entries and a
// DLIO dataset folder (open_dlio_dataset): central directory, ZIP64 fields,
// the arrays' npy headers and the labels array.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"
#include "pipeline/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gpemu::pipeline;
  const auto dir = gpemu::fuzz::scratch_dir() / "npz";
  const auto file = dir / "img_0_of_1.npz";
  gpemu::fuzz::write_file(file, data, size);
  gpemu::fuzz::expect_input_errors_only([&] { p::read_zip_entries(file); });
  p::DlioOptions o;
  o.format = p::DlioFormat::Npz;
  gpemu::fuzz::expect_input_errors_only([&] { p::open_dlio_dataset(dir, o); });
  return 0;
}
