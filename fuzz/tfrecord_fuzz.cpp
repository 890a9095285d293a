// libFuzzer harness: TFRecord files as a DLIO dataset folder lists them
// (open_dlio_dataset), where each record's length field meets its CRC and
// the file's real size.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gpemu::pipeline;
  const auto dir = gpemu::fuzz::scratch_dir() / "tfrecord";
  gpemu::fuzz::write_file(dir / "img_0_of_1.tfrecord", data, size);
  p::DlioOptions o;
  o.format = p::DlioFormat::Tfrecord;
  gpemu::fuzz::expect_input_errors_only([&] { p::open_dlio_dataset(dir, o); });
  return 0;
}
