// What `gpemu torch` tells the script's processes through the environment
// (Settings, read by Settings::from_env), and what a process reads of its
// own there: its label in the run and its name as a client of gpemu serve.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "gpemu/clock.h"

namespace gpemu::torch_backend {

// What `gpemu torch` passes to the script's processes, through the
// environment (so that DataLoader workers and spawned ranks see it too).
struct Settings {
  std::string gpu = "v100";
  int gpus = 1;
  ClockKind clock = ClockKind::Real;
  std::optional<std::filesystem::path> json;    // summary written at exit
  std::optional<std::filesystem::path> trace;   // Perfetto trace written at exit
  std::optional<std::filesystem::path> report;  // HTML report written at exit
  std::string script;                           // what the run runs, for the report's title
  // The run's first process (the script's), which writes the files; every
  // other process of the run that used an emulated GPU (a rank) leaves its
  // part in `parts` (a folder the first process made) for it to merge.
  bool main_process = true;
  std::optional<std::filesystem::path> parts;
  // A zoo model the script trains: its learned per-phase correction
  // (calibration.h, ModelCorrection) scales the ops' times, as `gpemu
  // predict` applies it. Empty: none (the per-op model alone).
  std::string model;
  // A `gpemu serve` socket: the devices are that server's GPUs 0 to gpus-1
  // (its card, its policy; the clock is real), `gpu` is not used.
  std::optional<std::filesystem::path> serve;
  int priority = 0;  // the server's policy priority: larger first
  std::string mig;   // the server's policy mig: this process's slice
  // The host profile (host.h) whose per-op costs the host pays under the
  // virtual clock, by name or file (calibration.h, find_host); empty: the
  // default host (kDefaultHost), as `gpemu predict --host`.
  std::string host;
  // The function (or torch.profiler.record_function label) whose calls mark
  // the script's steps (gpemu torch --step-marker); empty: optimizer.step()
  // calls, else backward calls.
  std::string step_marker;
  // The launcher's ranks (one process each) span `nodes` nodes of
  // `node_ranks` ranks, joined by `network` (a preset or a network file,
  // interconnect/cluster.h): a collective of all nodes x node_ranks ranks is
  // the cluster's (`gpemu torch` reads torchrun's or mpirun's variables,
  // cli/rank_nodes.h).
  int nodes = 1;
  int node_ranks = 1;
  std::string network = "100gbe";

  // GPEMU_TORCH_GPU, GPEMU_TORCH_GPUS, GPEMU_TORCH_NODES, GPEMU_TORCH_NODE_RANKS, GPEMU_TORCH_NETWORK,
  // GPEMU_TORCH_CLOCK, GPEMU_TORCH_JSON, GPEMU_TORCH_TRACE, GPEMU_TORCH_REPORT, GPEMU_TORCH_MODEL, GPEMU_TORCH_SCRIPT,
  // GPEMU_TORCH_MAIN_PID (main_process: this process's id, or unset), GPEMU_TORCH_PARTS, GPEMU_TORCH_SERVE,
  // GPEMU_TORCH_PRIORITY, GPEMU_TORCH_MIG, GPEMU_TORCH_HOST,
  // GPEMU_TORCH_STEP_MARKER; unset ones keep their defaults. InputError naming the
  // variable for a value that is not accepted.
  static Settings from_env();
};

// The largest device count `gpemu torch --gpus` accepts (a DGX-class node has 8;
// PyTorch's DeviceIndex is an int8).
inline constexpr int kMaxTorchGpus = 64;

namespace detail {

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> env(const char* name);
// This process in the run's outputs: "rank N" under a launcher, else "pid N".
std::string rank_label();
// Its name as a client of gpemu serve: the script's file name and its rank label.
std::string client_name(const Settings& s);

}  // namespace detail
}  // namespace gpemu::torch_backend
