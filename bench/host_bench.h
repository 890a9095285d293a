// gpemu bench host: the dispatch cost per op of the installed PyTorch on this
// machine's CPU (bench/host_bench.py), turned into a host profile (host.h)
// that predict, train and analyze take with --host FILE (docs/host.md).
#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

namespace gpemu {

struct HostBenchOptions {
  std::string python = "/usr/bin/python3";
  std::string script;  // empty: bench/host_bench.py of the data folder
  // What a CUDA launch adds on the host beyond the CPU-only dispatch
  // (cudaLaunchKernel and the CUDA caching allocator's bookkeeping), per
  // kernel; not measurable without a GPU (docs/host.md says where it is from).
  double cuda_launch_us = 5;
  std::string out;   // write the host profile here (gpemu-host/1)
  std::string name;  // the profile's name (default: "this-host")
  bool short_run = false;
  static HostBenchOptions quick() {
    HostBenchOptions o;
    o.short_run = true;
    return o;
  }
  void keep_inputs(const HostBenchOptions& given) {
    python = given.python;
    script = given.script;
    cuda_launch_us = given.cuda_launch_us;
    out = given.out;
    name = given.name;
  }
};

// Runs the measurement and, with options.out, writes the profile. Throws
// InputError when Python or torch cannot run, naming what is missing.
nlohmann::json run_host_bench(const HostBenchOptions& options);
void print_host_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace gpemu
