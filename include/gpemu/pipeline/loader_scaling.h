// How a machine's data loader scales with its workers, measured: the
// modelled loader's per-worker efficiency (docs/pipeline.md, "Measured
// loader scaling").
//
// The modelled loader charges each worker the same CPU time per sample
// however many workers run, so it scales linearly with cores. Real loaders
// do not: on the 16-core host of the H200 measured for this project,
// torchvision's DataLoader gave 0.91 of linear at 2 workers and 0.74 at 16
// (shared/reference/measured/h200-2026-12-04/torch_loader_scaling.csv: turbo
// bins, shared caches and memory bandwidth, the main process's share).
// A LoaderScaling is such a measurement: images per second at several worker
// counts of one loader on one machine. With it the modelled loader divides
// each worker's CPU costs by the measured efficiency at the number of
// workers busy (linear between measured counts, the last one's beyond).
//
// Thread safety: plain values.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpemu::pipeline {

struct LoaderScaling {
  std::string source;                          // the file, for messages and output
  std::vector<std::pair<int, double>> points;  // (workers, images/s), workers ascending, the first 1
  // Efficiency at `busy` workers: images/s per worker over one worker's,
  // linear between measured counts, the last count's beyond it; 1 at or
  // below one worker.
  double efficiency(double busy) const;
};

// Reads a CSV with a header naming the columns `workers` and `images_per_s`
// (others ignored; rows of 0 workers, the in-process loader, skipped), as
// `../shared/tools/real-gpu/loader_scaling.py` and `gpemu bench loader
// --json`'s figures give. Needs a row of 1 worker; workers are whole numbers
// up to 65,536, each once; rates are positive and finite. Throws InputError
// naming the file, the line and what is accepted.
LoaderScaling read_loader_scaling(const std::filesystem::path& file);
// The same from text (`name` stands for the file in messages).
LoaderScaling parse_loader_scaling(std::string_view text, std::string_view name);

}  // namespace gpemu::pipeline
