// Placement policies written in Python: the trampoline (placement_policy.h)
// and the module's gpemu.PlacementPolicy, PlacementRequest, GpuLoad,
// register_placement_policy and placement_policies. docs/python.md.
#include "python/placement_policy.h"

#include <optional>

#include <fmt/format.h>
#include <pybind11/stl.h>

namespace gpemu::python {
namespace {

constexpr std::string_view kKind = "placement policy";

py::list gpu_list(std::span<const GpuLoad> gpus) {
  py::list out;
  for (const GpuLoad& g : gpus) out.append(g);
  return out;
}

// A GPU index an override returned: an int (not a bool) from `lo` to gpus - 1.
std::optional<int> gpu_index(const py::handle& r, int lo, std::size_t gpus) {
  if (!py::isinstance<py::int_>(r) || py::isinstance<py::bool_>(r)) return std::nullopt;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(r.ptr(), &overflow);
  if (overflow != 0 || v < lo || v >= static_cast<long long>(gpus)) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

int PyPlacementPolicy::place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const {
  constexpr int kNoOverride = -2;
  const int g = call_override(
      static_cast<const PlacementPolicy*>(this), kKind, name_, "place", kNoOverride, [&](const py::function& f) {
        const py::object r = f(job, gpu_list(gpus));
        const std::optional<int> index = gpu_index(r, -1, gpus.size());
        if (!index)
          throw returned_error(
              kKind, name_, "place", r,
              fmt::format("a GPU index from 0 to {}, or -1 to keep the job queued", gpus.size() - 1).c_str());
        return *index;
      });
  if (g == kNoOverride)
    throw Error(fmt::format("placement policy '{}' defines neither place(job, gpus) nor place_gpus(job, gpus)", name_));
  return g;
}

std::vector<int> PyPlacementPolicy::place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const {
  using Gpus = std::optional<std::vector<int>>;
  const Gpus chosen = call_override(
      static_cast<const PlacementPolicy*>(this), kKind, name_, "place_gpus", Gpus(), [&](const py::function& f) {
        const py::object r = f(job, gpu_list(gpus));
        const std::string expected =
            fmt::format("a list of GPU indices from 0 to {}, empty to keep the job queued", gpus.size() - 1);
        if (!py::isinstance<py::sequence>(r) || py::isinstance<py::str>(r))
          throw returned_error(kKind, name_, "place_gpus", r, expected.c_str());
        std::vector<int> out;
        for (const py::handle item : r) {
          const std::optional<int> index = gpu_index(item, 0, gpus.size());
          if (!index) throw returned_error(kKind, name_, "place_gpus", r, expected.c_str());
          out.push_back(*index);
        }
        return Gpus(std::move(out));
      });
  return chosen ? *chosen : PlacementPolicy::place_gpus(job, gpus);
}

std::shared_ptr<const PlacementPolicy> PyPlacementPolicy::adopt(const py::object& policy, const char* who) {
  auto* p = py::isinstance<PlacementPolicy>(policy) ? dynamic_cast<PyPlacementPolicy*>(policy.cast<PlacementPolicy*>())
                                                    : nullptr;
  if (!p)
    throw InputError(fmt::format("{}: {} is not a gpemu.PlacementPolicy; give an instance of a subclass of it", who,
                                 py::repr(policy).cast<std::string>()));
  if (p->name_.empty()) p->name_ = policy_name(policy, who);
  // The Python object owns the policy: whoever adopts it keeps the object.
  return std::shared_ptr<const PlacementPolicy>(p, [](const PlacementPolicy*) {});
}

void PyPlacementPolicy::add(const py::object& policy) {
  const std::shared_ptr<const PlacementPolicy> p = adopt(policy, "register_placement_policy");
  auto* mine = dynamic_cast<PyPlacementPolicy*>(policy.cast<PlacementPolicy*>());
  if (mine->registered_)
    throw InputError(fmt::format("register_placement_policy: this policy is registered already, as '{}'", p->name()));
  register_placement_policy(p);
  // The registry keeps policies for the process's life: so does the Python
  // object (its reference is never given back), whose methods it calls.
  mine->registered_ = true;
  policy.inc_ref();
}

void bind_placement_policies(py::module_& m) {
  py::class_<GpuLoad>(m, "GpuLoad", "One GPU of a session, as a placement policy sees it (read-only).")
      .def_readonly("index", &GpuLoad::index, "Its index in the session: node * gpus_per_node + local.")
      .def_readonly("node", &GpuLoad::node)
      .def_readonly("jobs", &GpuLoad::jobs, "Jobs placed on it now (running or paused; a preempted job is off it).")
      .def("__repr__", [](const GpuLoad& g) {
        return fmt::format("GpuLoad(index={}, node={}, jobs={})", g.index, g.node, g.jobs);
      });
  py::class_<PlacementRequest>(m, "PlacementRequest", "A queued job, as a placement policy sees it (read-only).")
      .def_readonly("job", &PlacementRequest::job, "Its id (the order jobs were added in, from 0).")
      .def_readonly("gpu", &PlacementRequest::gpu, "The GPU it names (its first, with several); -1: any.")
      .def_property_readonly(
          "queued_s", [](const PlacementRequest& r) { return to_seconds(r.queued); }, "When it was queued (s).")
      .def_readonly("gpus", &PlacementRequest::gpus, "GPUs it needs, all of one node.")
      .def_readonly("want", &PlacementRequest::want,
                    "The GPUs it must have, rank order (a preempted job of several GPUs); empty: any.")
      .def_readonly("nodes", &PlacementRequest::nodes)
      .def("__repr__", [](const PlacementRequest& r) {
        return fmt::format("PlacementRequest(job={}, gpu={}, queued_s={}, gpus={})", r.job, r.gpu, to_seconds(r.queued),
                           r.gpus);
      });
  py::class_<PlacementPolicy, PyPlacementPolicy, std::shared_ptr<PlacementPolicy>>(
      m, "PlacementPolicy",
      "A placement policy: which GPUs a queued job starts on, and when. Subclass it, define name() and "
      "place(job, gpus) (and, for jobs of several GPUs, place_gpus), and give an instance to Session(placement=...) "
      "or register it with register_placement_policy. The session asks whenever the queue or the GPUs change, for "
      "each queued job in queue order. docs/python.md")
      .def(py::init<>())
      .def(
          "place",
          [](const PlacementPolicy& self, const PlacementRequest&, const py::object&) -> int {
            throw Error(fmt::format("placement policy '{}': define place(job, gpus) in its class", self.name()));
          },
          py::arg("job"), py::arg("gpus"),
          "The GPU (an index) to start a job of one GPU on now, or -1 to keep it queued; `gpus` is a list of "
          "GpuLoad, by index.")
      .def(
          "place_gpus",
          [](const PlacementPolicy& self, const PlacementRequest& job, const std::vector<GpuLoad>& gpus) {
            return self.PlacementPolicy::place_gpus(job, gpus);
          },
          py::arg("job"), py::arg("gpus"),
          "The job.gpus GPUs, all of one node, to start a job on now (rank order), or [] to keep it queued. "
          "Default: [place(job, gpus)] for one GPU; for several, the lowest free ones of the lowest node that has "
          "enough (the GPUs the job names or must have when it does).");
  m.def("register_placement_policy", &PyPlacementPolicy::add, py::arg("policy"),
        "Adds a PlacementPolicy for the process's life, by its name(); InputError when the name is taken.");
  m.def("placement_policies", &placement_policy_names, "The placement policies' names, built-in ones first.");
}

}  // namespace gpemu::python
