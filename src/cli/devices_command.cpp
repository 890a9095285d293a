#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catalog/gpu_json.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "gpemu/catalog.h"

namespace gpemu::cli {
namespace {

std::string tflops(double v) { return v > 0 ? fixed(v, 1) : "-"; }

}  // namespace

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List the GPUs gpemu can emulate, with their specifications");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->callback([json] {
    const auto& gpus = gpu_catalog();
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const GpuSpec& g : gpus) out.push_back(gpu_json(g));
      std::cout << out.dump(2) << '\n';
      return;
    }
    Table t({"id", "architecture", "memory GiB", "mem GB/s", "FP32 TF", "TF32 TF", "FP16 TF", "BF16 TF", "SMs", "PCIe",
             "NVLink GB/s"});
    for (const GpuSpec& g : gpus) {
      t.add({g.id, g.architecture, fixed(static_cast<double>(g.memory_bytes) / (1ull << 30), 1),
             fixed(g.memory_bandwidth_gbs, 0), tflops(g.fp32_tflops), tflops(g.tf32_tflops), tflops(g.fp16_tflops),
             tflops(g.bf16_tflops), std::to_string(g.sm_count), fmt::format("gen{} x{}", g.pcie_gen, g.pcie_lanes),
             g.nvlink_gbs > 0 ? fixed(g.nvlink_gbs, 0) : "-"});
    }
    t.print(std::cout);
    std::cout << "\nSources and matching rules: docs/catalog.md. Names match forgivingly (e.g. 'v100', "
                 "'Tesla_V100-PCIE-32GB').\n";
  });
}

}  // namespace gpemu::cli
