// The engine's front end functions: gpemu.predict (one step's time and
// memory), gpemu.train (one training job) and gpemu.share (several jobs on
// one GPU), each a spec filled from its arguments and the library's result
// as `gpemu <command> --json` prints it. docs/python.md.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/job.h"
#include "gpemu/report.h"
#include "gpemu/share.h"
#include "gpemu/train.h"
#include "gpemu/zoo.h"
#include "python/module.h"
#include "share/share_json.h"
#include "train/summary_json.h"
#include "workload/prediction_json.h"

namespace gpemu::python {
namespace {

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

}  // namespace

void bind_jobs(py::module_& m) {
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
  m.def("share", &python::share, py::arg("jobs"), py::kw_only(), py::arg("gpu") = "", py::arg("policy") = "fifo",
        py::arg("clock") = "virtual", py::arg("timeslice_ms") = 2.0, py::arg("switch_us") = 25.0,
        py::arg("profiles") = py::none(),
        "Runs jobs (a list of dicts with a jobs file's keys) on one emulated GPU under a policy; returns "
        "`gpemu share --json`'s result.");
}

}  // namespace gpemu::python
