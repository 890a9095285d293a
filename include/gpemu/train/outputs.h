// What a training run gives people and programs: the JSON summary (the same
// key names as the other commands), the run report (report.h) and host spans
// of data stalls for the trace.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/job.h"
#include "gpemu/report.h"
#include "gpemu/timeline.h"

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

// Summary rows for people ("epoch time" -> "12.3 s"), in report order.
std::vector<SummaryRow> summary_rows(const RunRecord& r);

// The run report: summary, time breakdown per GPU (compute, H2D, data stall,
// all-reduce wait, other), compute-engine utilization over time per GPU,
// data stall per batch per GPU, stall shares (fetch / prep / compute).
RunReport make_run_report(const RunRecord& r, nlohmann::json configuration = nlohmann::json::object());

// Host spans for the trace: on process "train loop", track = GPU, a
// "next()" span while the host waited for the loader and, inside it, a
// "data stall" span while the GPU was idle for it.
void add_stall_spans(const RunRecord& r, Timeline& timeline);

}  // namespace gpemu::train
