// Scale benchmark (`gpemu bench scale`): wall time the emulator needs per
// emulated training step of data-parallel jobs of growing size under the
// virtual clock, and its memory per emulated GPU.
//
// Each job is a gpemu::Job (the engine of `gpemu train`) running DDP with
// in-memory batches (always ready): 8 GPUs per node, nodes joined by
// `network`, the gradient all-reduce per DDP bucket hierarchical across nodes
// (interconnect/cluster.h). Host threads run one at a time under the
// virtual clock, so the process uses about one core.
//
// Per job: wall and CPU seconds for `steps` iterations per GPU, including
// building and tearing down the job; the steady rate, over the steps after
// the first `warmup` (the first iteration, and the second, which checks the
// allocator's fixed point, replay every tensor of the model zoo's memory
// plan); the timeline's work counters; and the peak resident memory the job
// added divided by its GPUs. Then a least-squares fit of log(wall s per
// step) against log(GPUs): the exponent (1 = linear), of the steady figures
// when every job has steps after its warm-up, else of the overall ones.
//
// Then one epoch of several nodes reading a dataset (issue 32's target: 64
// nodes x 8 GPUs, a distributed cache, one Imagenette-10G epoch in at most
// 30 s of wall time on one core): `epoch_nodes` nodes of 8 GPUs, the
// modelled loader on each node (workers per GPU, cores per node) over the
// `imagenette10g` virtual dataset (87,473 ImageNet-sized files) on each
// node's nvme disk, a loader cache per node partitioned across the nodes
// (CoorDL's cache: a node reads another's cached samples over `network`),
// two epochs (the first fills the caches). Their wall and CPU seconds, peak
// resident memory, emulated time and the second epoch's cache counters.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu {

struct ScaleBenchOptions {
  std::vector<int> gpus = {8, 64, 256, 1024};
  int steps = 10;  // iterations per GPU
  int warmup = 2;  // of them, left out of the steady rate
  std::string gpu = "A100-SXM4-40GB";
  std::string model = "resnet50";
  int batch_size = 64;
  std::string network = "100gbe";  // preset or JSON file
  std::string sync = "iteration";  // "iteration" (loss.item() every step) or "end"
  double target_steps_per_s = 10;  // at the largest job (issue 10)
  // The epoch of several nodes; 0 nodes: none.
  int epoch_nodes = 64;
  int epoch_batch_size = 32;                     // per GPU
  int epoch_workers = 4;                         // loader workers per GPU
  int epoch_cores = 32;                          // CPU cores per node
  std::uint64_t epoch_cache_bytes = 3ull << 30;  // loader cache per node (LADCache's 3 GiB)
  double epoch_target_wall_s = 30;               // issue 32

  // The `--quick` settings: 8, 64 and 256 GPUs, 3 steps.
  static ScaleBenchOptions quick() {
    ScaleBenchOptions o;
    o.gpus = {8, 64, 256};
    o.steps = 3;
    o.epoch_nodes = 8;
    return o;
  }
};

// Returns {"benchmark": "scale", "clock": "virtual", "gpu", "model", "batch_size",
//   "network", "sync", "steps", "warmup", "load_average_1m", "jobs": [{"gpus", "nodes", "wall_s",
//   "cpu_s", "wall_s_per_step", "steps_per_s", "warmup_s", "steady_wall_s_per_step",
//   "steady_steps_per_s", "emulated_s_per_step", "memory_bytes_per_gpu",
//   "timeline": {...TimelineStats}}...], "exponent", "exponent_of" ("steady" or "overall"),
//   "target_steps_per_s", "largest_steps_per_s" (steady where measured, else overall),
//   "largest_overall_steps_per_s", "epoch": null or {"nodes", "gpus", "batch_size", "workers_per_gpu",
//   "cores_per_node", "cache_bytes_per_node", "dataset", "samples", "wall_s", "cpu_s", "peak_rss_bytes",
//   "emulated_s", "cache_hits", "remote_hits", "storage_reads", "network_bytes", "target_wall_s"}}
//   (the counters summed over the nodes' loaders). warmup_s is the wall time from the start
//   (building the job) until every rank has ended its warm-up steps; the
//   steady figures are null when steps <= warmup.
// InputError for fewer than 1 step, a negative warm-up, a job of fewer than 1
// GPU, or what the job refuses.
nlohmann::json run_scale_bench(const ScaleBenchOptions& options = {});

void print_scale_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
