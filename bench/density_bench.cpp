#include "density_bench.h"

#include <malloc.h>

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/timeline.h"

namespace gpemu {
namespace {

// Heap bytes in use: small allocations in all malloc arenas plus large
// mmapped ones. Allocations by other threads of the process meanwhile would
// be counted too; the benchmark expects to run alone.
std::int64_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<std::int64_t>(mi.uordblks + mi.hblkhd);
}

}  // namespace

nlohmann::json run_density_bench(const DensityBenchOptions& o) {
  const GpuSpec& spec = find_gpu(o.gpu);
  if (o.devices < 1) throw InputError(fmt::format("density bench: devices must be at least 1, got {}", o.devices));
  if (o.kernel < 0) throw InputError("density bench: kernel duration must not be negative");
  const auto n = static_cast<std::size_t>(o.devices);
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  std::vector<std::unique_ptr<Device>> devices;
  devices.reserve(n);  // the harness's own vector is not counted

  const std::int64_t before = heap_in_use();
  const std::int64_t t0 = bench::monotonic_ns();
  for (std::size_t i = 0; i < n; ++i) {
    DeviceOptions d;
    d.index = static_cast<int>(i);
    devices.push_back(std::make_unique<Device>(timeline, spec, d));
  }
  const double create_s = static_cast<double>(bench::monotonic_ns() - t0) * 1e-9;
  const std::int64_t created = heap_in_use() - before;

  nlohmann::json out;
  out["benchmark"] = "density";
  out["gpu"] = spec.id;
  out["devices"] = o.devices;
  out["sizeof_device"] = sizeof(Device);
  out["sizeof_caching_allocator"] = sizeof(CachingAllocator);
  out["heap_bytes_created"] = created;
  out["bytes_per_device"] = n ? static_cast<double>(created) / static_cast<double>(n) : 0.0;
  out["create_s"] = create_s;

  if (o.run_op) {
    const Time start = clock->now();
    std::vector<CachingAllocator::Ptr> ptrs(n);
    for (std::size_t i = 0; i < n; ++i) {
      ptrs[i] = devices[i]->allocator().allocate(o.alloc_bytes);
      devices[i]->default_stream().launch_kernel(o.kernel);
    }
    for (std::size_t i = 0; i < n; ++i) devices[i]->allocator().free(ptrs[i]);
    const Time end = timeline.wait_all();
    int ok = 0;
    for (const auto& d : devices) {
      const AllocatorStats a = d->allocator().stats();
      if (d->stats().kernels == 1 && d->stats().busy[0] == o.kernel && a.allocated_bytes == 0 &&
          a.peak_allocated_bytes >= o.alloc_bytes && d->default_stream().query())
        ++ok;
    }
    const std::int64_t after_op = heap_in_use() - before;
    out["ops_ok"] = ok;
    // All devices run in parallel on their own compute engines: the
    // emulated end is one kernel after the start.
    out["emulated_end_us"] = to_us(end - start);
    out["heap_bytes_after_op"] = after_op;
    out["bytes_per_device_after_op"] = n ? static_cast<double>(after_op) / static_cast<double>(n) : 0.0;
  }
  return out;
}

void print_density_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format("device density: {} emulated {} on one timeline and virtual clock\n",
                    bench::grouped(r.at("devices").get<double>()), r.at("gpu").get<std::string>());
  bench::Table t({"measure", "value"});
  t.add_row({"heap bytes per device (created)", bench::grouped(r.at("bytes_per_device").get<double>())});
  if (r.contains("bytes_per_device_after_op"))
    t.add_row(
        {"heap bytes per device (after one op)", bench::grouped(r.at("bytes_per_device_after_op").get<double>())});
  t.add_row({"sizeof(Device)", bench::grouped(r.at("sizeof_device").get<double>())});
  t.add_row({"time to create all (ms)", bench::fixed(r.at("create_s").get<double>() * 1e3, 1)});
  if (r.contains("ops_ok")) {
    t.add_row(
        {"devices whose op completed", fmt::format("{} / {}", r.at("ops_ok").get<int>(), r.at("devices").get<int>())});
    t.add_row({"emulated end of all ops (us)", bench::fixed(r.at("emulated_end_us").get<double>(), 1)});
  }
  t.print(os);
}

}  // namespace gpemu
