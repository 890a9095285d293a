// DataStall-style table (Mohan et al., "Analyzing and Mitigating Data Stalls
// in DNN Training", VLDB 2021): for alexnet, resnet18, mobilenet_v2,
// resnet50 and vgg11 on 8 emulated V100s, the fetch and prep stall shares of
// the epoch from the differential analysis (train/analyze.h), under the
// virtual clock with the modelled loader (its documented per-image CPU
// costs), beside the paper's published fetch-stall figures. Runs in seconds.
//
// JSON keys: gpu, gpus, cores, workers, batch_size, images, storage
// {latency_us, mb_per_s}, citation, rows (array of {model, gpu_bound_s,
// prep_bound_s, cold_s, prep_stall_pct, fetch_stall_pct,
// paper_fetch_stall_pct}), paper_only (models the paper lists that are not
// run, with their figure), order_gpemu, order_paper (model names by fetch
// stall, largest first), ordering_matches.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace gpemu {

struct DatastallBenchOptions {
  int cores = 0;  // CPU cores the loaders share; 0: this machine's
  int gpus = 8;
  std::string gpu = "v100";
  int batch_size = 128;      // per GPU
  std::size_t batches = 32;  // per GPU per epoch
  double storage_latency_us = 100;
  double storage_mb_per_s = 530;
};

nlohmann::json run_datastall_bench(const DatastallBenchOptions& options);
void print_datastall_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace gpemu
