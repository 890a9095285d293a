#include "pipeline/sample_decode.h"

#include "common/random.h"

namespace gpemu::pipeline {

std::uint64_t sample_seed(std::uint64_t seed, std::uint64_t epoch, std::size_t index) {
  return common::mix_seed(common::mix_seed(seed, epoch), index);
}

void decode_jpeg_sample(JpegDecoder& decoder, std::span<const std::byte> bytes, std::uint64_t seed,
                        const ImageTransformOptions& transform, JpegValidation validation, float* out) {
  Augmentation aug;
  const DecodedCrop crop = decoder.decode_crop(
      bytes,
      [&](int w, int h) {
        aug = draw_augmentation(w, h, transform, seed);
        return aug.box;
      },
      transform.width, transform.height, validation);
  resize_normalize(crop, aug.flip, transform, out);
}

}  // namespace gpemu::pipeline
