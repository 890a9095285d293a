// `gpemu train`'s flags of a preprocessing service (include/gpemu/prep_service.h):
// remote workers, their CPUs, what they run, and the network to them.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>

#include "gpemu/cost_model.h"
#include "gpemu/fastflow.h"
#include "gpemu/job.h"

namespace gpemu::cli {

struct PrepArgs {
  int workers = 0;
  int cpus_per_worker = 1;
  std::string offload = "none";  // or "fastflow": FastFlow's policy chooses
  double local_share = 0;
  std::string network;  // "": the job's --network
  int worker_buffer = 2;
  int image_size = 0;  // the loader's output images, N x N; 0: the transform's default (224)
  // A running `gpemu prep serve` (real clock): "HOST:PORT", and the dataset
  // folder as its workers see it ("": --data's, made absolute).
  std::string service;
  std::string service_data;
};

void add_prep_options(CLI::App* cmd, PrepArgs& a);
// Sets the job's preprocessing service (and the loader's output size) from
// the flags once its data is known (`job_network`: the job's --network).
// InputError naming the flag for what the service cannot serve: the real
// clock, in-memory batches, several GPUs, a bad value. With --prep-offload
// fastflow, FastFlow's policy profiles the job (`costs`) and chooses the
// offload and local share; its choice is returned and noted.
std::optional<FastFlowChoice> apply_prep_args(const PrepArgs& a, const std::string& job_network, const CostModel& costs,
                                              JobSpec& spec, std::vector<std::string>& notes);
// After the run: what a running service's workers and the client did (the
// source's counters), as notes; nothing without --prep-service.
void add_prep_service_notes(const PrepArgs& a, const RunRecord& record, std::vector<std::string>& notes);
// The service's figures for --json (null without one): workers, cpus_per_worker, offload, local_share,
// network, nic_bytes_per_s, worker_buffer, and FastFlow's profile and choice (fastflow: null unless chosen so).
nlohmann::json prep_service_json(const JobSpec& spec, const std::optional<FastFlowChoice>& fastflow);

}  // namespace gpemu::cli
