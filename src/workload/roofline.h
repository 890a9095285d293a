// A kernel's demand on a GPU by the roofline (the job's kernels and the
// sharing bench's).
#pragma once

#include "gpemu/catalog.h"
#include "gpemu/device/device.h"

namespace gpemu {

// What a kernel of `flops` and `bytes` of memory traffic keeps busy on `gpu`
// when alone, by the roofline at the card's peaks: the slower of compute and
// memory is the bottleneck (1), the other its share of that time. {1, 1}
// when the figures are missing.
KernelDemand roofline_demand(const GpuSpec& gpu, Precision precision, double flops, double bytes);

}  // namespace gpemu
