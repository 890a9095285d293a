// `gpemu profile`: measure a real GPU once, emulate it anywhere. Runs
// tools/profiler/gpemu_profile.py (torchvision models, or a user's model
// factory) and writes what it measured in gpemu's own profile layout
// (DIR/<gpu-id>/<model>.json, gpemu-profile/1) and as a step-times CSV
// (DIR/steps.csv, the columns `gpemu validate --step-times` and `gpemu
// calibrate --fit-step-times` read). On a machine without a GPU it runs the
// same code on the CPU, and says so in every file (docs/profiles.md).
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/atomic_file.h"
#include "common/output_path.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu::cli {
namespace {

struct ProfileArgs {
  std::string models = "resnet18", batch_sizes = "1,8,32", precision = "fp32", device = "auto", out, factory;
  std::string python = "/usr/bin/python3", script;
  int warmup = 3, steps = 10, op_steps = 1;
  bool channels_last = false;
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The profiler script's per-op rows of batch size `b` (gpemu_profile.py
// op_rows), as the profile's MeasuredOps; the reader checks them when the
// written file is read back.
void add_ops(Profile& prof, int b, const nlohmann::json& r) {
  try {
    prof.op_timer = r.at("op_timer").get<std::string>();
    for (const nlohmann::json& o : r.at("ops")) {
      MeasuredOp m;
      m.batch_size = b;
      m.phase = o.at("phase").get<std::string>();
      m.op = o.at("op").get<std::string>();
      m.op_class = o.at("class").get<std::string>();
      m.shapes = o.at("shapes").dump();
      m.dtype = o.value("dtype", "");
      m.calls_per_step = o.at("calls_per_step").get<double>();
      m.seconds_per_call = o.at("seconds_per_call").get<double>();
      m.kernels = o.value("kernels", std::vector<std::string>{});
      prof.ops.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("gpemu profile: the profiler's per-op rows of {} at batch {} are malformed ({})",
                                 prof.model, b, e.what()));
  }
}

// The profiler script's command line, after the flags' checks.
std::string profiler_command(const ProfileArgs& a, std::string& script) {
  if (a.out.empty()) throw InputError("gpemu profile: give --out DIR for the profiles and steps.csv");
  if (a.steps < 1 || a.warmup < 0)
    throw InputError(
        fmt::format("--steps {} / --warmup {}: at least 1 timed step and 0 warm-up steps", a.steps, a.warmup));
  if (a.op_steps < 0 || a.op_steps > 100)
    throw InputError(fmt::format("--op-steps {}: 0 (no per-op times) to 100 steps under torch.profiler", a.op_steps));
  script = a.script.empty() ? (zoo::data_dir() / "tools" / "profiler" / "gpemu_profile.py").string() : a.script;
  if (!std::filesystem::exists(script))
    throw InputError(fmt::format("gpemu profile: the profiler script {} is missing; give --script FILE", script));
  std::string cmd = bench::shell_quote(a.python) + " " + bench::shell_quote(script) + " --models " +
                    bench::shell_quote(a.models) + " --batch-sizes " + bench::shell_quote(a.batch_sizes) +
                    " --precision " + bench::shell_quote(a.precision) + " --device " + bench::shell_quote(a.device) +
                    " --warmup " + std::to_string(a.warmup) + " --steps " + std::to_string(a.steps);
  if (a.channels_last) cmd += " --channels-last";
  if (!a.factory.empty()) cmd += " --factory " + bench::shell_quote(a.factory);
  cmd += " --op-steps " + std::to_string(a.op_steps);
  return cmd;
}

// What the profiler printed: its environment and one row per model and batch.
struct ProfilerOutput {
  nlohmann::json env;
  std::vector<nlohmann::json> rows;
  bool gpu = false;  // measured on a CUDA device
  std::string gpu_id = "cpu", gpu_name = "cpu";
};

ProfilerOutput run_profiler(const ProfileArgs& a, const std::string& cmd, const std::string& script) {
  // The script prints one JSON object a line; read them all.
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) throw InputError(fmt::format("gpemu profile: cannot start {}", a.python));
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  const int status = ::pclose(p);
  ProfilerOutput out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("error"))
      throw InputError(fmt::format("gpemu profile: {} (python: {})", j["error"].get<std::string>(), a.python));
    if (j.contains("environment"))
      out.env = j["environment"];
    else
      out.rows.push_back(j);
  }
  if (out.env.is_null() || status != 0)
    throw InputError(fmt::format("gpemu profile: {} {} printed no measurement (status {})", a.python, script, status));
  out.gpu = out.env.value("device", "") == "cuda";
  if (out.gpu) {
    out.gpu_name = out.env.value("gpu", "");
    try {
      out.gpu_id = find_gpu(out.gpu_name).id;
    } catch (const InputError&) {
      throw InputError(
          fmt::format("gpemu profile: the GPU '{}' is not in the catalog (gpemu devices); add it "
                      "(src/catalog/gpu_catalog.cpp) so its profile can be read",
                      out.gpu_name));
    }
  }
  return out;
}

// The measured rows as profiles (per model) and steps.csv's rows; returns how many were measured.
int collect_rows(const ProfileArgs& a, const ProfilerOutput& po, std::map<std::string, Profile>& profiles,
                 std::ostringstream& csv, std::string& measured_on) {
  const nlohmann::json& env = po.env;
  const bool gpu = po.gpu;
  const std::string& gpu_id = po.gpu_id;
  const std::string& gpu_name = po.gpu_name;
  const std::string when = [] {
    char b[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(b, sizeof b, "%Y-%m-%d", std::gmtime(&t));
    return std::string(b);
  }();
  measured_on = gpu ? fmt::format("gpemu profile on {}", gpu_name)
                    : std::string("gpemu profile on the CPU (a test of the profiler: CPU timings, not a GPU's)");
  csv << "gpu,model,precision,batch_size,seq_len,task,optimizer,matmul_precision,conv_precision,amp,memory_format,"
         "attention,fused_ops,mlm_positions,includes_h2d,includes_loss_and_optimizer,micro_steps,confidence,"
         "published_iteration_ms,published_figure,source,notes\n";
  const std::string half = a.precision == "amp" ? "fp16" : a.precision;
  const bool foreach = gpu && env.value("torch", "1").substr(0, 1) >= "2";  // PyTorch 2's SGD default on CUDA
  int ok = 0;
  for (const nlohmann::json& r : po.rows) {
    const std::string model = r.value("model", "");
    Profile& prof = profiles[model];
    prof.gpu = gpu_id;
    prof.model = canonical_model_name(model);
    prof.precision = a.precision == "amp"    ? Precision::FP16
                     : a.precision == "bf16" ? Precision::BF16
                     : a.precision == "tf32" ? Precision::TF32
                                             : Precision::FP32;
    prof.comment = fmt::format("{}, {}; precision {}{}; environment {}", measured_on, when, a.precision,
                               a.channels_last ? ", channels_last" : "", env.dump());
    const int b = r.value("batch_size", 0);
    const std::string status_text = r.value("status", "");
    if (status_text == "oom") {
      if (!prof.oom_batch_size || b < *prof.oom_batch_size) prof.oom_batch_size = b;
      continue;
    }
    if (status_text != "ok") {
      std::cerr << fmt::format("gpemu profile: {} at batch {}: {}\n", model, b, r.value("error", status_text));
      continue;
    }
    ++ok;
    prof.forward_s.push_back({b, r["forward_s"].get<double>()});
    prof.backward_s.push_back({b, r["backward_s"].get<double>()});
    prof.forward_cv.push_back({b, r["forward_cv"].get<double>()});
    prof.backward_cv.push_back({b, r["backward_cv"].get<double>()});
    if (r.contains("peak_allocated_mib")) {
      prof.peak_allocated_mib.push_back({b, r["peak_allocated_mib"].get<double>()});
      prof.peak_reserved_mib.push_back({b, r["peak_reserved_mib"].get<double>()});
      prof.persistent_mib.push_back({b, r["persistent_mib"].get<double>()});
    }
    if (r.contains("ops_error"))
      std::cerr << fmt::format("gpemu profile: {} at batch {}: no per-op times ({})\n", model, b,
                               r.value("ops_error", ""));
    if (r.contains("ops")) add_ops(prof, b, r);
    const double ms = r["step_s"].get<double>() * 1e3;
    csv << fmt::format(
        "{},{},{},{},,classification,sgd,{},{},{},{},n/a,{},n/a,no,yes,1,stated,{},{},{},{}\n", csv_field(gpu_name),
        csv_field(model), a.precision == "amp" ? "amp" : a.precision, b, half, half,
        a.precision == "amp" || a.precision == "bf16" ? "autocast" : "none", a.channels_last ? "channels_last" : "nchw",
        foreach ? "some" : "none", ms, csv_field(fmt::format("mean of {} steps back to back: {:.3f} ms", a.steps, ms)),
        csv_field(fmt::format("gpemu reference measurement ({}, {})", measured_on, when)),
        csv_field(fmt::format("SGD momentum 0.9, zero_grad(set_to_none=True), synthetic data on the device; {}",
                              env.dump())));
  }
  return ok;
}

void run_profile(const ProfileArgs& a) {
  std::string script;
  const std::string cmd = profiler_command(a, script);
  std::cerr << "profiling " << a.models << " at batch sizes " << a.batch_sizes << " (" << a.precision << ")\n";
  const ProfilerOutput po = run_profiler(a, cmd, script);
  std::map<std::string, Profile> profiles;
  std::ostringstream csv;
  std::string measured_on;
  const int ok = collect_rows(a, po, profiles, csv, measured_on);
  if (ok == 0) throw InputError("gpemu profile: no row was measured (every model and batch size failed; see above)");
  std::filesystem::create_directories(a.out);
  for (auto& [model, prof] : profiles) {
    if (prof.forward_s.empty()) continue;
    const auto dir = std::filesystem::path(a.out) / po.gpu_id;
    std::filesystem::create_directories(dir);
    const auto file = dir / (prof.model + ".json");
    write_file_atomically(file, native_profile_json(prof), "profile");
    if (po.gpu) read_native_profile(file);  // what a GPU run writes must read back ('cpu' is no catalog GPU)
    std::cout << fmt::format("wrote {}{}\n", file.string(),
                             prof.ops.empty() ? std::string()
                                              : fmt::format(" ({} per-op rows, {} timings)", prof.ops.size(),
                                                            prof.op_timer == "cuda" ? "CUDA kernel" : "CPU"));
  }
  write_file_atomically(std::filesystem::path(a.out) / "steps.csv", csv.str(), "step times");
  std::cout << fmt::format("wrote {} ({} rows)\n", (std::filesystem::path(a.out) / "steps.csv").string(), ok);
  if (!po.gpu)
    std::cout << "note: measured on the CPU: the files test the profiler; no GPU was profiled, and gpemu's readers "
                 "refuse the 'cpu' device\n";
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* cmd = app.add_subcommand(
      "profile", "Measure training steps on a real GPU with PyTorch and write gpemu's profile layout and steps.csv");
  cmd->add_option("--out", a->out, "Folder for <gpu-id>/<model>.json and steps.csv")->required();
  cmd->add_option("--model", a->models, "torchvision model names, comma-separated")->capture_default_str();
  cmd->add_option("--batch-sizes", a->batch_sizes, "Batch sizes, comma-separated")->capture_default_str();
  cmd->add_option("--precision", a->precision, "fp32, tf32, amp (autocast FP16 + GradScaler) or bf16")
      ->capture_default_str();
  cmd->add_option("--device", a->device, "auto (CUDA when torch sees a GPU), cuda or cpu")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Warm-up steps per row")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps per row")->capture_default_str();
  cmd->add_flag("--channels-last", a->channels_last, "Model and input in channels_last");
  cmd->add_option("--op-steps", a->op_steps,
                  "Steps per row under torch.profiler for per-op times after the timed ones (0: none)")
      ->capture_default_str();
  cmd->add_option("--factory", a->factory, "module:function building an nn.Module from a model name");
  cmd->add_option("--python", a->python, "Python interpreter with torch")->capture_default_str();
  cmd->add_option("--script", a->script, "The profiler script (default: tools/profiler/gpemu_profile.py)");
  cmd->callback([a] { run_profile(*a); });
}

}  // namespace gpemu::cli
