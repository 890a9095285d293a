// libFuzzer harness: JPEG headers and data through the training decoder
// (JpegDecoder::read_info, then a centre crop decoded with full validation).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gpemu::pipeline;
  static p::JpegDecoder decoder;
  const std::span bytes(reinterpret_cast<const std::byte*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] {
    const p::JpegInfo info = decoder.read_info(bytes);
    // A header may claim 65500 x 65500; decoding that much is slow but not a
    // bug, so only images a fuzz input could plausibly hold are decoded.
    if (static_cast<std::uint64_t>(info.width) * static_cast<std::uint64_t>(info.height) > (std::uint64_t{1} << 22))
      return;
    decoder.decode_crop(
        bytes,
        [](int w, int h) {
          const int side = std::max(1, std::min(w, h) / 2);
          return p::CropBox{(w - side) / 2, (h - side) / 2, side, side};
        },
        16, 16, p::JpegValidation::Full);
  });
  return 0;
}
