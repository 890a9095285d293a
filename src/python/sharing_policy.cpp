// Sharing policies written in Python (docs/sharing.md): gpemu.SharingPolicy,
// the C++ interface (sharing_policy.h) a Python subclass overrides, the
// types its methods take and return, and its registration.
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "catalog/gpu_json.h"
#include "gpemu/sharing_policy.h"
#include "python/module.h"

namespace gpemu::python {
namespace {

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

}  // namespace

void bind_sharing_policies(py::module_& m) {
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
}

}  // namespace gpemu::python
