// The emulated timeline and its export as a Chrome trace.
//
// Sections: timeline, trace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/time.h"

// ==== timeline ====
//
// The emulated timeline: where every emulated operation (kernel, copy,
// collective step, event record) gets its start and end time.
//
// An operation is issued with a lower bound (the host's issue time), the
// completions it depends on (stream order, engine availability, event waits)
// and a cost: either a fixed duration, or a number of bytes to move over a
// Link whose bandwidth is shared max-min fairly between the transfers that
// cross it at the same time.
//
// Fixed-cost operations whose dependencies are known are resolved when they
// are issued (the fast path: no allocation, O(1)). Operations that depend on a
// transfer over a shared link stay *pending*: a later transfer may still join
// the link and slow them down. Pending operations are resolved by a
// discrete-event simulation of the link flows, run lazily when a host thread
// waits or queries. Everything up to the clock's now() is committed (no
// operation can be issued in the past); later times are provisional, so a
// waiting host thread sleeps to the provisional end and checks again.
//
// Thread safety: a Timeline and everything issued on it may be used from any
// host thread; one mutex guards it and is never held while sleeping.

namespace gpemu {

class Timeline;
namespace detail {
struct PendingOp;
}

// How a link's capacity is divided between the transfers that cross it at
// the same time. A GPU shared by several processes is a link too: its compute
// engine, whose "bytes" are nanoseconds of kernel time (docs/sharing.md).
enum class ShareRule {
  MaxMin,     // max-min fair over the transfers' caps (networks, PCIe)
  TimeSlice,  // equal shares, of capacity x contended_efficiency while two or more are active
  Demand,     // every transfer at capacity / max(1, sum of sm_demand, sum of bw_demand)
  Priority,   // one at a time, to completion: highest priority first, then first joined
};
struct LinkShare {
  ShareRule rule = ShareRule::MaxMin;
  // TimeSlice: the share of time left to the transfers while they switch
  // (quantum / (quantum + switch cost)); 1 when only one is active.
  double contended_efficiency = 1;
};

// A shared bandwidth resource (a PCIe host link, an NVLink, a NIC).
class Link {
 public:
  const std::string& name() const { return name_; }
  double capacity_bytes_per_s() const { return capacity_; }
  const LinkShare& share() const { return share_; }

 private:
  friend class Timeline;
  Link(std::string name, double capacity, int index, LinkShare share)
      : name_(std::move(name)), capacity_(capacity), index_(index), share_(share) {}
  std::string name_;
  double capacity_;
  int index_;
  LinkShare share_;
};

// The completion of an issued operation: a time once resolved.
class Completion {
 public:
  Completion() = default;
  static Completion at(Time t) {
    Completion c;
    c.end_ = t;
    return c;
  }
  // True when the end time can no longer change.
  bool resolved() const;
  // The end time once resolved(); before that, a lower bound.
  Time known_end() const;
  // The start time once resolved() (for a transfer, when it could first
  // move: its dependencies were done), else known_end() - duration.
  Time known_start(Duration duration) const;

 private:
  friend class Timeline;
  Time end_ = 0;
  std::shared_ptr<detail::PendingOp> op_;
};

// Where an operation is drawn in a trace, and what it is.
struct TraceTag {
  std::string_view name;
  int device = -1;  // process row in the trace
  int stream = -1;  // stream track (-1: none)
  int engine = -1;  // engine track (-1: none)
  std::string_view category = "op";
};

struct TraceRecord {
  std::string name;
  std::string category;
  int device;
  int stream;
  int engine;
  Time start;
  Time end;
};

// A host-side span (loader work, data stall, host wait) for the trace.
struct HostSpan {
  std::string name;
  std::string category;
  std::string process;  // e.g. "host", "loader"
  int thread;           // track within the process
  Time start;
  Time end;
};

struct OpSpec {
  Time lower_bound = 0;        // cannot start before this (issue time)
  Duration duration = 0;       // fixed cost, or latency before the bytes of a transfer flow
  const Link* link = nullptr;  // set for a transfer
  // A second link the transfer crosses at the same time (a network switch
  // behind a NIC). Its rate is then the smaller of its fair shares on the
  // two links, each link water-filled with the flow's rate on the other as
  // its cap: exact when the flows sharing the links are alike, an
  // approximation of global max-min otherwise (docs/interconnect.md).
  const Link* link2 = nullptr;
  double bytes = 0;     // bytes to move over link
  double rate_cap = 0;  // bytes/s this transfer can reach alone (e.g. the device's own lanes)
  // ShareRule::Priority: larger first. ShareRule::Demand: the shares of the
  // GPU's SMs and memory bandwidth the operation keeps busy when alone.
  int priority = 0;
  float sm_demand = 1, bw_demand = 1;
  TraceTag tag;
  bool trace = true;  // false for markers (event records, stream waits)
};

// Work counters. They count work, not time, so tests can pin how the
// resolution scales with the number of operations and transfers.
struct TimelineStats {
  std::uint64_t ops_issued = 0;
  std::uint64_t ops_pending_path = 0;   // took the pending (simulated-flow) path
  std::uint64_t resolutions = 0;        // calls that needed the flow simulation
  std::uint64_t restarts = 0;           // resolutions that rebuilt it from the committed horizon
  std::uint64_t ops_loaded = 0;         // pending operations (re)loaded by restarts
  std::uint64_t events = 0;             // distinct event times simulated
  std::uint64_t water_fills = 0;        // per-link max-min rate computations
  std::uint64_t flow_rate_updates = 0;  // flows whose rate those computations set
};

class Timeline {
 public:
  explicit Timeline(Clock& clock);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  Clock& clock() const { return clock_; }

  // A link whose bandwidth concurrent transfers share. With shared=false the
  // link is dedicated to one device's transfers, which are serialised by its
  // copy engine anyway, so they resolve on issue. `share` says how a shared
  // link divides its capacity (shared=false ignores it).
  const Link& add_link(std::string name, double capacity_bytes_per_s, bool shared = true, LinkShare share = {});

  // The host's issue time for a new operation: now(), never before the
  // committed horizon.
  Time issue_time() const;

  // Issues an operation that starts after op.lower_bound and after every dep.
  Completion issue(const OpSpec& op, std::span<const Completion> deps);

  // Blocks the calling host thread until c has completed; returns its end.
  Time wait(const Completion& c);
  // The same, sleeping through `sleep_until` (a HostSync's sleeper, so peers
  // under the virtual clock know when this thread runs again): sleeps to the
  // provisional end and looks again until c is final and past.
  Time wait(const Completion& c, const std::function<void(Time)>& sleep_until);
  // True when c has completed by now (does not block).
  bool query(const Completion& c);
  // The (possibly provisional) end time of c, resolving pending flows.
  Time end_time(const Completion& c);
  // Blocks until every issued operation has completed; returns the latest end.
  Time wait_all();
  // Ends c at now() if it has not ended (the process that issued it died, and
  // CUDA tears down its context): unstarted, it ends as soon as it may start;
  // on its link, it gives its share back at once. What depends on c then
  // follows from that end. An operation already final keeps its end.
  void cancel(const Completion& c);

  // Tracing: when enabled, every operation issued from then on has its final
  // start/end recorded (an operation issued while it was off is not).
  void enable_trace(bool on);
  bool tracing() const { return tracing_; }
  void add_host_span(HostSpan span);
  std::vector<TraceRecord> trace_records() const;
  std::vector<HostSpan> host_spans() const;

  TimelineStats stats() const;

 private:
  struct Sim;
  // Simulates pending flows, commits everything up to now() and, when asked,
  // runs on provisionally until target (or everything) is resolved. Returns
  // the provisional end of target, or of everything with to_end.
  Time resolve_locked(detail::PendingOp* target, bool to_end);
  void finalize_locked(detail::PendingOp& op);
  void restart_locked(Time now);
  void append_locked(detail::PendingOp& op);
  const std::string* intern_locked(std::string_view s);
  void record_locked(const TraceTag& tag, Time start, Time end);

  Clock& clock_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<bool> link_shared_;
  std::vector<std::shared_ptr<detail::PendingOp>> pending_;  // issue order
  Time horizon_ = 0;                                         // everything before this is committed
  Time latest_end_ = 0;                                      // latest end of any resolved operation
  bool tracing_ = false;
  std::vector<TraceRecord> records_;
  std::vector<HostSpan> spans_;
  TimelineStats stats_;
  std::uint64_t next_seq_ = 0;
  // The flow simulation's state between resolutions: a resolution at the
  // same now with only later-starting operations issued since continues it
  // instead of rebuilding it from the committed horizon.
  // It also holds the interned trace names of pending operations.
  std::unique_ptr<Sim> sim_;
};

}  // namespace gpemu

// ==== trace ====
//
// Chrome trace / Perfetto JSON export of an emulated timeline: one process
// per emulated GPU with one track per engine and one per stream, plus the
// host-side spans (loader workers, data stalls, host waits). Open the file in
// https://ui.perfetto.dev or chrome://tracing.

namespace gpemu {

struct TraceDeviceName {
  int device;
  std::string name;  // e.g. "GPU 0 (V100-PCIE-32GB)"
};
// The name every front end gives a GPU's row: "GPU 0 (V100-PCIE-32GB)".
std::string trace_gpu_name(int index, std::string_view gpu_id);

void write_chrome_trace(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                        const std::vector<TraceDeviceName>& devices, std::ostream& out);

// The same trace written to `path` as a whole file (common/atomic_file.h): a
// failed write (full disk, missing folder) throws InputError naming the path
// and the OS reason, and leaves no partial trace behind.
void write_chrome_trace_file(const std::vector<TraceRecord>& records, const std::vector<HostSpan>& spans,
                             const std::vector<TraceDeviceName>& devices, const std::filesystem::path& path);

}  // namespace gpemu
