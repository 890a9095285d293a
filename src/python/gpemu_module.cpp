// The Python module `gpemu` (pybind11): emulated GPUs for a researcher's own
// Python code (a loader, a cache, a scheduler prototype) without PyTorch:
// the catalog, devices with streams, events and the caching allocator on one
// emulated timeline, gpemu predict, the training job and several jobs on one
// GPU. A front end like the CLI: every figure comes from the library; this
// file only converts arguments and results. docs/python.md.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "common/atomic_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catalog/gpu_json.h"
#include "cluster/run_json.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cluster.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/report.h"
#include "gpemu/share.h"
#include "gpemu/sharing_policy.h"
#include "gpemu/timeline.h"
#include "gpemu/train.h"
#include "gpemu/zoo.h"
#include "python/module.h"
#include "share/serve.h"
#include "share/share_json.h"
#include "train/summary_json.h"
#include "workload/prediction_json.h"

namespace py = pybind11;

namespace gpemu::python {

py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

nlohmann::json from_python(const py::object& o, const char* what) {
  const std::string text = py::module_::import("json").attr("dumps")(o).cast<std::string>();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not representable as JSON ({})", what, e.what()));
  }
}

Duration seconds_arg(double s, const char* what) {
  if (!(s >= 0) || s > 1e9) throw InputError(fmt::format("{} {}: must be seconds from 0 to 1e9", what, s));
  return from_seconds(s);
}

ShareOptions share_options(const std::string& policy, double timeslice_ms, double switch_us) {
  ShareOptions o;
  o.policy = parse_share_policy(policy);
  if (!(timeslice_ms > 0 && timeslice_ms <= 1e6))
    throw InputError(fmt::format("timeslice_ms {}: must be a positive number of milliseconds", timeslice_ms));
  if (!(switch_us >= 0 && switch_us <= 1e9))
    throw InputError(fmt::format("switch_us {}: must be microseconds, 0 or more", switch_us));
  o.timeslice = from_seconds(timeslice_ms / 1e3);
  o.switch_cost = from_seconds(switch_us / 1e6);
  return o;
}

std::string policy_name(const py::object& policy, const char* who) {
  const py::object name = py::hasattr(policy, "name") ? policy.attr("name")() : py::none();
  if (!py::isinstance<py::str>(name) || name.cast<std::string>().empty())
    throw InputError(fmt::format("{}: {}.name() returned {}; expected its name, a non-empty str", who,
                                 py::str(policy.get_type().attr("__name__")).cast<std::string>(),
                                 py::repr(name).cast<std::string>()));
  return name.cast<std::string>();
}

void throw_raised(std::string_view kind, std::string_view name, const char* method, py::error_already_set& e) {
  const std::string what = e.what();
  const std::string text =
      fmt::format("{} '{}': its {} raised {}", kind, name, method, what.substr(0, what.find('\n')));
  if (e.matches(PyExc_ValueError)) throw InputError(text);
  throw Error(text);
}

Error returned_error(std::string_view kind, std::string_view name, const char* method, const py::object& r,
                     const char* expected) {
  return Error(fmt::format("{} '{}': its {} returned {}; expected {}", kind, name, method,
                           py::repr(r).cast<std::string>(), expected));
}

namespace {

// One request to `gpemu serve` without arguments, the GIL released.
nlohmann::json serve_request(ServeClient& c, const char* op) {
  py::gil_scoped_release release;
  return c.request({{"op", op}});
}

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

// The program of `torch` (1 or 2: TorchPreset) for `model`; zero_grad, when
// given ("zero" or "none"), overrides the preset's. A fixed-step job (no
// model) takes no preset.
ModelSpec model_spec(const std::string& model, const std::string& precision, const std::string& optimizer,
                     const std::string& zero_grad, std::int64_t seq_len, const std::string& torch,
                     ProgramVariantNames variant = torch_default_names()) {
  ModelSpec m;
  m.name = model;
  m.precision = zoo::parse_precision(precision);
  m.optimizer = zoo::parse_optimizer(optimizer);
  if (!model.empty()) apply_torch_preset(m, torch_preset(torch, "torch"), std::move(variant), /*keywords=*/true);
  apply_zero_grad(m, zero_grad, /*keywords=*/true);
  if (seq_len < 0) throw InputError(fmt::format("seq_len {}: must be at least 1 (0: the model's default)", seq_len));
  m.seq_len = seq_len;
  return m;
}

py::object predict(const std::string& gpu, const std::string& model, std::optional<int> batch_size,
                   const std::string& precision, const std::string& optimizer, const std::string& zero_grad,
                   std::int64_t seq_len, const std::string& host_memory, bool max_batch,
                   std::optional<std::filesystem::path> profiles, const std::string& task,
                   const std::string& matmul_precision, const std::string& cudnn_tf32, const std::string& amp,
                   const std::string& memory_format, const std::string& attention, const std::string& fused,
                   int micro_steps, const std::string& torch) {
  const ProgramVariantNames variant{matmul_precision, amp, memory_format, attention, fused,
                                    cudnn_tf32,       "",  micro_steps};
  PredictRequest r;
  r.gpu = &find_gpu(gpu);
  r.model = model_spec(task_model(model, task), precision, optimizer, zero_grad, seq_len, torch, variant);
  if (host_memory == "pinned")
    r.host = HostMemoryKind::Pinned;
  else if (host_memory == "pageable")
    r.host = HostMemoryKind::Pageable;
  else
    throw InputError(fmt::format("host_memory '{}': expected 'pinned' or 'pageable'", host_memory));
  r.batch_size = batch_size;
  r.max_batch = max_batch;
  r.profiles = std::move(profiles);
  Prediction p;
  {
    py::gil_scoped_release unlocked;
    p = gpemu::predict(r);
  }
  nlohmann::json j = prediction_json(p);
  if (!p.notes.empty()) j["notes"] = p.notes;
  return to_python(j);
}

// One training job on in-memory batches (JobSpec in, summary out).
py::object train(const std::string& model, const std::string& gpu, int batch_size, std::int64_t iterations, int gpus,
                 int nodes, const std::string& network, const std::string& precision, const std::string& optimizer,
                 const std::string& zero_grad, std::int64_t seq_len, std::optional<double> step_time_s,
                 const std::string& sync, bool pin_memory, const std::string& clock,
                 std::optional<std::filesystem::path> profiles, std::optional<std::filesystem::path> trace,
                 std::optional<std::filesystem::path> report, const std::string& torch) {
  if (iterations < 1) throw InputError(fmt::format("iterations {}: must be at least 1", iterations));
  if (batch_size < 1) throw InputError(fmt::format("batch_size {}: must be at least 1", batch_size));
  if (step_time_s && !(*step_time_s >= 0 && *step_time_s <= 1e6))
    throw InputError(fmt::format("step_time_s {}: must be seconds from 0 to 1e6", *step_time_s));
  JobSpec spec = step_time_s ? fixed_step_job("job", *step_time_s, batch_size, iterations).job
                             : model_job("job", model, batch_size, iterations).job;
  spec.compute.model = model_spec(step_time_s ? "" : model, precision, optimizer, zero_grad, seq_len, torch);
  spec.compute.sync = parse_sync_mode(sync);
  spec.data.pin_memory = pin_memory;
  spec.cluster.gpu = &find_gpu(gpu);
  spec.cluster.gpus = gpus;
  spec.cluster.nodes = nodes;
  if (nodes > 1) spec.cluster.network = parse_network(network);
  spec.trace = trace.has_value();
  const std::unique_ptr<CostModel> costs = job_cost_model(spec.compute.model, profiles);
  const std::unique_ptr<Clock> c = make_clock(parse_clock_kind(clock));
  nlohmann::json out;
  {
    py::gil_scoped_release unlocked;
    Job job(*c, *costs, spec);
    const RunRecord rec = job.run();
    if (trace) {
      train::add_stall_spans(rec, job.timeline());
      write_chrome_trace_file(job.timeline().trace_records(), job.timeline().host_spans(), job.trace_devices(), *trace);
    }
    if (report) write_html_report_file(train::make_run_report(rec), *report);
    out = train::summary_json(rec);
  }
  if (trace) out["trace"] = trace->string();
  if (report) out["report"] = report->string();
  return to_python(out);
}

// Several jobs on one emulated GPU: the jobs file's content as Python values.
py::object share(const py::object& jobs, const std::string& gpu, const std::string& policy, const std::string& clock,
                 double timeslice_ms, double switch_us, std::optional<std::filesystem::path> profiles) {
  nlohmann::json file = {{"jobs", from_python(jobs, "jobs")}};
  if (!gpu.empty()) file["gpu"] = gpu;
  const JobsFile parsed = parse_jobs(file.dump(), "jobs");
  ShareSpec spec;
  spec.gpu = &find_gpu(parsed.gpu.empty() ? "v100" : parsed.gpu);
  spec.options = share_options(policy, timeslice_ms, switch_us);
  spec.jobs = parsed.jobs;
  give_cost_models(spec, profiles);
  const std::unique_ptr<Clock> c = make_clock(parse_clock_kind(clock));
  nlohmann::json out;
  {
    py::gil_scoped_release unlocked;
    out = share_json(run_shared(*c, *spec.jobs.front().costs, spec));
  }
  return to_python(out);
}

// ---- a sharing policy written in Python (docs/sharing.md)

// gpemu.SharingPolicy: the C++ interface (sharing_policy.h) whose methods a
// Python subclass overrides, in Python types (the catalog's dict for the
// card; a kernel's time in integer nanoseconds, as the timeline's).
// The engine asks it from its own threads with the GIL released: each call
// takes the GIL; what an override raises becomes an Error naming the policy
// and the method (an InputError when it is a ValueError). name() is read
// once, when the policy is registered, so that the registry (which asks
// names under its lock, from any thread) never waits for the GIL.
class PySharingPolicy final : public SharingPolicy {
 public:
  std::string_view name() const override { return name_; }
  void check(const GpuSpec& gpu, const ShareOptions& options) const override {
    call("check", 0, [&](const py::function& f) {
      f(to_python(gpu_json(gpu)), options);
      return 0;
    });
  }
  bool exclusive_steps() const override { return flag("exclusive_steps", false); }
  bool slices() const override { return flag("slices", false); }
  std::optional<LinkShare> compute_share(const ShareOptions& options) const override {
    auto convert = [this](const py::object& r) -> std::optional<LinkShare> {
      if (r.is_none()) return std::nullopt;
      if (!py::isinstance<LinkShare>(r)) throw returned("compute_share", r, "a gpemu.LinkShare or None");
      const auto share = r.cast<LinkShare>();
      if (!(share.contended_efficiency > 0 && share.contended_efficiency <= 1))
        throw returned("compute_share", r, "a contended_efficiency in (0, 1]");
      return share;
    };
    return call("compute_share", std::optional<LinkShare>(),
                [&](const py::function& f) { return convert(f(options)); });
  }
  Duration kernel_on_slice(Duration alone, KernelDemand demand, const MigProfile& slice) const override {
    auto convert = [this](const py::object& r) {
      // Nanoseconds, as the timeline's: a copy of a C++ policy rounds as it does.
      const char* expected = "nanoseconds (a number from 0 to 9.2e18)";
      if (!py::isinstance<py::float_>(r) && !py::isinstance<py::int_>(r))
        throw returned("kernel_on_slice", r, expected);
      const double ns = r.cast<double>();
      if (!(ns >= 0 && ns < 9.2e18)) throw returned("kernel_on_slice", r, expected);
      return static_cast<Duration>(std::llround(ns));
    };
    return call("kernel_on_slice", alone, [&](const py::function& f) { return convert(f(alone, demand, slice)); });
  }

  // Adds `policy` (a gpemu.SharingPolicy) to the registry under its name().
  static void add(const py::object& policy);

 private:
  bool flag(const char* method, bool fallback) const {
    return call(method, fallback, [&](const py::function& f) {
      const py::object r = f();
      if (!py::isinstance<py::bool_>(r)) throw returned(method, r, "True or False");
      return r.cast<bool>();
    });
  }
  template <class R, class Invoke>
  R call(const char* method, R fallback, Invoke invoke) const {
    return call_override(static_cast<const SharingPolicy*>(this), "sharing policy", name_, method, fallback, invoke);
  }
  Error returned(const char* method, const py::object& r, const char* expected) const {
    return returned_error("sharing policy", name_, method, r, expected);
  }

  std::string name_;  // set once, by add()
};

void PySharingPolicy::add(const py::object& policy) {
  auto* p =
      py::isinstance<SharingPolicy>(policy) ? dynamic_cast<PySharingPolicy*>(policy.cast<SharingPolicy*>()) : nullptr;
  if (!p)
    throw InputError(
        fmt::format("register_sharing_policy: {} is not a gpemu.SharingPolicy; give an instance of a "
                    "subclass of it",
                    py::repr(policy).cast<std::string>()));
  if (!p->name_.empty())
    throw InputError(fmt::format("register_sharing_policy: this policy is registered already, as '{}'", p->name_));
  p->name_ = policy_name(policy, "register_sharing_policy");
  try {
    // The registry keeps policies for the process's life: so does the Python
    // object (its reference is never given back), whose methods the C++ one calls.
    register_sharing_policy(std::shared_ptr<const SharingPolicy>(p, [](const SharingPolicy*) {}));
  } catch (...) {
    p->name_.clear();
    throw;
  }
  policy.inc_ref();
}

// ---- a cluster with a policy written in Python (docs/cluster.md)

// A policy object's schedule(cluster_state), called each round: the state is a
// dict of the round and its active jobs; it returns the job ids to run,
// highest priority first, each an id or (id, "cpu") to run it on its CPU
// configuration; ids left out wait. What it raises ends the run
// (PolicyFailure), its exception kept as the cause.
class PythonPolicy final : public cluster::Policy {
 public:
  explicit PythonPolicy(py::object policy)
      : policy_(std::move(policy)), name_(py::str(policy_.get_type().attr("__name__")).cast<std::string>()) {}
  std::string name() const override { return name_; }
  py::object cause;

  void order(const cluster::ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    py::list list;
    std::map<std::string, std::size_t> by_id;
    for (std::size_t i : order) {
      const cluster::JobState& j = jobs[i];
      py::dict d;
      d["id"] = j.job->id, d["user"] = j.job->user, d["gpus"] = j.job->gpus, d["arrival_s"] = j.arrival_s;
      d["attained_gpu_s"] = j.attained_gpu_s, d["run_s"] = j.run_s, d["remaining_s"] = j.remaining_s;
      d["last_run_end_s"] = j.last_run_end_s, d["running"] = j.running, d["on_cpu"] = j.ran_on_cpu;
      d["cpu_config_cpus"] = j.job->cpu_config_cpus, d["remaining_cpu_s"] = j.remaining_cpu_s;
      list.append(d);
      by_id.emplace(j.job->id, i);
    }
    py::dict state;
    state["now_s"] = view.now_s, state["round_s"] = view.round_s, state["gpus"] = view.total_gpus;
    state["cpus"] = view.total_cpus, state["jobs"] = list;
    const std::string at = fmt::format("{}.schedule at {} s", name_, view.now_s);
    py::object result;
    try {
      result = policy_.attr("schedule")(state);
    } catch (py::error_already_set& e) {
      cause = e.value();
      const std::string what = e.what();
      throw cluster::PolicyFailure(fmt::format("{} raised {}", at, what.substr(0, what.find('\n'))));
    }
    if (!py::isinstance<py::iterable>(result) || py::isinstance<py::str>(result))
      throw cluster::PolicyFailure(
          fmt::format("{} returned {}; expected a list of job ids (cluster_state['jobs'][i]['id']), "
                      "highest priority first",
                      at, py::repr(result).cast<std::string>()));
    order.clear();
    for (const py::handle item : result) {
      py::object id = py::reinterpret_borrow<py::object>(item);
      bool cpu = false;
      if (py::isinstance<py::tuple>(item) && py::len(item) == 2) {
        const auto t = py::reinterpret_borrow<py::tuple>(item);
        id = t[0];
        cpu = py::str(t[1]).cast<std::string>() == "cpu";
      }
      const auto it = py::isinstance<py::str>(id) ? by_id.find(id.cast<std::string>()) : by_id.end();
      if (it == by_id.end())
        throw cluster::PolicyFailure(fmt::format("{} returned {}, not the id of an active job (nor twice the same)", at,
                                                 py::repr(item).cast<std::string>()));
      order.push_back(it->second);
      jobs[it->second].use_cpu = cpu;
      by_id.erase(it);
    }
  }

 private:
  py::object policy_;
  std::string name_;
};

// Reads a cluster (a dict, or a file's path) and a trace (a file's path).
py::object run_cluster(const py::object& cluster_arg, const std::string& trace, const py::object& policy_arg,
                       const std::string& cpu_allocation, double round_s,
                       const std::optional<std::filesystem::path>& json_path,
                       const std::optional<std::filesystem::path>& csv_path, PyObject* error) {
  const cluster::ClusterConfig c = py::isinstance<py::dict>(cluster_arg)
                                       ? cluster::parse_cluster(from_python(cluster_arg, "cluster").dump(), "cluster")
                                       : cluster::read_cluster_file(py::str(cluster_arg).cast<std::string>());
  const cluster::Trace t = cluster::read_trace_file(trace, c);
  std::unique_ptr<cluster::Policy> builtin;
  std::unique_ptr<PythonPolicy> python;
  if (py::isinstance<py::str>(policy_arg)) {
    builtin = cluster::make_policy(policy_arg.cast<std::string>());
  } else if (py::hasattr(policy_arg, "schedule")) {
    python = std::make_unique<PythonPolicy>(policy_arg);
  } else {
    throw InputError(
        fmt::format("policy {}: expected a policy's name ({}) or an object with a "
                    "schedule(cluster_state) method",
                    py::repr(policy_arg).cast<std::string>(), fmt::join(cluster::policy_names(), ", ")));
  }
  cluster::SimOptions o;
  o.round_s = round_s;
  o.cpu = cluster::parse_cpu_allocation(cpu_allocation);
  cluster::JobSpeed speed(c.network);
  const cluster::ClusterRun run =
      cluster::simulate(c, t, builtin ? *builtin : static_cast<cluster::Policy&>(*python), o, speed);
  const nlohmann::json j = cluster::run_json(run);
  if (json_path) write_file_atomically(*json_path, j.dump(2) + "\n", "json");
  if (csv_path) write_file_atomically(*csv_path, cluster::run_csv(run), "csv");
  py::object out = to_python(j);
  if (run.stopped.empty()) return out;
  std::size_t finished = 0;
  for (const auto& r : run.jobs) finished += r.finished();
  std::string written;
  if (json_path) written += " " + json_path->string();
  if (csv_path) written += (written.empty() ? " " : " and ") + csv_path->string();
  py::object e = py::reinterpret_borrow<py::object>(error)(
      fmt::format("{}; the run stopped there: {} finished jobs' records {}{}", run.stopped, finished,
                  written.empty() ? "are in this error's .run" : "are written to", written));
  e.attr("run") = out;
  if (python && python->cause) e.attr("__cause__") = python->cause;
  PyErr_SetObject(error, e.ptr());
  throw py::error_already_set();
}

}  // namespace
}  // namespace gpemu::python

PYBIND11_MODULE(gpemu, m) {
  using namespace gpemu;
  using gpemu::python::Emulator;
  m.doc() =
      "Emulated GPUs for Python programs: devices, streams, events and the caching allocator on an emulated "
      "timeline; predict; training jobs; several jobs on one GPU. docs/python.md";
  m.attr("__version__") = "0.1.0";

  // Errors: gpemu.Error (RuntimeError); gpemu.InputError is also a ValueError;
  // gpemu.OutOfMemoryError, as torch.cuda.OutOfMemoryError, a RuntimeError.
  static PyObject* error = PyErr_NewException("gpemu.Error", PyExc_RuntimeError, nullptr);
  static PyObject* input_bases = PyTuple_Pack(2, error, PyExc_ValueError);
  static PyObject* input_error = PyErr_NewException("gpemu.InputError", input_bases, nullptr);
  static PyObject* oom_error = PyErr_NewException("gpemu.OutOfMemoryError", error, nullptr);
  static PyObject* resource_error = PyErr_NewException("gpemu.ResourceError", error, nullptr);
  m.attr("Error") = py::handle(error);
  m.attr("InputError") = py::handle(input_error);
  m.attr("OutOfMemoryError") = py::handle(oom_error);
  m.attr("ResourceError") = py::handle(resource_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(oom_error, e.what());
    } catch (const InputError& e) {
      PyErr_SetString(input_error, e.what());
    } catch (const ResourceError& e) {
      PyErr_SetString(resource_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  });

  // ---- the catalog and the zoo
  m.def(
      "gpus",
      [] {
        py::list l;
        for (const GpuSpec& g : gpu_catalog()) l.append(python::to_python(gpu_json(g)));
        return l;
      },
      "Every catalogued GPU as a dict (oldest first), as `gpemu devices --json`.");
  m.def(
      "gpu", [](const std::string& name) { return python::to_python(gpu_json(find_gpu(name))); }, py::arg("name"),
      "One GPU's specification; names are matched forgivingly ('v100', 'Tesla_V100-PCIE-32GB').");
  m.def("models", &zoo::zoo_models, "The model zoo's models.");
  m.def(
      "data_dir", [] { return zoo::data_dir(); },
      "Where the model zoo and the calibration are read from ($GPEMU_DATA_DIR, else the installed share/gpemu, "
      "else the source tree).");

  // ---- devices on an emulated timeline
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

  // ---- predict, the job, sharing
  m.def("predict", &python::predict, py::arg("gpu"), py::arg("model"), py::arg("batch_size") = py::none(),
        py::kw_only(), py::arg("precision") = "fp32", py::arg("optimizer") = "sgd", py::arg("zero_grad") = "",
        py::arg("seq_len") = 0, py::arg("host_memory") = "pinned", py::arg("max_batch") = false,
        py::arg("profiles") = py::none(), py::arg("task") = "", py::arg("matmul_precision") = "highest",
        py::arg("cudnn_tf32") = "on", py::arg("amp") = "autocast", py::arg("memory_format") = "nchw",
        py::arg("attention") = "", py::arg("fused") = "none", py::arg("micro_steps") = 1, py::arg("torch") = "2",
        "One training step's time and memory: the dict `gpemu predict --json` prints. torch='2' (default): PyTorch "
        "2's program (zero_grad to None, foreach optimizers, MultiheadAttention through SDPA, steps back to back on "
        "the default host); torch='1': PyTorch 1.x's, as GPEmu's profiles were measured.");
  m.def("train", &python::train, py::kw_only(), py::arg("model") = std::string(kDefaultModel), py::arg("gpu") = "v100",
        py::arg("batch_size") = 64, py::arg("iterations") = 100, py::arg("gpus") = 1, py::arg("nodes") = 1,
        py::arg("network") = "100gbe", py::arg("precision") = "fp32", py::arg("optimizer") = "sgd",
        py::arg("zero_grad") = "", py::arg("seq_len") = 0, py::arg("step_time_s") = py::none(),
        py::arg("sync") = "iteration", py::arg("pin_memory") = true, py::arg("clock") = "virtual",
        py::arg("profiles") = py::none(), py::arg("trace") = py::none(), py::arg("report") = py::none(),
        py::arg("torch") = "2",
        "Runs a training job on in-memory batches and returns `gpemu train --json`'s summary (torch: as predict's).");
  // ---- sharing policies written in Python (docs/sharing.md)
  py::enum_<ShareRule>(m, "ShareRule", "How kernels in flight divide the compute engine (docs/sharing.md).")
      .value("MaxMin", ShareRule::MaxMin)
      .value("TimeSlice", ShareRule::TimeSlice)
      .value("Demand", ShareRule::Demand)
      .value("Priority", ShareRule::Priority);
  py::class_<LinkShare>(m, "LinkShare", "A compute share: a rule and, for TimeSlice, the share left while switching.")
      .def(py::init([](ShareRule rule, double contended_efficiency) {
             return LinkShare{rule, contended_efficiency};
           }),
           py::arg("rule") = ShareRule::MaxMin, py::arg("contended_efficiency") = 1.0)
      .def_readwrite("rule", &LinkShare::rule)
      .def_readwrite("contended_efficiency", &LinkShare::contended_efficiency);
  py::class_<ShareOptions>(m, "ShareOptions", "The options a shared GPU runs under (share's arguments).")
      .def_property_readonly("policy", [](const ShareOptions& o) { return std::string(o.policy.name()); })
      .def_property_readonly("timeslice_s", [](const ShareOptions& o) { return to_seconds(o.timeslice); })
      .def_property_readonly("switch_s", [](const ShareOptions& o) { return to_seconds(o.switch_cost); })
      .def_readonly("workspace_margin", &ShareOptions::workspace_margin);
  py::class_<KernelDemand>(m, "KernelDemand", "A kernel's shares of the SMs and memory bandwidth when alone.")
      .def_readonly("sm", &KernelDemand::sm)
      .def_readonly("bw", &KernelDemand::bw);
  py::class_<MigProfile>(m, "MigProfile", "A MIG slice's profile.")
      .def_readonly("name", &MigProfile::name)
      .def_readonly("compute_sevenths", &MigProfile::compute_sevenths)
      .def_readonly("memory_eighths", &MigProfile::memory_eighths)
      .def_readonly("max_instances", &MigProfile::max_instances);
  py::class_<SharingPolicy, python::PySharingPolicy, std::shared_ptr<SharingPolicy>>(
      m, "SharingPolicy",
      "A sharing policy: subclass it, define name() and what differs from the defaults, and register an instance "
      "with register_sharing_policy; share(policy=its name) then uses it. docs/sharing.md")
      .def(py::init<>())
      .def(
          "check", [](const SharingPolicy&, const py::object&, const ShareOptions&) {}, py::arg("gpu"),
          py::arg("options"),
          "Raise (ValueError: an input error) when the card (gpemu.gpu's dict) or options lack something.")
      .def(
          "exclusive_steps", [](const SharingPolicy&) { return false; },
          "True: a job's step has the GPU alone, steps in the order they ask (fifo).")
      .def(
          "compute_share", [](const SharingPolicy&, const ShareOptions&) { return py::none(); }, py::arg("options"),
          "A LinkShare dividing the kernels in flight, or None: each kernel keeps its own cost.")
      .def(
          "slices", [](const SharingPolicy&) { return false; }, "True: each job runs on a MIG slice of its own.")
      .def(
          "kernel_on_slice",
          [](const SharingPolicy&, std::int64_t alone_ns, const KernelDemand&, const MigProfile&) { return alone_ns; },
          py::arg("alone_ns"), py::arg("demand"), py::arg("slice"),
          "A kernel's nanoseconds on its slice (rounded to the nearest), from its nanoseconds on the whole GPU alone.");
  m.def("register_sharing_policy", &python::PySharingPolicy::add, py::arg("policy"),
        "Adds a SharingPolicy for the process's life; InputError when its name is taken.");
  m.def("sharing_policies", &sharing_policy_names, "The registered sharing policies' names, built-in ones first.");
  // ---- sessions, and placement policies written in Python (docs/python.md)
  python::bind_placement_policies(m);
  python::bind_session(m);
  m.def("share", &python::share, py::arg("jobs"), py::kw_only(), py::arg("gpu") = "", py::arg("policy") = "fifo",
        py::arg("clock") = "virtual", py::arg("timeslice_ms") = 2.0, py::arg("switch_us") = 25.0,
        py::arg("profiles") = py::none(),
        "Runs jobs (a list of dicts with a jobs file's keys) on one emulated GPU under a policy; returns "
        "`gpemu share --json`'s result.");

  m.def(
      "cluster",
      [](const py::object& cluster, const std::string& trace, const py::object& policy,
         const std::string& cpu_allocation, double round_s, std::optional<std::filesystem::path> json,
         std::optional<std::filesystem::path> csv) {
        return python::run_cluster(cluster, trace, policy, cpu_allocation, round_s, json, csv, error);
      },
      py::arg("cluster"), py::arg("trace"), py::kw_only(), py::arg("policy") = "las",
      py::arg("cpu_allocation") = "prop", py::arg("round_s") = 300.0, py::arg("json") = py::none(),
      py::arg("csv") = py::none(),
      "Runs a trace (a CSV file) on a cluster (a dict or a JSON file) in virtual time under a policy: a built-in "
      "one's name or an object whose schedule(cluster_state) returns the job ids to run, highest priority first "
      "((id, 'cpu') for a job's CPU configuration); returns `gpemu cluster --json`'s result. A policy that raises "
      "ends the run: gpemu.Error (one line, the policy's exception as its cause, the run so far as .run), the "
      "finished jobs' records written to json / csv first. docs/cluster.md");

  // ---- a process's connection to `gpemu serve` (docs/sharing.md)
  py::class_<ServeClient>(m, "ServeClient",
                          "A connection to `gpemu serve`: this process's own CUDA context, caching allocator "
                          "and stream on one of the server's emulated GPUs, shared with the server's other "
                          "clients under its policy. Times are the server's emulated seconds.")
      .def(py::init(
               [](const std::string& socket, const std::string& name, int gpu, int priority, const std::string& mig) {
                 ClientHello hello;
                 hello.name = name;
                 hello.gpu = gpu;
                 hello.priority = priority;
                 hello.mig = mig;
                 py::gil_scoped_release release;
                 return std::make_unique<ServeClient>(
                     socket.empty() ? default_socket_path() : std::filesystem::path(socket), hello);
               }),
           py::arg("socket") = "", py::kw_only(), py::arg("name") = "python", py::arg("gpu") = 0,
           py::arg("priority") = 0, py::arg("mig") = "",
           "Connects to the server at `socket` (default: gpemu serve's) and attaches to its GPU `gpu`.")
      .def_property_readonly("gpu", [](const ServeClient& c) { return python::to_python(c.hello_reply()["gpu"]); })
      .def_property_readonly("client",
                             [](const ServeClient& c) { return python::to_python(c.hello_reply()["client"]); })
      .def("malloc", &ServeClient::malloc, py::arg("bytes"), py::call_guard<py::gil_scoped_release>(),
           "Allocates device memory from this client's caching allocator; returns the address. "
           "OutOfMemoryError (PyTorch's message) when the shared GPU has no room.")
      .def("free", &ServeClient::free, py::arg("ptr"), py::call_guard<py::gil_scoped_release>())
      .def(
          "kernel",
          [](ServeClient& c, double seconds, float sm, float bw) {
            c.kernel(python::seconds_arg(seconds, "kernel"), KernelDemand{sm, bw});
          },
          py::arg("seconds"), py::kw_only(), py::arg("sm") = 1.0f, py::arg("bw") = 1.0f,
          py::call_guard<py::gil_scoped_release>(),
          "Launches a kernel of `seconds` (alone on the GPU; sm and bw: the shares of the SMs and memory "
          "bandwidth it keeps busy) and returns at once.")
      .def(
          "sync", [](ServeClient& c) { return to_seconds(c.sync()); }, py::call_guard<py::gil_scoped_release>(),
          "Blocks until this client's work is done; returns when it ended (s).")
      .def(
          "batch",
          [](ServeClient& c, double seconds, float sm, float bw) {
            return to_seconds(c.batch(python::seconds_arg(seconds, "batch"), KernelDemand{sm, bw}));
          },
          py::arg("seconds"), py::kw_only(), py::arg("sm") = 1.0f, py::arg("bw") = 1.0f,
          py::call_guard<py::gil_scoped_release>(), "A kernel and a sync: one step of a GPEmu-style job.")
      .def(
          "memory", [](ServeClient& c) { return python::to_python(python::serve_request(c, "memory")); },
          "This client's allocator figures (the server's reply to `memory`).")
      .def(
          "smi", [](ServeClient& c) { return python::to_python(python::serve_request(c, "smi")["gpus"]); },
          "What `gpemu smi --json` prints: every GPU of the server with its processes.")
      .def(
          "request",
          [](ServeClient& c, const py::object& message) {
            const nlohmann::json m = python::from_python(message, "request");
            nlohmann::json reply;
            {
              py::gil_scoped_release release;
              reply = c.call(m);
            }
            return python::to_python(reply);
          },
          py::arg("message"),
          "Any request of the protocol (docs/sharing.md, 'Wire protocol'), e.g. {'op': 'stream'} or "
          "{'op': 'record', 'event': 1, 'stream': 1}; returns the reply. A refusal raises gpemu.InputError, "
          "gpemu.OutOfMemoryError or gpemu.Error.");
}
