// Datasets for `gpemu train`: the cache folder and the default synthetic
// ImageNet-like dataset generated there on first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "gpemu/pipeline/generator.h"

namespace gpemu::train {

// $GPEMU_CACHE_DIR, else $XDG_CACHE_HOME/gpemu, else $HOME/.cache/gpemu
// (each only when set and non-empty). InputError when none is set.
std::filesystem::path cache_dir();

struct SyntheticDatasetSpec {
  std::size_t images = 2000;
  int classes = 100;
  double median_kb = 110.0;
  std::uint64_t seed = 0;
};

// The default dataset of `gpemu train` (see docs/train.md for the size).
SyntheticDatasetSpec default_dataset_spec();

// Folder name for a spec, e.g. "imagenet-like-2000img-100cls-110kb-seed0".
std::string dataset_folder_name(const SyntheticDatasetSpec& spec);

struct EnsuredDataset {
  std::filesystem::path dir;
  bool generated = false;                 // false: found complete in the cache
  double seconds = 0;                     // generation wall time
  pipeline::ImageDatasetSummary summary;  // when generated
};

// root/dataset_folder_name(spec), generated when it is missing or incomplete
// (a folder is complete once its marker file is written, last; generation
// happens in a temporary folder renamed into place, so an interrupted run
// leaves no half dataset). `note` hears one line before generating.
EnsuredDataset ensure_synthetic_dataset(const std::filesystem::path& root, const SyntheticDatasetSpec& spec,
                                        const std::function<void(const std::string&)>& note = {});

}  // namespace gpemu::train
