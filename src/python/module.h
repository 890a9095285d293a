// What the Python module's files (src/python/) share: Python values of the
// library's, the arguments every front end function checks alike, and the
// call of a method a Python subclass of a policy overrides.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>
// Every file of the module converts with the same type casters (pybind11:
// a caster one file sees and another does not breaks the one-definition
// rule, and a value it misses fails only when Python receives it).
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <nlohmann/json.hpp>

#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/time.h"

namespace gpemu::python {

namespace py = pybind11;

// Python's value of a JSON document: the same keys as the CLI's --json.
py::object to_python(const nlohmann::json& j);
// A Python value as JSON; InputError naming `what` when it is not representable.
nlohmann::json from_python(const py::object& o, const char* what);
// A duration in seconds from Python: finite and not negative (InputError naming `what`).
Duration seconds_arg(double s, const char* what);
// How jobs share a GPU, from share()'s arguments (InputError naming the bad one).
ShareOptions share_options(const std::string& policy, double timeslice_ms, double switch_us);

// The name a Python policy object's name() returns: a non-empty str, else
// InputError naming `who` (register_sharing_policy, ...) and what it returned.
std::string policy_name(const py::object& policy, const char* who);
// Throws the Error for what a Python policy's method raised: "<kind> '<name>':
// its <method> raised <type>: <message>" (an InputError for a ValueError).
[[noreturn]] void throw_raised(std::string_view kind, std::string_view name, const char* method,
                               py::error_already_set& e);
// The Error for what a Python policy's method returned that it may not.
Error returned_error(std::string_view kind, std::string_view name, const char* method, const py::object& r,
                     const char* expected);

// Calls a Python subclass's override of `method` of the C++ policy `self`
// under the GIL (taken here: the engine asks from its own threads, the GIL
// released): invoke(the override), its arguments made and its result read
// under the GIL too; `fallback` when the subclass has none. What it raises
// is thrown as throw_raised's.
template <class Base, class R, class Invoke>
R call_override(const Base* self, std::string_view kind, std::string_view name, const char* method, R fallback,
                Invoke invoke) {
  py::gil_scoped_acquire gil;
  try {
    const py::function f = py::get_override(self, method);
    if (!f) return fallback;
    return invoke(f);
  } catch (py::error_already_set& e) {
    throw_raised(kind, name, method, e);
  }
}

// Each concept's bindings, added to the module by its init
// (gpemu_module.cpp), in this order: the Emulator and its devices
// (devices.cpp); predict, train and share (jobs.cpp); sharing policies
// written in Python (sharing_policy.cpp); placement policies written in
// Python (placement_policy.cpp); the Python Session (session.cpp); the
// cluster (cluster.cpp: `error` is gpemu.Error, which a policy's failure
// raises); the client of `gpemu serve` (serve_client.cpp).
void bind_devices(py::module_& m);
void bind_jobs(py::module_& m);
void bind_sharing_policies(py::module_& m);
void bind_placement_policies(py::module_& m);
void bind_session(py::module_& m);
void bind_cluster(py::module_& m, PyObject* error);
void bind_serve_client(py::module_& m);

}  // namespace gpemu::python
