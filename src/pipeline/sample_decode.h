// One JPEG sample through the loader's decode and transforms, the one piece
// that every CPU decoder of gpemu's runs: the DataLoader's workers and the
// preprocessing service's workers and client (src/prep/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpemu/pipeline/jpeg.h"
#include "gpemu/pipeline/transform.h"

namespace gpemu::pipeline {

// The augmentation seed of dataset sample `index` in `epoch` of a loader
// seeded `seed`: a pure function, so a sample's crop and flip do not depend
// on which worker, thread or process decodes it.
std::uint64_t sample_seed(std::uint64_t seed, std::uint64_t epoch, std::size_t index);

// Decodes `bytes` (a JPEG) around RandomResizedCrop's box drawn from
// `seed`, resizes, flips and normalises it into `out` (3 x height x width
// floats). InputError (from the decoder) for what is not a whole JPEG.
void decode_jpeg_sample(JpegDecoder& decoder, std::span<const std::byte> bytes, std::uint64_t seed,
                        const ImageTransformOptions& transform, JpegValidation validation, float* out);

}  // namespace gpemu::pipeline
