// GPU decode as DALI's mixed pipeline does it, for the modelled loader
// (pipeline.h, "GPU decode (DALI-style mixed pipeline)"); the sources of
// every figure are in docs/pipeline.md, "GPU decode (DALI-style)".
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpemu/pipeline.h"

namespace gpemu::pipeline {
namespace {

// ImageNet's average image under the layout rule: 500 x 375 pixels.
constexpr double kImageNetPixels = 500.0 * 375.0;

// The JPEG engine (NVJPG): about 5,000 images/s of ImageNet's training
// pipeline with every image on the A100's engine (DALI's A100 blog, as the
// DALI issue NVIDIA/DALI#5362 quotes it), so 200 us an image.
constexpr double kEngineNsPerPixel = 1e9 / 5000.0 / kImageNetPixels;

// CUDA decode on the SMs: GPEmu's measured median of DALI's mixed decode,
// 14.9097 ms a batch (ffcv_stage_costs.csv, dali_mixed_decode; batch 256
// inferred: the script's default), on its P100 (732 GB/s), scaled to other
// cards by memory bandwidth (dequantisation, IDCT and colour conversion
// stream coefficients and pixels).
constexpr double kP100SmNsPerPixel = 14.9097e6 / (256.0 * kImageNetPixels);
constexpr double kP100BandwidthGbs = 732.0;

// Dies with a JPEG engine: GA100 (A100, A30) and GH100 (H100, H200).
bool has_jpeg_engine(const GpuSpec& gpu) { return gpu.chip == "GA100" || gpu.chip == "GH100"; }

}  // namespace

GpuDecodeModel gpu_decode_model(const GpuSpec& gpu) {
  if (!(gpu.memory_bandwidth_gbs > 0))
    throw InputError(fmt::format("GPU decode: {} has no memory bandwidth in the catalog", gpu.id));
  GpuDecodeModel m;
  m.gpu = gpu.id;
  m.engine = has_jpeg_engine(gpu);
  m.engine_ns_per_pixel = kEngineNsPerPixel;
  m.sm_ns_per_pixel = kP100SmNsPerPixel * kP100BandwidthGbs / gpu.memory_bandwidth_gbs;
  m.memory_bytes_per_s = gpu.memory_bandwidth_gbs * 1e9;
  return m;
}

std::string describe(const GpuDecodeModel& m) {
  return fmt::format("GPU decode (DALI-style) on {}'s {}", m.gpu,
                     m.engine ? "JPEG engine" : "SMs, entropy decoding on the host");
}

GpuDecodeCost gpu_decode_cost(const GpuDecodeModel& m, const Dataset& dataset, const std::vector<std::size_t>& batch,
                              const ImageTransformOptions& transform) {
  const double out_pixels = static_cast<double>(transform.height) * static_cast<double>(transform.width);
  double pixels = 0, crop = 0;
  for (std::size_t idx : batch) {
    const Sample& s = dataset.samples[idx];
    const double px = s.format == SampleFormat::RawRgb ? static_cast<double>(s.width) * static_cast<double>(s.height)
                                                       : static_cast<double>(s.length) * kImageNetPixelsPerJpegByte;
    if (s.format == SampleFormat::Jpeg) pixels += px;
    crop += std::min(px, out_pixels);
  }
  return gpu_decode_cost(m, pixels, crop, batch.size(), transform);
}

GpuDecodeCost gpu_decode_cost(const GpuDecodeModel& m, double jpeg_pixels, double crop_pixels, std::size_t images,
                              const ImageTransformOptions& transform) {
  const double out_pixels = static_cast<double>(transform.height) * static_cast<double>(transform.width);
  const auto n = static_cast<double>(images);
  // The crops read as 8-bit RGB, the outputs written as float.
  const double resize_bytes = 3.0 * crop_pixels + n * 3.0 * out_pixels * sizeof(float);
  GpuDecodeCost c;
  const double engine_ns = m.engine ? jpeg_pixels * m.engine_ns_per_pixel : 0;
  const double sm_ns = (m.engine ? 0 : jpeg_pixels * m.sm_ns_per_pixel) + resize_bytes * 1e9 / m.memory_bytes_per_s;
  c.engine = static_cast<Duration>(std::llround(engine_ns));
  c.sm = static_cast<Duration>(std::llround(sm_ns));
  // Held on the device: queue_depth decoded batches, and the decoded images of the batch in flight (8-bit RGB).
  c.device_bytes = static_cast<std::uint64_t>(m.queue_depth * n * 3.0 * out_pixels * sizeof(float) + 3.0 * jpeg_pixels);
  return c;
}

}  // namespace gpemu::pipeline
