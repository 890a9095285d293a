// The Chrome trace of include/gpemu/timeline.h with an "args" object per
// record: what a front end knows of each operation beyond its name (gpemu
// torch: a kernel's shapes, bytes, FLOPs and phase).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "gpemu/timeline.h"

namespace gpemu {

// args[i]: the JSON object text of records[i]'s "args" ("" or past the end: none).
void write_chrome_trace_with_args(const std::vector<TraceRecord>& records, const std::vector<std::string>& args,
                                  const std::vector<HostSpan>& spans, const std::vector<TraceDeviceName>& devices,
                                  std::ostream& out);
void write_chrome_trace_file_with_args(const std::vector<TraceRecord>& records, const std::vector<std::string>& args,
                                       const std::vector<HostSpan>& spans, const std::vector<TraceDeviceName>& devices,
                                       const std::filesystem::path& path);

}  // namespace gpemu
