#include "gpemu/timeline.h"

#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "device/trace_args.h"
#include "gpemu/device.h"

namespace gpemu {
namespace {

constexpr int kStreamTrackBase = 100;  // engine tracks are 0..2, stream tracks 100+id
constexpr int kHostPidBase = 1000;

double us(Time t) { return static_cast<double>(t) / 1000.0; }

nlohmann::json meta(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

void write_chrome_trace(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                        const std::vector<TraceDeviceName>& devices, std::ostream& out) {
  write_chrome_trace_with_args(records, {}, spans, devices, out);
}

void write_chrome_trace_with_args(const std::vector<TraceRecord>& records, const std::vector<std::string>& args,
                                  const std::vector<HostSpan>& spans, const std::vector<TraceDeviceName>& devices,
                                  std::ostream& out) {
  nlohmann::json events = nlohmann::json::array();
  std::set<std::pair<int, int>> tracks;
  std::set<int> pids;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    const int pid = r.device + 1;
    pids.insert(pid);
    auto emit = [&](int tid) {
      tracks.emplace(pid, tid);
      nlohmann::json e = {{"ph", "X"},  {"name", r.name},    {"cat", r.category},         {"pid", pid},
                          {"tid", tid}, {"ts", us(r.start)}, {"dur", us(r.end - r.start)}};
      if (i < args.size() && !args[i].empty())
        e["args"] = nlohmann::json::parse(args[i], nullptr, /*allow_exceptions=*/false);
      events.push_back(std::move(e));
    };
    if (r.engine >= 0) emit(r.engine);
    if (r.stream >= 0) emit(kStreamTrackBase + r.stream);
  }
  for (const TraceDeviceName& d : devices) {
    events.push_back(meta("process_name", d.device + 1, 0, d.name));
    events.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", d.device + 1}, {"args", {{"sort_index", d.device + 1}}}});
  }
  for (auto [pid, tid] : tracks) {
    std::string name = tid < kStreamTrackBase ? fmt::format("{} engine", to_string(static_cast<Engine>(tid)))
                                              : fmt::format("stream {}{}", tid - kStreamTrackBase,
                                                            tid == kStreamTrackBase ? " (default)" : "");
    events.push_back(meta("thread_name", pid, tid, name));
  }
  std::map<std::string, int> host_pids;
  std::set<std::pair<int, int>> host_tracks;
  for (const HostSpan& s : spans) {
    auto [it, fresh] = host_pids.emplace(s.process, kHostPidBase + static_cast<int>(host_pids.size()));
    if (fresh) events.push_back(meta("process_name", it->second, 0, s.process));
    if (host_tracks.emplace(it->second, s.thread).second)
      events.push_back(meta("thread_name", it->second, s.thread, fmt::format("{} {}", s.process, s.thread)));
    events.push_back({{"ph", "X"},
                      {"name", s.name},
                      {"cat", s.category},
                      {"pid", it->second},
                      {"tid", s.thread},
                      {"ts", us(s.start)},
                      {"dur", us(s.end - s.start)}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  out << doc.dump() << '\n';
}

}  // namespace gpemu

namespace gpemu {

void write_chrome_trace_file(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                             const std::vector<TraceDeviceName>& devices, const std::filesystem::path& path) {
  write_chrome_trace_file_with_args(records, {}, spans, devices, path);
}

void write_chrome_trace_file_with_args(const std::vector<TraceRecord>& records, const std::vector<std::string>& args,
                                       const std::vector<HostSpan>& spans, const std::vector<TraceDeviceName>& devices,
                                       const std::filesystem::path& path) {
  std::ostringstream text;
  write_chrome_trace_with_args(records, args, spans, devices, text);
  write_file_atomically(path, text.view(), "trace file");
}

std::string trace_gpu_name(int index, std::string_view gpu_id) { return fmt::format("GPU {} ({})", index, gpu_id); }

}  // namespace gpemu
