#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/trace.h"
#include "gpemu/workload.h"

namespace gpemu::cli {
namespace {

struct TrainArgs {
  std::string gpu = "v100";
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int iterations = 300;
  std::string clock = "real";
  std::string host_memory = "pinned";
  std::string sync = "iteration";
  std::string profiles;
  std::uint64_t seed = 0;
  double cv = -1;
  double warmup = 1.5;
  bool json = false;
  std::string trace;
};

void train(const TrainArgs& a) {
  const GpuSpec& spec = find_gpu(a.gpu);
  if (a.batch_size < 1) throw InputError(fmt::format("--batch-size {} is impossible: it must be at least 1", a.batch_size));
  auto clock = make_clock(a.clock);
  auto costs = make_cost_model(a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles));
  Timeline timeline(*clock);
  if (!a.trace.empty()) timeline.enable_trace(true);
  Device device(timeline, spec);

  TrainingOptions o;
  o.model = a.model;
  o.batch_size = a.batch_size;
  o.iterations = a.iterations;
  o.host_memory = parse_host_memory(a.host_memory);
  o.sync = parse_sync_mode(a.sync);
  o.variation.seed = a.seed;
  o.variation.warmup_factor = a.warmup;
  if (a.cv >= 0) o.variation.cv = a.cv;
  TrainingJob job(device, *costs, o);

  const auto wall_start = std::chrono::steady_clock::now();
  ProgressBar bar(fmt::format("training {} on {}", canonical_model_name(a.model), spec.id), a.iterations);
  TrainingResult r = job.run([&](int i) { bar.update(i + 1); });
  bar.finish();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  if (!a.trace.empty()) {
    std::ofstream out(a.trace);
    if (!out) throw InputError(fmt::format("cannot write trace file '{}'", a.trace));
    write_chrome_trace(timeline.trace_records(), timeline.host_spans(),
                       {{device.index(), fmt::format("GPU {} ({})", device.index(), spec.id)}}, out);
  }
  const double elapsed_s = to_seconds(r.elapsed);
  const double h2d_pct = r.elapsed > 0 ? 100.0 * static_cast<double>(r.h2d_total) / static_cast<double>(r.elapsed) : 0;
  if (a.json) {
    nlohmann::json j = {{"gpu", spec.id},
                        {"model", canonical_model_name(a.model)},
                        {"batch_size", a.batch_size},
                        {"clock", a.clock},
                        {"iterations", r.iterations},
                        {"samples", r.samples},
                        {"elapsed_s", elapsed_s},
                        {"wall_s", wall_s},
                        {"iterations_per_s", r.iterations_per_s},
                        {"samples_per_s", r.samples_per_s},
                        {"gpu_util_pct", r.gpu_busy_pct},
                        {"h2d_pct", h2d_pct},
                        {"forward_ms_mean", r.iterations ? to_ms(r.forward_total) / r.iterations : 0.0},
                        {"backward_ms_mean", r.iterations ? to_ms(r.backward_total) / r.iterations : 0.0},
                        {"peak_allocated_mib", mib(r.peak_allocated_bytes)},
                        {"peak_reserved_mib", mib(r.peak_reserved_bytes)},
                        {"note", r.cost.note}};
    if (!a.trace.empty()) j["trace"] = a.trace;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("trained {} on an emulated {} ({} clock), batch size {}\n\n", canonical_model_name(a.model),
                           spec.id, a.clock, a.batch_size);
  print_summary(std::cout,
                {
                    {"iterations", std::to_string(r.iterations)},
                    {"emulated time", fmt::format("{} s (wall {} s)", fixed(elapsed_s, 3), fixed(wall_s, 3))},
                    {"iterations/s", fixed(r.iterations_per_s, 2)},
                    {"samples/s", fixed(r.samples_per_s, 1)},
                    {"GPU busy", fmt::format("{}%", fixed(r.gpu_busy_pct, 1))},
                    {"H2D share", fmt::format("{}%", fixed(h2d_pct, 1))},
                    {"forward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.forward_total) / r.iterations : 0, 3))},
                    {"backward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.backward_total) / r.iterations : 0, 3))},
                    {"peak allocated", fmt::format("{} MiB", fixed(mib(r.peak_allocated_bytes), 1))},
                    {"peak reserved", fmt::format("{} MiB", fixed(mib(r.peak_reserved_bytes), 1))},
                });
  std::cout << "source: " << r.cost.note << '\n';
  if (!a.trace.empty()) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Run a training job on an emulated GPU");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->capture_default_str();
  cmd->add_option("--model", a->model, "Model name")->capture_default_str();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--iterations,-n", a->iterations, "Training iterations")->capture_default_str();
  cmd->add_option("--clock", a->clock, "real (wall time) or virtual (simulated, as fast as possible)")->capture_default_str();
  cmd->add_option("--host-memory", a->host_memory, "Host memory batches are copied from: pinned or pageable")->capture_default_str();
  cmd->add_option("--sync", a->sync, "Host waits for the GPU every 'iteration' (loss.item()) or at the 'end'")->capture_default_str();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--seed", a->seed, "Seed of the per-iteration variation")->capture_default_str();
  cmd->add_option("--cv", a->cv, "Coefficient of variation of iteration times (default: measured, else 0.01)");
  cmd->add_option("--warmup", a->warmup, "Factor applied to the first iteration's time")->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option("--trace", a->trace, "Write a Chrome/Perfetto trace to this file");
  cmd->callback([a] { train(*a); });
}

}  // namespace gpemu::cli
