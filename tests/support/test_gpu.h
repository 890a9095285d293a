// A GPU spec for device tests that does not depend on the catalog's data.
#pragma once

#include "gpemu/catalog.h"

namespace gpemu::testing {

inline const GpuSpec& test_gpu() {
  static const GpuSpec spec = [] {
    GpuSpec s;
    s.id = "TEST-GPU";
    s.name = "Test GPU";
    s.vendor = "NVIDIA";
    s.architecture = "Volta";
    s.memory_bytes = 16ull << 30;
    s.memory_bandwidth_gbs = 900;
    s.fp32_tflops = 14;
    s.sm_count = 80;
    s.pcie_gen = 3;
    s.pcie_lanes = 16;
    return s;
  }();
  return spec;
}

}  // namespace gpemu::testing
