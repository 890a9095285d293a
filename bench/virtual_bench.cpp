#include "virtual_bench.h"

#include <functional>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/timeline.h"

namespace gpemu {
namespace {

struct Variant {
  const char* name;
  const char* what;
  // Issues about `ops` operations on the device; returns how many it issued.
  std::function<std::int64_t(Device&, const VirtualBenchOptions&)> body;
};

std::int64_t kernels_on(Stream& s, const VirtualBenchOptions& o) {
  std::int64_t issued = 0;
  while (issued < o.ops) {
    for (int i = 0; i < o.sync_every && issued < o.ops; ++i, ++issued) s.launch_kernel(o.kernel);
    s.synchronize();
  }
  return issued;
}

const Variant kVariants[] = {
    {"kernels_default_stream", "kernels, default stream, sync every N",
     [](Device& dev, const VirtualBenchOptions& o) { return kernels_on(dev.default_stream(), o); }},
    {"kernels_created_stream", "kernels, created stream, sync every N",
     [](Device& dev, const VirtualBenchOptions& o) { return kernels_on(dev.create_stream(), o); }},
    {"two_streams_events", "2 streams: kernel, record, wait, kernel",
     [](Device& dev, const VirtualBenchOptions& o) {
       Stream& a = dev.create_stream();
       Stream& b = dev.create_stream();
       Event ev;
       std::int64_t issued = 0, since_sync = 0;
       while (issued < o.ops) {
         a.launch_kernel(o.kernel);
         a.record(ev);
         b.wait(ev);
         b.launch_kernel(o.kernel);
         issued += 4;
         since_sync += 4;
         if (since_sync >= o.sync_every) {
           dev.synchronize();
           since_sync = 0;
         }
       }
       dev.synchronize();
       return issued;
     }},
    {"h2d_copies", "pinned H2D copy + kernel, default stream",
     [](Device& dev, const VirtualBenchOptions& o) {
       Stream& s = dev.default_stream();
       std::int64_t issued = 0, since_sync = 0;
       while (issued < o.ops) {
         s.copy_h2d(o.copy_bytes, HostMemoryKind::Pinned);
         s.launch_kernel(o.kernel);
         issued += 2;
         since_sync += 2;
         if (since_sync >= o.sync_every) {
           s.synchronize();
           since_sync = 0;
         }
       }
       s.synchronize();
       return issued;
     }},
};

}  // namespace

nlohmann::json run_virtual_bench(const VirtualBenchOptions& o) {
  const GpuSpec& spec = find_gpu(o.gpu);
  if (o.ops < 1) throw InputError(fmt::format("virtual bench: ops must be at least 1, got {}", o.ops));
  if (o.sync_every < 1)
    throw InputError(fmt::format("virtual bench: sync_every must be at least 1, got {}", o.sync_every));
  if (o.kernel < 0) throw InputError("virtual bench: kernel duration must not be negative");
  nlohmann::json out;
  out["benchmark"] = "virtual";
  out["clock"] = "virtual";
  out["gpu"] = spec.id;
  out["ops"] = o.ops;
  out["sync_every"] = o.sync_every;
  out["kernel_us"] = to_us(o.kernel);
  out["copy_bytes"] = o.copy_bytes;
  out["target_ops_per_s"] = 2e6;
  nlohmann::json variants = nlohmann::json::object();
  for (const Variant& v : kVariants) {
    auto clock = make_virtual_clock();
    Timeline timeline(*clock);
    Device device(timeline, spec);
    const std::int64_t t0 = bench::monotonic_ns(), cpu0 = bench::thread_cpu_ns();
    const std::int64_t issued = v.body(device, o);
    const double seconds = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
    const double cpu_seconds = static_cast<double>(bench::thread_cpu_ns() - cpu0) * 1e-9;
    const TimelineStats st = timeline.stats();
    nlohmann::json j;
    j["description"] = v.what;
    j["ops"] = issued;
    j["seconds"] = seconds;
    j["ops_per_s"] = seconds > 0 ? static_cast<double>(issued) / seconds : 0.0;
    j["cpu_seconds"] = cpu_seconds;
    j["ops_per_cpu_s"] = cpu_seconds > 0 ? static_cast<double>(issued) / cpu_seconds : 0.0;
    j["ns_per_op"] = issued > 0 ? seconds * 1e9 / static_cast<double>(issued) : 0.0;
    j["emulated_s"] = to_seconds(clock->now());
    j["timeline_ops"] = st.ops_issued;
    j["pending_path_ops"] = st.ops_pending_path;
    variants[v.name] = std::move(j);
  }
  out["ops_per_s"] = variants["kernels_default_stream"]["ops_per_s"];
  out["variants"] = std::move(variants);
  return out;
}

void print_virtual_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format("virtual-clock throughput: {} ops per variant on one host thread, {}, sync every {} ops\n",
                    bench::grouped(r.at("ops").get<double>()), r.at("gpu").get<std::string>(),
                    r.at("sync_every").get<int>());
  bench::Table t({"variant", "ops", "wall s", "ops/s", "ns/op", "ops/CPU-s", "emulated s"});
  for (const Variant& v : kVariants) {
    if (!r.at("variants").contains(v.name)) continue;
    const nlohmann::json& j = r.at("variants").at(v.name);
    t.add_row({v.name, bench::grouped(j.at("ops").get<double>()), bench::fixed(j.at("seconds").get<double>(), 3),
               bench::grouped(j.at("ops_per_s").get<double>()), bench::fixed(j.at("ns_per_op").get<double>(), 1),
               bench::grouped(j.at("ops_per_cpu_s").get<double>()), bench::fixed(j.at("emulated_s").get<double>(), 3)});
  }
  t.print(os);
  os << fmt::format("headline (kernels on the default stream): {} ops/s (wall); target {} ops/s\n",
                    bench::grouped(r.at("ops_per_s").get<double>()),
                    bench::grouped(r.at("target_ops_per_s").get<double>()));
}

}  // namespace gpemu
