// gpemu.cluster: a trace on a cluster in virtual time under a built-in
// policy or one written in Python (docs/cluster.md).
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Python.h>
#include <fmt/format.h>

#include "cluster/run_json.h"
#include "common/atomic_file.h"
#include "gpemu/cluster.h"
#include "python/module.h"

namespace gpemu::python {
namespace {

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

void bind_cluster(py::module_& m, PyObject* error) {
  m.def(
      "cluster",
      [error](const py::object& cluster, const std::string& trace, const py::object& policy,
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
}

}  // namespace gpemu::python
