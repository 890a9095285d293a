#include "torch_bench.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/job.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

namespace fs = std::filesystem;

struct Run {
  const char* gpu;
  int batch;
  const char* clock;
};

constexpr Run kRuns[] = {{"v100", 64, "virtual"}, {"v100", 64, "real"}, {"h100", 8, "real"}, {"h100", 8, "virtual"}};
constexpr const char* kModel = "resnet50";

// Runs the script under `gpemu torch` (this very program); its last JSON line,
// or {"error": ...}.
nlohmann::json run_script(const Run& r, const TorchBenchOptions& o) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  // The source tree's bench/ folder: data_dir() is the source tree in a build.
  const fs::path script = zoo::data_dir() / "bench" / "torch_bench.py";
  if (ec) return {{"error", "cannot find the gpemu program (/proc/self/exe)"}};
  if (!fs::exists(script)) return {{"error", "the benchmark script is not there: " + script.string()}};
  const fs::path log = fs::temp_directory_path() / fmt::format("gpemu-bench-torch-{}.log", ::getpid());
  const std::string cmd =
      // --torch 1: the program predict's default (its --torch 1) models.
      fmt::format(
          "{} torch --torch 1 --gpu {} --clock {} --model {} -- {} --model {} --batch {} --iters {} --warmup {} 2>{}",
          bench::shell_quote(self.string()), r.gpu, r.clock, kModel, bench::shell_quote(script.string()), kModel,
          r.batch, o.iters, o.warmup, bench::shell_quote(log.string()));
  const bench::CommandOutput output = bench::run_command(cmd);
  std::ifstream in(log);
  std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(log, ec);
  if (!output.succeeded() || output.last_json_line.empty()) {
    if (err.size() > 800) err = "..." + err.substr(err.size() - 800);
    return {{"error", fmt::format("gpemu torch failed (status {}): {}", output.status, err)}};
  }
  try {
    return nlohmann::json::parse(output.last_json_line);
  } catch (const std::exception& e) {
    return {{"error", std::string("unreadable output: ") + e.what()}};
  }
}

double pct(double a, double b) { return b == 0 ? 0 : 100.0 * (a / b - 1.0); }

}  // namespace

nlohmann::json run_torch_bench(const TorchBenchOptions& o) {
  nlohmann::json result;
  result["model"] = kModel;
  result["iters"] = o.iters;
  result["warmup"] = o.warmup;
  nlohmann::json runs = nlohmann::json::array();
  for (const Run& r : kRuns) {
    nlohmann::json j = run_script(r, o);
    j["gpu"] = find_gpu(r.gpu).id;
    j["clock"] = r.clock;
    j["batch"] = r.batch;
    PredictRequest req;
    req.gpu = &find_gpu(r.gpu);
    req.model.name = kModel;
    req.batch_size = r.batch;
    const Prediction p = predict(req);
    j["predict_forward_ms"] = to_ms(p.forward);
    j["predict_backward_ms"] = to_ms(p.backward);
    j["predict_iteration_ms"] = to_ms(p.iteration);
    if (!j.contains("error")) {
      j["iteration_vs_predict_pct"] = pct(j["iteration_ms"].get<double>(), to_ms(p.iteration));
      j["wall_over_emulated_pct"] = 100.0 * j["wall_ms"].get<double>() / j["iteration_ms"].get<double>();
      j["wall_us_per_op"] = 1000.0 * j["wall_ms"].get<double>() / j["ops_per_iteration"].get<double>();
    }
    runs.push_back(j);
  }
  result["runs"] = runs;
  nlohmann::json clocks = nlohmann::json::object();
  for (const char* gpu : {"v100", "h100"}) {
    const nlohmann::json *v = nullptr, *re = nullptr;
    for (const auto& j : result["runs"])
      if (!j.contains("error") && j["gpu"] == find_gpu(gpu).id) (j["clock"] == "virtual" ? v : re) = &j;
    if (v && re)
      clocks[find_gpu(gpu).id] = pct((*re)["iteration_ms"].get<double>(), (*v)["iteration_ms"].get<double>());
  }
  result["real_vs_virtual_iteration_pct"] = clocks;
  return result;
}

void print_torch_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format(
      "gpemu torch: torchvision {} under `gpemu torch --model {}`, {} measured iterations after {} (SGD, pinned "
      "batches, loss.item() each iteration), against predict()\n",
      r.at("model").get<std::string>(), r.at("model").get<std::string>(), r.at("iters").get<int>(),
      r.at("warmup").get<int>());
  bench::Table t({"GPU", "batch", "clock", "fwd ms", "predict", "bwd+step ms", "predict", "iter ms", "predict",
                  "vs predict", "wall ms", "wall/emulated", "ops/iter", "wall us/op"});
  for (const auto& j : r.at("runs")) {
    if (j.contains("error")) {
      os << fmt::format("{} batch {} {} clock: {}\n", j.at("gpu").get<std::string>(), j.at("batch").get<int>(),
                        j.at("clock").get<std::string>(), j.at("error").get<std::string>());
      continue;
    }
    t.add_row(
        {j.at("gpu").get<std::string>(), std::to_string(j.at("batch").get<int>()), j.at("clock").get<std::string>(),
         bench::fixed(j.at("forward_ms").get<double>(), 2), bench::fixed(j.at("predict_forward_ms").get<double>(), 2),
         bench::fixed(j.at("backward_ms").get<double>(), 2), bench::fixed(j.at("predict_backward_ms").get<double>(), 2),
         bench::fixed(j.at("iteration_ms").get<double>(), 2),
         bench::fixed(j.at("predict_iteration_ms").get<double>(), 2),
         fmt::format("{:+.1f} %", j.at("iteration_vs_predict_pct").get<double>()),
         bench::fixed(j.at("wall_ms").get<double>(), 1),
         fmt::format("{:.1f} %", j.at("wall_over_emulated_pct").get<double>()),
         bench::fixed(j.at("ops_per_iteration").get<double>(), 0),
         bench::fixed(j.at("wall_us_per_op").get<double>(), 1)});
  }
  t.print(os);
  for (const auto& [gpu, d] : r.at("real_vs_virtual_iteration_pct").items())
    os << fmt::format(
        "{}: emulated iteration, real clock vs virtual: {:+.2f} % (target within 2 % where the GPU bounds the "
        "step; a host-bound step's real clock pays this machine's host cost, the virtual clock the host profile's)\n",
        gpu, d.get<double>());
  for (const auto& j : r.at("runs")) {
    if (j.contains("error") || j.at("clock") != "virtual") continue;
    os << fmt::format(
        "{} virtual clock: emulator cost {:.1f} us per small op (torch's own CPU dispatch of the same op: {:.1f} us; "
        "target <= 10 us), an iteration issued in {:.1f} % of its emulated time\n",
        j.at("gpu").get<std::string>(), j.at("emulated_op_us").get<double>(), j.at("cpu_op_us").get<double>(),
        j.at("wall_over_emulated_pct").get<double>());
  }
  os << "targets (issue 11): <= 10 us per op; iteration issued in <= 15 % of its emulated V100 time; the "
        "launch-bound H100 run within 15 % of predict under the real clock\n";
}

}  // namespace gpemu
