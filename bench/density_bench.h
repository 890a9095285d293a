// Device-density benchmark (`gpemu bench density`): how much host memory one
// emulated GPU costs. Creates `devices` emulated GPUs (each a Device with its
// default stream, engines, dedicated PCIe links and caching allocator) on one
// Timeline and virtual clock in this process, measures the heap they take
// (glibc mallinfo2: in-use arena bytes plus mmapped bytes, after minus before,
// divided by the device count), then runs one small op on each (allocate,
// kernel, free) to show they all work, and measures again.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "gpemu/time.h"

namespace gpemu {

struct DensityBenchOptions {
  // Emulated GPUs to create. Default 1,000 (well under a second); quick()
  // uses 100.
  int devices = 1000;
  // The small op run on each device: allocate alloc_bytes, launch a kernel
  // of `kernel`, free. Disabled with run_op = false.
  bool run_op = true;
  std::uint64_t alloc_bytes = 1 << 20;
  Duration kernel = 100 * kMicrosecond;
  // Emulated GPU (catalog name).
  std::string gpu = "v100";

  static DensityBenchOptions quick() {
    DensityBenchOptions o;
    o.devices = 100;
    return o;
  }
};

// Returns
//   {"benchmark": "density", "gpu": ..., "devices": N,
//    "bytes_per_device": <heap per device after creation>,
//    "bytes_per_device_after_op": <after the op on each, blocks cached>,
//    "sizeof_device": ..., "heap_bytes_created": ..., "create_s": ...,
//    "ops_ok": <devices whose op completed as expected>, "emulated_end_us": ...}
// Throws InputError for devices < 1, a negative kernel duration or an unknown
// GPU name.
nlohmann::json run_density_bench(const DensityBenchOptions& options = {});

void print_density_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
