#include "gpemu/device.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

PcieModel PcieModel::for_link(int generation, int lanes) {
  // Per-lane data rate per direction in GB/s after encoding (PCI-SIG base
  // specifications: 2.5/5 GT/s with 8b/10b, 8/16/32/64 GT/s with 128b/130b;
  // Gen6 uses FLIT mode, taken here as 64 GT/s x 242/256).
  static constexpr double kLaneGbs[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  if (generation < 1 || generation > 6)
    throw InputError(fmt::format("unsupported PCIe generation {}: accepted 1 to 6", generation));
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16)
    throw InputError(fmt::format("unsupported PCIe lane count {}: accepted 1, 2, 4, 8, 16", lanes));
  PcieModel m;
  m.generation = generation;
  m.lanes = lanes;
  m.raw_gbs = kLaneGbs[generation] * lanes;
  // Pinned copies reach ~80% of the link after TLP headers and flow control
  // (Gen3 x16: ~12.6 GB/s, the figure bandwidthTest reports on V100 PCIe
  // servers; the GPEmu artifact's notes say ~12 GB/s for pinned loaders).
  m.pinned_gbs = m.raw_gbs * 0.80;
  // Pageable copies are staged by the driver through a pinned bounce buffer,
  // so they are bounded by host memcpy and run at roughly a third of pinned
  // on the PCIe 3 servers GPEmu measured (~4.3 GB/s for ResNet-50 batches on
  // V100, reference/gpemu-profiles); we keep that ratio for later
  // generations, capped by a single-thread memcpy of ~20 GB/s.
  m.pageable_gbs = std::min(m.pinned_gbs * 0.34, 20.0);
  m.pinned_latency = 8 * kMicrosecond;
  m.pageable_latency = 15 * kMicrosecond;
  return m;
}

}  // namespace gpemu
