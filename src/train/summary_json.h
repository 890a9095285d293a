// What a training run gives programs as JSON: `gpemu train --json`'s summary
// (the same key names as the other commands) and its loader and per-node
// figures (train.h has the record's other outputs).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "gpemu/train.h"

namespace gpemu::train {

// Keys: gpu, gpus, model, batch_size, clock, iterations (per GPU), samples
// (all GPUs), epochs, epoch_s (mean), epoch_times_s, elapsed_s,
// iterations_per_s, samples_per_s, gpu_util_pct, data_stall_pct,
// fetch_stall_pct, prep_stall_pct, h2d_pct, forward_ms_mean,
// backward_ms_mean, peak_allocated_mib, peak_reserved_mib, note, source, memory_plan;
// with gpus > 1 also all_reduce_pct, all_reduces, buckets,
// all_reduce_mib_per_iteration, backward_split, and per_gpu (an array of
// {gpu, gpu_util_pct, data_stall_pct, h2d_pct, all_reduce_pct,
// peak_allocated_mib}).
nlohmann::json summary_json(const RunRecord& r);

// What the loaders of all ranks read and cached (their LoaderStats summed):
// samples, bytes_read (past the loader cache), cache_hits, cache_misses,
// cache_hit_pct, cache_resident_pct (of dataset_bytes, at the end), and with
// a storage model page_cache_hits, page_cache_hit_pct, page_cache_resident_pct,
// storage_requests, bytes_from_storage. Percentages are null when nothing
// was looked up (or dataset_bytes is 0).
nlohmann::json loader_stats_json(const std::vector<pipeline::LoaderStats>& stats, std::uint64_t dataset_bytes);

// An array of {node, epoch, cache_hits, remote_hits, storage_reads,
// storage_bytes, network_bytes}, by node then epoch.
nlohmann::json node_epoch_reads_json(const std::vector<NodeEpochReads>& reads);

}  // namespace gpemu::train
