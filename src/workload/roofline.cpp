// A kernel's demand on a GPU by the roofline (roofline.h).
#include "workload/roofline.h"

#include <algorithm>

namespace gpemu {

KernelDemand roofline_demand(const GpuSpec& gpu, Precision precision, double flops, double bytes) {
  const double peak = gpu.peak_tflops(precision).value_or(gpu.fp32_tflops) * 1e12;
  const double bandwidth = gpu.memory_bandwidth_gbs * 1e9;
  if (!(peak > 0) || !(bandwidth > 0) || !(flops >= 0) || !(bytes >= 0) || flops + bytes <= 0) return {};
  const double compute = flops / peak, memory = bytes / bandwidth, busiest = std::max(compute, memory);
  return {static_cast<float>(compute / busiest), static_cast<float>(memory / busiest)};
}

}  // namespace gpemu
