// Image transforms of a training pipeline: torchvision's
// RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(p) + ToTensor
// + Normalize(mean, std), producing float32 CHW tensors.
//
// Randomness is a pure function of a per-sample seed (the loader derives it
// from (loader seed, epoch, dataset index)), so augmentations do not depend on
// which worker handled a sample. Resizing is separable bilinear with
// antialiasing (a triangle filter widened by the downscale factor), which is
// what PIL's BILINEAR resize does and what torchvision applies to PIL images.
#pragma once

#include <array>
#include <cstdint>

#include "gpemu/pipeline/jpeg.h"

namespace gpemu::pipeline {

struct ImageTransformOptions {
  int height = 224;  // output tensor is 3 x height x width
  int width = 224;
  double scale_min = 0.08;  // fraction of the image area the crop covers
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // crop aspect ratio (width / height)
  double ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // ImageNet
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

struct Augmentation {
  CropBox box;
  bool flip = false;
};

// torchvision's RandomResizedCrop.get_params (10 attempts, then a centre crop
// with the ratio clamped) and a flip draw.
Augmentation draw_augmentation(int image_width, int image_height, const ImageTransformOptions& options,
                               std::uint64_t sample_seed);

// Resamples crop.box to options.height x options.width, flips when asked,
// and writes (v / 255 - mean) / std as float32 CHW into out
// (3 * height * width floats). One pass per output row: the vertical filter
// over the columns needed (RGBX, four float lanes), then the horizontal one
// with normalisation and flip, stored straight into the three planes.
// Accepts RGB or RGBX crops (RGB is widened to RGBX first, for tests and
// callers with their own buffers; decode_crop gives RGBX).
void resize_normalize(const DecodedCrop& crop, bool flip, const ImageTransformOptions& options, float* out);

}  // namespace gpemu::pipeline
