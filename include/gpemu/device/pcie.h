// PCIe host-link model: the bandwidth and latency an emulated GPU's copies to
// and from host memory get, by PCIe generation and lane count, for pinned and
// for pageable host memory. Figures and their sources: docs/pcie.md.
#pragma once

#include "gpemu/device/host_memory.h"
#include "gpemu/time.h"

namespace gpemu {

struct PcieModel {
  int generation = 3;
  int lanes = 16;
  double raw_gbs = 0;       // per direction, after line encoding, GB/s
  double pinned_gbs = 0;    // achievable cudaMemcpyAsync from pinned memory
  double pageable_gbs = 0;  // achievable from pageable memory (staged through a driver bounce buffer)
  Duration pinned_latency = 0;
  Duration pageable_latency = 0;

  double gbs(HostMemoryKind k) const { return k == HostMemoryKind::Pinned ? pinned_gbs : pageable_gbs; }
  Duration latency(HostMemoryKind k) const { return k == HostMemoryKind::Pinned ? pinned_latency : pageable_latency; }

  // InputError for a generation outside 1..6 or lanes not in {1,2,4,8,16}.
  static PcieModel for_link(int generation, int lanes);
};

}  // namespace gpemu
