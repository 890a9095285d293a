// gpemu.Session: the C++ Session (session.h) for a researcher's scheduler
// experiment in Python: GPUs of nodes under a sharing policy, jobs added as
// gpemu.share's (a dict of a jobs file's keys) with the GPUs they ask for,
// a placement policy by name or written in Python, control at times and at
// jobs' ends, and each job's outcome as Python values. docs/python.md.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/session.h"
#include "gpemu/share.h"
#include "gpemu/spec_error.h"
#include "python/module.h"
#include "python/placement_policy.h"
#include "share/job_entry.h"
#include "share/json_fields.h"
#include "share/results.h"
#include "share/share_json.h"

namespace gpemu::python {
namespace {

using share_detail::bad_field;
using share_detail::integer_field;
using share_detail::number_field;

constexpr const char* kSessionKeys =
    "gpu, gpus, after (an earlier job's id or name), checkpoint_save_s, checkpoint_restore_s";

// What the session knows of a job at its end, in seconds.
nlohmann::json outcome_json(const JobOutcome& o) {
  nlohmann::json pauses = nlohmann::json::array();
  for (const JobPause& p : o.pauses)
    pauses.push_back({{"from_s", to_seconds(p.from)}, {"to_s", to_seconds(p.to)}, {"preempted", p.preempted}});
  return {{"id", o.id},
          {"name", o.name},
          {"state", std::string(to_string(o.state))},
          {"gpu", o.gpu},
          {"gpus", o.gpus},
          {"arrival_s", to_seconds(o.arrival)},
          {"start_s", to_seconds(o.start)},
          {"end_s", to_seconds(o.end)},
          {"jct_s", to_seconds(o.jct())},
          {"pauses", std::move(pauses)},
          {"error", o.error.empty() ? nlohmann::json() : nlohmann::json(o.error)}};
}

class PySession {
 public:
  PySession(const std::string& gpu, int nodes, int gpus_per_node, const std::string& policy, double timeslice_ms,
            double switch_us, const py::object& placement, const std::string& clock, bool exclusive, int cpu_cores,
            std::optional<std::filesystem::path> profiles)
      : profiles_(std::move(profiles)),
        clock_(make_clock(parse_clock_kind(clock))),
        costs_(make_cost_model(std::nullopt)) {
    SessionSpec spec;
    spec.gpu = &find_gpu(gpu);
    spec.nodes = nodes;
    spec.gpus_per_node = gpus_per_node;
    spec.share = share_options(policy, timeslice_ms, switch_us);
    spec.exclusive = exclusive;
    spec.cpu_cores_per_node = cpu_cores;
    if (py::isinstance<py::str>(placement)) {
      spec.placement = placement_policy(placement.cast<std::string>());
    } else {
      spec.placement = PyPlacementPolicy::adopt(placement, "Session: placement");
      placement_ = placement;
    }
    // What a policy written in Python raises ends the run at once: under the
    // virtual clock every job still waiting is then woken; under the real
    // clock one waiting for that job's end would wait for ever.
    if (dynamic_cast<const PyPlacementPolicy*>(spec.placement.get()) && !clock_->is_virtual())
      throw InputError(fmt::format("Session: placement '{}' is written in Python: it runs under clock='virtual' only",
                                   spec.placement->name()));
    session_ = std::make_unique<Session>(*clock_, *costs_, std::move(spec));
  }

  // A job as gpemu.share takes it (a jobs file's keys) with the session's own
  // keys; its id.
  JobId add_job(const py::object& job, const py::kwargs& keys) {
    if (ran_) throw Error("Session.add_job: the session has run; add every job before run()");
    py::dict merged;
    if (!job.is_none()) {
      if (!py::isinstance<py::dict>(job))
        throw InputError(
            fmt::format("Session.add_job: {}: expected a dict of a job's keys (as gpemu.share's jobs), "
                        "or the keys as keywords",
                        py::repr(job).cast<std::string>()));
      merged = py::dict(job);
    }
    for (const auto& [key, value] : keys) merged[key] = value;
    nlohmann::json entry = from_python(merged, "Session.add_job");
    const auto id = static_cast<JobId>(specs_.size());
    const std::string who = fmt::format("Session.add_job: job {}", id);
    if (!entry.contains("name")) entry["name"] = fmt::format("job{}", id + 1);
    SessionJob extra;
    int gpus = 1;
    read_session_keys(entry, who, extra, gpus);
    SharedJobSpec js;
    try {
      js = share_detail::parse_job_entry(entry, "Session.add_job");
    } catch (const InputError& e) {
      // The jobs file's words for its one entry ("job 1"), with its id.
      std::string what = e.what();
      const std::string one = "Session.add_job: job 1 (";
      if (what.starts_with(one)) what.replace(0, one.size(), fmt::format("{} (", who));
      if (what.find("unknown key") != std::string::npos) what += fmt::format("; and a session's: {}", kSessionKeys);
      throw InputError(what);
    }
    if (const auto it = ids_.find(js.name); it != ids_.end())
      throw InputError(
          fmt::format("{}: name '{}' is job {}'s; give each job a name of its own", who, js.name, it->second));
    ShareSpec one;  // its torch, host and cost model, as share gives a job's
    one.jobs.push_back(std::move(js));
    give_cost_models(one, profiles_);
    js = std::move(one.jobs.front());
    if (js.job.compute.step_time == StepTime::CostModel) {
      try {  // an unknown model, or a batch its model cannot run, is refused here (as share does up front)
        js.costs->step_cost(*session_->spec().gpu, js.job.compute.model.name, js.job.batch_size);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{} ('{}'): {}", who, js.name, e.what()));
      }
    }
    SessionJob j = share_detail::session_job(js, extra.gpu);
    j.job.cluster.gpus = gpus;
    j.after = extra.after;
    j.checkpoint_save = extra.checkpoint_save;
    j.checkpoint_restore = extra.checkpoint_restore;
    try {
      session_->add_job(std::move(j));
    } catch (const SpecError&) {  // worded as Python's keywords where the module raises it
      throw;
    } catch (const InputError& e) {  // the session's field names, as the Session's keys
      std::string what = e.what();
      for (std::size_t at = what.find("cluster.gpus"); at != std::string::npos; at = what.find("cluster.gpus"))
        what.replace(at, 12, "gpus");
      throw InputError(what);
    }
    ids_.emplace(js.name, id);
    specs_.push_back(std::move(js));
    return id;
  }

  void at(double t_s, const py::function& fn) {
    if (ran_) throw Error("Session.at: the session has run; give its actions before run()");
    const Time t = seconds_arg(t_s, "Session.at: t");
    callbacks_.push_back(fn);
    const std::string what = fmt::format("the action at {} s", t_s);
    session_->at(t, [this, h = fn.ptr(), what](Session&) { call_back(h, what); });
  }

  void on_job_end(const py::function& fn) {
    if (ran_) throw Error("Session.on_job_end: the session has run; give its observers before run()");
    callbacks_.push_back(fn);
    session_->on_job_end([this, h = fn.ptr()](Session&, const JobOutcome& o) {
      call_back(h, fmt::format("on_job_end for job {}", o.id), outcome_json(o));
    });
  }

  void run(const py::object& self) {
    if (ran_) throw Error("Session.run: the session has run; a session runs once (make another)");
    ran_ = running_ = true;
    self_ = self.ptr();
    try {
      py::gil_scoped_release release;
      session_->run();
    } catch (const std::exception& e) {
      running_ = false;
      failed_ = e.what();
      throw;
    }
    running_ = false;
    for (JobId id = 0; id < static_cast<JobId>(specs_.size()); ++id) {
      JobOutcome o = session_->take_outcome(id);
      nlohmann::json j = outcome_json(o);
      j.update(shared_job_json(
          share_detail::job_result(specs_[static_cast<std::size_t>(id)], *session_->spec().gpu, std::move(o))));
      outcomes_.push_back(std::move(j));
    }
    if (callback_failed_.empty()) return;
    py::object e = py::module_::import("gpemu").attr("Error")(callback_failed_);
    if (callback_error_) e.attr("__cause__") = callback_error_;
    PyErr_SetObject(e.get_type().ptr(), e.ptr());
    throw py::error_already_set();
  }

  // pause, preempt, resume: from at() or on_job_end() while the session runs.
  void control(JobId id, void (Session::*action)(JobId), const char* name) {
    if (!running_)
      throw Error(
          fmt::format("Session.{}: call it while the session runs (from an at() or on_job_end() callback)", name));
    py::gil_scoped_release release;
    (session_.get()->*action)(id);
  }
  std::string state(JobId id) const {
    py::gil_scoped_release release;
    return std::string(to_string(session_->state(id)));
  }
  double now() const { return to_seconds(clock_->now()); }
  int gpus() const { return session_->gpus(); }
  std::size_t jobs() const { return specs_.size(); }

  py::object outcome(JobId id) const {
    check_outcomes("outcome");
    if (id < 0 || id >= static_cast<JobId>(outcomes_.size()))
      throw InputError(fmt::format("Session.outcome: job {}: the session has jobs 0 to {}", id,
                                   static_cast<int>(outcomes_.size()) - 1));
    return to_python(outcomes_[static_cast<std::size_t>(id)]);
  }
  py::object outcomes() const {
    check_outcomes("outcomes");
    return to_python(outcomes_);
  }

 private:
  // The keys a session's job has beside a jobs file's, taken out of `entry`.
  void read_session_keys(nlohmann::json& entry, const std::string& who, SessionJob& j, int& gpus) const {
    auto take = [&](const char* key) -> std::optional<nlohmann::json> {
      const auto it = entry.find(key);
      if (it == entry.end()) return std::nullopt;
      nlohmann::json v = std::move(*it);
      entry.erase(it);
      return v;
    };
    auto where = [&](const char* key) { return fmt::format("{}, '{}'", who, key); };
    const int id = static_cast<int>(specs_.size());
    if (auto v = take("gpu")) j.gpu = static_cast<int>(integer_field(where("gpu"), *v, -1, session_->gpus() - 1));
    if (auto v = take("gpus"))
      gpus = static_cast<int>(integer_field(where("gpus"), *v, 1, session_->spec().gpus_per_node));
    if (auto v = take("after")) {
      const std::string earlier =
          id == 0 ? "an earlier job's id or name (there is none yet)" : "an earlier job's id or name";
      if (v->is_string()) {
        const auto it = ids_.find(v->get<std::string>());
        if (it == ids_.end()) bad_field(where("after"), *v, earlier);
        j.after = it->second;
      } else {
        if (id == 0 || !v->is_number_integer()) bad_field(where("after"), *v, earlier);
        j.after = static_cast<JobId>(integer_field(where("after"), *v, 0, id - 1));
      }
    }
    if (auto v = take("checkpoint_save_s"))
      j.checkpoint_save = from_seconds(number_field(where("checkpoint_save_s"), *v, 0, 1e6));
    if (auto v = take("checkpoint_restore_s"))
      j.checkpoint_restore = from_seconds(number_field(where("checkpoint_restore_s"), *v, 0, 1e6));
  }

  // Calls a callback on the session's host thread, the GIL taken; the first
  // one to raise is the run's error (run() raises it once every job has
  // ended), and no callback is called after it.
  template <class... Args>
  void call_back(PyObject* fn, const std::string& what, const Args&... args) {
    py::gil_scoped_acquire gil;
    if (!callback_failed_.empty()) return;
    try {
      const py::handle callback(fn);
      callback(py::handle(self_), to_python(args)...);
    } catch (py::error_already_set& e) {
      const std::string text = e.what();
      callback_failed_ = fmt::format("Session: {} raised {}", what, text.substr(0, text.find('\n')));
      callback_error_ = e.value();
    }
  }

  void check_outcomes(const char* method) const {
    if (!failed_.empty())
      throw Error(fmt::format("Session.{}: the run failed ({}); it has no outcomes", method, failed_));
    if (!ran_ || running_) throw Error(fmt::format("Session.{}: there are none before run() has returned", method));
  }

  std::optional<std::filesystem::path> profiles_;
  // Python objects the engine calls: kept while the session is (the C++
  // session, destroyed first, holds only their handles).
  py::object placement_;
  std::vector<py::object> callbacks_;
  py::object callback_error_;
  std::string callback_failed_;  // the first callback's error; empty: none
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<CostModel> costs_;  // the session's; each job brings its own (give_cost_models)
  std::unique_ptr<Session> session_;
  std::vector<SharedJobSpec> specs_;  // by id
  std::map<std::string, JobId, std::less<>> ids_;
  PyObject* self_ = nullptr;  // the Python Session, while it runs
  bool ran_ = false, running_ = false;
  std::string failed_;                    // what ended run() with an error
  std::vector<nlohmann::json> outcomes_;  // by id, once it has run
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<PySession>(
      m, "Session",
      "GPUs (nodes of gpus_per_node) shared by jobs added over time under a sharing policy (as share's: policy, "
      "timeslice_ms, switch_us) or, exclusive=True, one job a GPU; a placement policy (a name, or a "
      "gpemu.PlacementPolicy) decides which GPUs a queued job starts on, and when. add_job, at and on_job_end before "
      "run(); then outcome(id) / outcomes(). docs/python.md")
      .def(py::init<const std::string&, int, int, const std::string&, double, double, const py::object&,
                    const std::string&, bool, int, std::optional<std::filesystem::path>>(),
           py::arg("gpu") = "v100", py::kw_only(), py::arg("nodes") = 1, py::arg("gpus_per_node") = 1,
           py::arg("policy") = "fifo", py::arg("timeslice_ms") = 2.0, py::arg("switch_us") = 25.0,
           py::arg("placement") = "pinned", py::arg("clock") = "virtual", py::arg("exclusive") = false,
           py::arg("cpu_cores") = 0, py::arg("profiles") = py::none())
      .def("add_job", &PySession::add_job, py::arg("job") = py::none(), py::pos_only(),
           "Adds a job: a dict of gpemu.share's job keys (name, model or compute_s, batch_size, iterations, "
           "arrival_s, priority, mig, ...) and a session's (gpu: the GPU it asks for, -1: the placement's choice; "
           "gpus: GPUs of one node; after: an earlier job's id or name, whose end its arrival_s counts from; "
           "checkpoint_save_s, checkpoint_restore_s), as a dict or keywords; returns its id (0, 1, ...).")
      .def("at", &PySession::at, py::arg("t_s"), py::arg("fn"),
           "Calls fn(session) at emulated time t_s while the session runs: where pause, preempt and resume are "
           "called. What it raises is the run's error (run() raises it once every job has ended).")
      .def("on_job_end", &PySession::on_job_end, py::arg("fn"),
           "Calls fn(session, outcome) when a job ends (outcome: its id, name, state, gpus and times, no figures). "
           "What it raises is the run's error, as at's.")
      .def(
          "run", [](const py::object& self) { self.cast<PySession&>().run(self); },
          "Runs every job to its end (the GIL released). A placement policy that raises ends it with its error "
          "(gpemu.Error; gpemu.InputError for a ValueError).")
      .def(
          "pause", [](PySession& s, JobId id) { s.control(id, &Session::pause, "pause"); }, py::arg("id"),
          "Pauses a running job at its next step boundary, holding its GPUs.")
      .def(
          "preempt", [](PySession& s, JobId id) { s.control(id, &Session::preempt, "preempt"); }, py::arg("id"),
          "Preempts a running job at its next step boundary: it writes its checkpoint and leaves its GPUs.")
      .def(
          "resume", [](PySession& s, JobId id) { s.control(id, &Session::resume, "resume"); }, py::arg("id"),
          "Resumes a paused or preempted job.")
      .def("state", &PySession::state, py::arg("id"),
           "'added', 'queued', 'running', 'paused', 'preempted', 'finished' or 'failed'.")
      .def("now", &PySession::now, "The session's clock, in seconds.")
      .def_property_readonly("gpus", &PySession::gpus)
      .def_property_readonly("jobs", &PySession::jobs)
      .def("outcome", &PySession::outcome, py::arg("id"),
           "A job's outcome once the session has run: id, name, state, gpu, gpus, arrival_s, start_s, end_s, "
           "jct_s, pauses, error, and its figures as gpemu.share's jobs give them (for a job of several GPUs, its "
           "first GPU's).")
      .def("outcomes", &PySession::outcomes, "Every job's outcome, by id.");
}

}  // namespace gpemu::python
