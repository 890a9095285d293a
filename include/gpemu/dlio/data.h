// A DLIO workload's data folder: generating its files as DLIO does, opening
// them for reading, and the progress callback both (and the runner:
// gpemu/dlio/runner.h) report to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/dlio/config.h"
#include "gpemu/time.h"

namespace gpemu::dlio {

// What a progress callback is told about.
enum class DlioPhase { Generate, Train, Eval, Checkpoint };
std::string_view to_string(DlioPhase p);

struct DlioProgress {
  DlioPhase phase = DlioPhase::Train;
  int rank = 0;             // -1 for generation (not per rank)
  int epoch = 0;            // 1-based; 0 for generation and checkpoint-only mode
  std::uint64_t step = 0;   // 1-based within the epoch (generation: files written)
  std::uint64_t steps = 0;  // steps of the epoch (generation: files to write)
  // Train / Eval: the dataset indices of the batch just computed (valid during the call).
  std::span<const std::size_t> sample_indices;
  std::uint64_t bytes = 0;  // sample bytes of the batch / bytes of the checkpoint
};

enum class DlioSplit { Train, Eval };

struct DlioDataFile {
  std::filesystem::path path;  // absolute
  std::uint64_t bytes = 0;     // file size
  std::uint64_t samples = 0;
  std::uint64_t record_length = 0;  // bytes per sample (JPEG: the file size)
  std::uint64_t first_offset = 0;   // offset of sample 0; sample i at first_offset + i * record_length
};

struct DlioData {
  std::filesystem::path folder;  // <storage_root>/<data_folder>/train (or valid)
  std::vector<DlioDataFile> files;
  bool generated = false;        // written by this call
  bool skipped = false;          // generation asked for, but the manifest matched
  double seconds = 0;            // generation wall time
  std::string manifest_problem;  // generation: why the folder's manifest was not used; empty when it was fine
  std::uint64_t bytes() const;
  std::uint64_t samples() const;
};

// <storage_root>/<data_folder>, relative ones resolved against base_dir.
std::filesystem::path resolve_data_folder(const DlioWorkload& w, const std::filesystem::path& base_dir = {});

// Generates the split's files unless the manifest says they are there (then
// skipped = true). Throws InputError for an unsupported format.
DlioData generate_dlio_data(const DlioWorkload& w, DlioSplit split, const std::filesystem::path& base_dir = {},
                            const std::function<void(const DlioProgress&)>& progress = {});

// The split's files for reading: from the manifest when there is one, else
// the first num_files of the folder (and its numbered subfolders), sorted,
// opened like pipeline::open_dlio_dataset. Throws InputError when there are
// fewer files than the workload needs.
DlioData open_dlio_data(const DlioWorkload& w, DlioSplit split, const std::filesystem::path& base_dir = {});

using gpemu::TimeSampler;

}  // namespace gpemu::dlio
