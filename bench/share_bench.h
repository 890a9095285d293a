// Sharing benchmark (`gpemu bench share`): what the policies do to jobs
// sharing one emulated GPU, and what emulating them costs, under the virtual
// clock (share.h).
//
//  - MPS interference: a compute-bound job and a memory-bound job (their
//    kernels' roofline demands printed), each alone, two compute-bound jobs
//    together, and the compute-bound beside the memory-bound: each job's
//    throughput over its throughput alone. Two identical compute-bound jobs
//    should each get about half; the mixed pair should lose less.
//  - The policies side by side on two identical jobs: each job's throughput
//    over alone, and the GPU's utilisation.
//  - Emulation cost: wall time per emulated step of N identical jobs on one
//    GPU (the host threads run one at a time under the virtual clock).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu {

struct ShareBenchOptions {
  std::string gpu = "A100-SXM4-40GB";
  std::string compute_model = "resnet50";  // FP32 on the GPU: compute-bound
  int compute_batch = 64;
  std::string memory_model = "mobilenet_v3_small";  // depthwise convolutions: memory-bound
  int memory_batch = 64;
  int steps = 30;
  // Emulation cost: this many jobs of a small model on one GPU (they all fit in its memory).
  std::vector<int> jobs = {2, 8, 32};
  std::string cost_model = "mobilenet_v3_small";
  int cost_batch = 32;
  int cost_steps = 20;

  static ShareBenchOptions quick() {
    ShareBenchOptions o;
    o.steps = 10;
    o.jobs = {2, 8};
    o.cost_steps = 5;
    return o;
  }
};

// Returns {"benchmark": "share", "clock": "virtual", "gpu", "demands": {"compute": {"model",
//   "forward": {"sm", "bw"}, "backward": {...}}, "memory": {...}}, "alone": {"compute", "memory"}
//   (samples/s), "mps": {"two_compute": [ratio, ratio], "compute_beside_memory": {"compute", "memory"}},
//   "policies": [{"policy", "ratio": [..], "utilization_pct"}], "cost": [{"jobs", "steps",
//   "wall_s", "wall_us_per_step"}]}.
nlohmann::json run_share_bench(const ShareBenchOptions& options = {});
void print_share_bench(const nlohmann::json& result, std::ostream& os);

// Serve benchmark (`gpemu bench serve`): what a request to `gpemu serve`
// costs, measured against a server in this process on a socket in a fresh
// temporary folder (real clock; the clients are threads here, the protocol
// and the socket are those other processes use):
//  - per op: one client's "kernel" requests (they return at once), wall
//    round-trip percentiles;
//  - per batch: one client's "batch" requests of `batch_us` emulated
//    microseconds (kernel + sync), round trip less the kernel;
//  - many clients: `clients` clients on one GPU under MPS, each sending
//    `client_batches` batch requests at once; every client must finish;
//    requests per second, round-trip percentiles, and the server's CPU per
//    request (the process's CPU time over the requests).
struct ServeBenchOptions {
  std::string gpu = "A100-SXM4-80GB";
  int op_requests = 2000;
  int batch_requests = 500;
  double batch_us = 10;
  int clients = 64;
  int client_batches = 50;
  double client_batch_us = 100;

  static ServeBenchOptions quick() {
    ServeBenchOptions o;
    o.op_requests = 200;
    o.batch_requests = 50;
    o.clients = 16;
    o.client_batches = 10;
    return o;
  }
};

nlohmann::json run_serve_bench(const ServeBenchOptions& options = {});
void print_serve_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
