// Emulated GPUs from Python: gpemu.Emulator (one timeline under a clock)
// and its devices, streams and events, the caching allocator's calls and
// counters (torch.cuda's names). docs/python.md.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catalog/gpu_json.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/report.h"
#include "gpemu/timeline.h"
#include "python/module.h"

namespace gpemu::python {
namespace {

std::uint64_t bytes_arg(long long n, const char* what) {
  if (n < 0) throw InputError(fmt::format("{} {}: a byte count must be 0 or more", what, n));
  return static_cast<std::uint64_t>(n);
}

// torch.cuda.memory_stats()'s names for the allocator's counters.
py::dict memory_stats(const AllocatorStats& s) {
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.peak_allocated_bytes;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.peak_reserved_bytes;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["requested_bytes.all.peak"] = s.peak_requested_bytes;
  d["active.all.current"] = s.active_blocks;
  d["segment.all.current"] = s.segments;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  return d;
}

// One emulated timeline under one clock, and the devices on it.
class Emulator {
 public:
  Emulator(const std::string& clock, bool trace)
      : clock_(make_clock(parse_clock_kind(clock))), timeline_(std::make_unique<Timeline>(*clock_)) {
    timeline_->enable_trace(trace);
  }
  ~Emulator() {
    // The devices' work ends before the timeline goes.
    devices_.clear();
  }

  Device& add_device(const std::string& gpu) {
    if (devices_.size() >= 1024) throw InputError("an Emulator holds at most 1024 devices");
    DeviceOptions o;
    o.index = static_cast<int>(devices_.size());
    devices_.push_back(std::make_unique<Device>(*timeline_, find_gpu(gpu), o));
    return *devices_.back();
  }
  Clock& clock() { return *clock_; }
  Timeline& timeline() { return *timeline_; }

  void write_trace(const std::filesystem::path& path) const {
    if (!timeline_->tracing())
      throw InputError("write_trace: this Emulator records no trace; create it with Emulator(trace=True)");
    std::vector<TraceDeviceName> names;
    for (const auto& d : devices_) names.push_back({d->index(), trace_gpu_name(d->index(), d->spec().id)});
    write_chrome_trace_file(timeline_->trace_records(), timeline_->host_spans(), names, path);
  }

 private:
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<Timeline> timeline_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace

void bind_devices(py::module_& m) {
  py::class_<Event>(m, "Event", "A CUDA event: records where a stream has reached.")
      .def(py::init<>())
      .def_property_readonly("recorded", &Event::recorded)
      .def("query", &Event::query, py::call_guard<py::gil_scoped_release>(),
           "True when the recorded work has completed (and for an event never recorded).")
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Blocks until the recorded work has completed.")
      .def(
          "time", [](Event& e) { return to_seconds(e.time()); }, py::call_guard<py::gil_scoped_release>(),
          "The emulated time (s) the stream reached this event; blocks until it has.")
      .def(
          "elapsed_time", [](Event& start, Event& end) { return to_ms(Event::elapsed(start, end)); }, py::arg("end"),
          py::call_guard<py::gil_scoped_release>(),
          "Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time.");

  py::class_<Stream, std::unique_ptr<Stream, py::nodelete>>(m, "Stream", "A CUDA stream of an emulated device.")
      .def_property_readonly("id", &Stream::id)
      .def_property_readonly("non_blocking", &Stream::non_blocking)
      .def(
          "launch_kernel",
          [](Stream& s, double seconds, const std::string& name) {
            s.launch_kernel(python::seconds_arg(seconds, "launch_kernel"), name);
          },
          py::arg("seconds"), py::arg("name") = "kernel",
          "A kernel that takes `seconds` on the GPU; returns at once (CUDA's asynchronous launch).")
      .def(
          "copy_h2d",
          [](Stream& s, long long bytes, bool pinned, const std::string& name) {
            py::gil_scoped_release unlocked;
            s.copy_h2d(python::bytes_arg(bytes, "copy_h2d"), pinned ? HostMemoryKind::Pinned : HostMemoryKind::Pageable,
                       name);
          },
          py::arg("nbytes"), py::arg("pinned") = true, py::arg("name") = "H2D",
          "Host-to-device copy over the PCIe model; from pageable memory it returns only when done.")
      .def(
          "copy_d2h",
          [](Stream& s, long long bytes, bool pinned, const std::string& name) {
            py::gil_scoped_release unlocked;
            s.copy_d2h(python::bytes_arg(bytes, "copy_d2h"), pinned ? HostMemoryKind::Pinned : HostMemoryKind::Pageable,
                       name);
          },
          py::arg("nbytes"), py::arg("pinned") = true, py::arg("name") = "D2H",
          "Device-to-host copy; to pageable memory it returns only when done.")
      .def("record", &Stream::record, py::arg("event"), py::keep_alive<2, 1>(),
           "Records `event` at this point of the stream.")
      .def("wait", &Stream::wait, py::arg("event"),
           "Later work on this stream waits for `event` (cudaStreamWaitEvent).")
      .def("synchronize", &Stream::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Blocks until all work issued to this stream has completed.")
      .def("query", &Stream::query, py::call_guard<py::gil_scoped_release>(),
           "True when all work issued to this stream has completed.");

  py::class_<Device, std::unique_ptr<Device, py::nodelete>>(m, "Device", "An emulated GPU (Emulator.device).")
      .def_property_readonly("index", &Device::index)
      .def_property_readonly("gpu", [](const Device& d) { return python::to_python(gpu_json(d.spec())); })
      .def_property_readonly("default_stream", &Device::default_stream, py::return_value_policy::reference_internal)
      .def("create_stream", &Device::create_stream, py::arg("non_blocking") = false,
           py::return_value_policy::reference_internal, "A new stream (lives as long as the device).")
      .def("synchronize", &Device::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Blocks until all work on the device has completed.")
      .def(
          "malloc",
          [](Device& d, long long bytes, const Stream* stream) {
            return d.allocator().allocate(python::bytes_arg(bytes, "malloc"), stream ? stream->id() : 0);
          },
          py::arg("nbytes"), py::arg("stream") = py::none(),
          "An address from the caching allocator (PyTorch's rules); raises gpemu.OutOfMemoryError with "
          "PyTorch's message when the card's memory is exhausted.")
      .def(
          "free", [](Device& d, std::uint64_t ptr) { d.allocator().free(ptr); }, py::arg("ptr"),
          "Returns a block to the allocator's cache.")
      .def(
          "empty_cache", [](Device& d) { d.allocator().empty_cache(); },
          "Releases cached segments that hold no live block.")
      .def("memory_allocated", [](const Device& d) { return d.allocator().stats().allocated_bytes; })
      .def("memory_reserved", [](const Device& d) { return d.allocator().stats().reserved_bytes; })
      .def("max_memory_allocated", [](const Device& d) { return d.allocator().stats().peak_allocated_bytes; })
      .def("max_memory_reserved", [](const Device& d) { return d.allocator().stats().peak_reserved_bytes; })
      .def("reset_peak_memory_stats", [](Device& d) { d.allocator().reset_peak_stats(); })
      .def(
          "memory_stats", [](const Device& d) { return python::memory_stats(d.allocator().stats()); },
          "The allocator's counters under torch.cuda.memory_stats()'s names.")
      .def_property_readonly("pcie",
                             [](const Device& d) {
                               const PcieModel& p = d.pcie();
                               py::dict out;
                               out["generation"] = p.generation;
                               out["lanes"] = p.lanes;
                               out["pinned_gbs"] = p.pinned_gbs;
                               out["pageable_gbs"] = p.pageable_gbs;
                               out["pinned_latency_s"] = to_seconds(p.pinned_latency);
                               out["pageable_latency_s"] = to_seconds(p.pageable_latency);
                               return out;
                             })
      .def_property_readonly("capacity", [](const Device& d) { return d.allocator().capacity(); })
      .def_property_readonly("context_bytes", &Device::context_reserve_bytes);

  py::class_<Emulator>(m, "Emulator",
                       "Emulated GPUs on one timeline under a clock: 'real' (wall time; operations take their "
                       "emulated time) or 'virtual' (time jumps; drive it from one Python thread).")
      .def(py::init<const std::string&, bool>(), py::arg("clock") = "virtual", py::arg("trace") = false)
      .def("device", &Emulator::add_device, py::arg("gpu") = "v100", py::return_value_policy::reference_internal,
           "A new emulated GPU of the catalogued model `gpu` on this timeline.")
      .def_property_readonly("clock", [](Emulator& e) { return std::string(e.clock().name()); })
      .def(
          "now", [](Emulator& e) { return to_seconds(e.clock().now()); }, "The clock's time in seconds.")
      .def(
          "sleep", [](Emulator& e, double s) { e.clock().sleep_for(python::seconds_arg(s, "sleep")); },
          py::arg("seconds"), py::call_guard<py::gil_scoped_release>(),
          "The host spends `seconds` (the real clock sleeps; the virtual clock jumps).")
      .def(
          "synchronize", [](Emulator& e) { return to_seconds(e.timeline().wait_all()); },
          py::call_guard<py::gil_scoped_release>(),
          "Blocks until every device's work has completed; returns the latest end (s).")
      .def("write_trace", &Emulator::write_trace, py::arg("path"),
           "Writes the Chrome/Perfetto trace of the work issued (Emulator(trace=True)).");
}

}  // namespace gpemu::python
