// What the Python module's files share (module.h): Python values of JSON
// documents, the arguments every front end function checks alike, and the
// errors of a policy written in Python.
#include "python/module.h"

#include <Python.h>

#include <fmt/format.h>

#include "gpemu/sharing_policy.h"

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

}  // namespace gpemu::python
