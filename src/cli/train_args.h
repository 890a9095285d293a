// `gpemu train`'s flags (TrainArgs), what they say about the data (TrainData),
// and the run's outputs: the --json object, the text summary and the
// report's configuration rows (train_output.cpp). train_command.cpp parses
// the flags and runs the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/job_args.h"
#include "cli/prep_args.h"
#include "gpemu/clock.h"
#include "gpemu/fastflow.h"
#include "gpemu/job.h"
#include "gpemu/pipeline.h"

namespace gpemu::cli {

struct TrainArgs {
  JobArgs job;
  int iterations = -1;  // -1: not given
  bool synthetic = false;
  int epochs = 1;
  std::string cache_bytes = "0";
  std::string cache_policy = "minio";
  std::string storage;           // modelled loader: a storage device
  std::string page_cache_bytes;  // modelled loader: the page cache in front of it; empty: unlimited
  int group_size = 1;            // samples per file (virtual datasets), shuffled and read by groups
  bool cold = false;
  // Several nodes (modelled loader).
  bool storage_shared = false;
  std::string distributed_cache = "none";
  double remote_fetch_us = -1;  // -1: the network's
  int remote_fetch_slots = 0;
  int io_depth = 0;
  std::string trace;
  std::string report;
  // DLIO / MLPerf Storage workloads.
  std::string dlio_config;
  std::vector<std::string> dlio_overrides;
  PrepArgs prep;               // a preprocessing service (cli/prep_args.h)
  double dist_timeout_s = 30;  // one node of several processes (cli/real_nodes.h)
};

// What the flags say about the data, and what the outputs print of it.
struct TrainData {
  ClockKind clock = ClockKind::Real;
  bool synthetic = false, virtual_data = false;
  std::filesystem::path dir;
  std::string loader_kind, pin_mode_used = "n/a";
  std::size_t images = 0;
  std::uint64_t bytes = 0, cache_bytes = 0;
  pipeline::CachePolicy cache_policy{};
  pipeline::ReadMethod read_method{};
  std::optional<FastFlowChoice> fastflow;              // --prep-offload fastflow: the policy's choice
  pipeline::DistributedCacheKind distributed_cache{};  // --distributed-cache
};

// The run's configuration, as the report shows it.
nlohmann::json run_config(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec);

// `gpemu train --json`'s object.
nlohmann::json train_json(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec,
                          double wall_s, const std::vector<std::string>& notes);

// The text summary: what ran, the summary rows, per-GPU figures, notes.
void print_train(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec, double wall_s,
                 const std::vector<std::string>& notes);

}  // namespace gpemu::cli
