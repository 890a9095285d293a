// Chrome trace / Perfetto JSON export of an emulated timeline: one process
// per emulated GPU with one track per engine and one per stream, plus the
// host-side spans (loader workers, data stalls, host waits). Open the file in
// https://ui.perfetto.dev or chrome://tracing.
#pragma once

#include <filesystem>
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

// The same trace written to `path` as a whole file (common/atomic_file.h): a
// failed write (full disk, missing folder) throws InputError naming the path
// and the OS reason, and leaves no partial trace behind.
void write_chrome_trace_file(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                             const std::vector<TraceDeviceName>& devices, const std::filesystem::path& path);

}  // namespace gpemu
