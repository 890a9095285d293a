// A GPU and node options with round numbers, so interconnect tests can state
// exact times under the virtual clock: NVLink at 1 byte/ns per direction,
// PCIe copies at 1 byte/ns without latency.
#pragma once

#include "gpemu/catalog.h"
#include "gpemu/device.h"
#include "gpemu/interconnect.h"

namespace gpemu::testing {

inline const GpuSpec& round_gpu() {
  static const GpuSpec spec = [] {
    GpuSpec s;
    s.id = "ROUND-SXM";
    s.name = "Round-number test GPU";
    s.vendor = "NVIDIA";
    s.architecture = "Ampere";
    s.memory_bytes = 16ull << 30;
    s.memory_bandwidth_gbs = 900;  // reductions cap at 300 GB/s: never binding here
    s.fp32_tflops = 10;
    s.sm_count = 80;
    s.pcie_gen = 3;
    s.pcie_lanes = 16;
    s.nvlink_gbs = 2;  // 1 GB/s = 1 byte/ns per direction
    return s;
  }();
  return spec;
}

inline PcieModel round_pcie() {
  PcieModel p = PcieModel::for_link(3, 16);
  p.pinned_gbs = 1;
  p.pageable_gbs = 0.5;
  p.pinned_latency = p.pageable_latency = 0;
  return p;
}

inline NodeOptions round_node(int gpus, Fabric fabric = Fabric::NVSwitch) {
  NodeOptions o;
  o.gpus = gpus;
  o.fabric = fabric;
  o.nvlink_efficiency = 1.0;
  o.nvlink_latency = 1000;  // 1 us per step
  o.pcie_p2p_latency = 1000;
  o.device.pcie = round_pcie();
  o.switch_uplink_gbs = 1;
  return o;
}

}  // namespace gpemu::testing
