// Synthetic datasets of real files, for experiments and tests without the
// real ImageNet: an ImageFolder of real JPEGs whose sizes spread like
// ImageNet's, and DLIO-style npy / npz / raw-record / JPEG files.
// All generators are deterministic for a given seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpemu/pipeline/dataset.h"

namespace gpemu::pipeline {

struct ImageDatasetSummary {
  std::size_t images = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t median_bytes = 0;
  std::uint64_t p90_bytes = 0;
  std::uint64_t max_bytes = 0;
};

// Writes dir/class_NNNN/img_NNNNNNNN.JPEG, images dealt round-robin over the
// classes. Each image has a random size (log-normal around median_kb with a
// long right tail), aspect ratio, JPEG quality (70-95) and content (smooth
// gradients, shapes and texture noise, so it compresses like a photo rather
// than like noise or a flat colour); the pixel count is steered so that the
// file sizes' median lands near median_kb (ImageNet-1k's train set: ~110 KB).
ImageDatasetSummary generate_image_dataset(const std::filesystem::path& dir, int num_classes, std::size_t num_images,
                                           std::uint64_t seed, double median_kb = 110.0);

// generate_image_dataset for a folder a user named (`gpemu dataset synth`):
// `dir` must be missing or empty (InputError otherwise: a merge with older
// files would not be the dataset asked for). While it runs the folder holds
// kIncompleteDatasetMarker, so a killed run is never trained on; on an error or
// an interruption (gpemu::Interrupted) everything it created is removed.
ImageDatasetSummary synthesize_image_folder(const std::filesystem::path& dir, int num_classes, std::size_t num_images,
                                            std::uint64_t seed, double median_kb = 110.0);

struct DlioGeneratorOptions {
  DlioFormat format = DlioFormat::Npz;
  std::size_t num_files = 1;
  std::size_t samples_per_file = 1;    // must be 1 for Jpeg
  std::uint64_t record_length = 4096;  // bytes per sample; for Jpeg, the target file size
  std::uint64_t seed = 0;
  int num_classes = 10;  // labels (npz "y" array) are sample_index % num_classes
};

// Writes dir/img_<i>_of_<n>.{npy,npz,bin,jpg,tfrecord}; returns the paths. npy files
// hold a uint8 array (samples_per_file, record_length); npz files hold that as
// "x" plus int64 labels "y" (samples_per_file,); raw files hold the records
// back to back; tfrecord files hold one framed tf.train.Example per record
// (pipeline/tfrecord.h).
std::vector<std::string> generate_dlio_dataset(const std::filesystem::path& dir, const DlioGeneratorOptions& options);

// The bytes generate_dlio_dataset wrote for record `sample` of file `file`
// (npy/npz/raw), so readers can be checked.
std::vector<std::byte> dlio_record_bytes(std::uint64_t seed, std::size_t file, std::size_t sample,
                                         std::uint64_t record_length);

}  // namespace gpemu::pipeline
