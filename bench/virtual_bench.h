// Virtual-clock throughput benchmark (`gpemu bench virtual`): how many
// emulated operations one host core issues and resolves per second when the
// clock is virtual (time jumps instead of passing). Single host thread,
// tracing off, one emulated GPU.
//
// Variants (each issues `ops` timeline operations; an "op" is one call that
// issues one operation on the timeline: a kernel launch, a copy, an event
// record or a stream wait-event):
//   kernels_default_stream  launch_kernel on the default stream, a
//                           synchronize every sync_every ops (the headline)
//   kernels_created_stream  the same on a created (blocking) stream
//   two_streams_events      s1.launch, s1.record(ev), s2.wait(ev), s2.launch,
//                           device synchronize every sync_every ops
//   h2d_copies              copy_h2d(copy_bytes, pinned) then launch_kernel on
//                           the default stream, synchronize every sync_every ops
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "gpemu/time.h"

namespace gpemu {

struct VirtualBenchOptions {
  // Operations per variant. Default 2,000,000 (about 1-3 s per variant on
  // one core); quick() uses 200,000.
  std::int64_t ops = 2'000'000;
  // Host synchronizes after this many ops.
  int sync_every = 100;
  // Emulated kernel duration.
  Duration kernel = 10 * kMicrosecond;
  // Bytes per H2D copy in the h2d_copies variant.
  std::uint64_t copy_bytes = 1 << 20;
  // Emulated GPU (catalog name).
  std::string gpu = "v100";

  // The `--quick` settings: 200,000 ops per variant.
  static VirtualBenchOptions quick() {
    VirtualBenchOptions o;
    o.ops = 200'000;
    return o;
  }
};

// Returns
//   {"benchmark": "virtual", "clock": "virtual", "gpu": ..., "ops": N,
//    "sync_every": ..., "ops_per_s": <kernels_default_stream's>,
//    "target_ops_per_s": 2e6,
//    "variants": {"kernels_default_stream": {"description", "ops", "seconds",
//        "ops_per_s", "cpu_seconds", "ops_per_cpu_s", "ns_per_op",
//        "emulated_s", "timeline_ops", "pending_path_ops"}, ...}}
// ops_per_s and ns_per_op are by wall time; ops_per_cpu_s by the thread's CPU
// time, which stays meaningful on a loaded machine.
// Throws InputError for ops < 1, sync_every < 1, a negative kernel duration
// or an unknown GPU name.
nlohmann::json run_virtual_bench(const VirtualBenchOptions& options = {});

void print_virtual_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
