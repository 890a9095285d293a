// Chrome trace / Perfetto JSON export of an emulated timeline: one process
// per emulated GPU with one track per engine and one per stream, plus the
// host-side spans (loader workers, data stalls, host waits). Open the file in
// https://ui.perfetto.dev or chrome://tracing.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "gpemu/timeline.h"

namespace gpemu {

struct TraceDeviceName {
  int device;
  std::string name;  // e.g. "GPU 0 (V100-PCIE-32GB)"
};

void write_chrome_trace(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                        const std::vector<TraceDeviceName>& devices, std::ostream& out);

}  // namespace gpemu
