#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/variant_flags.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/zoo.h"
#include "workload/prediction_json.h"

namespace gpemu::cli {
namespace {

struct PredictArgs {
  std::string gpu, model, profiles, host_memory = "pinned";
  std::optional<int> batch_size;
  std::int64_t seq_len = 0;
  std::string precision = "fp32", optimizer = "sgd", zero_grad, torch = "2", host;
  bool max_batch = false;
  bool json = false;
  std::string task;
  std::string keep_output = "on";
  VariantFlags variant;
};

PredictRequest request(const PredictArgs& a) {
  ModelArgs m;
  m.gpu = a.gpu;
  m.model = a.model;
  m.seq_len = a.seq_len;
  m.precision = a.precision;
  m.optimizer = a.optimizer;
  m.zero_grad = a.zero_grad;
  m.torch = a.torch;
  m.host = a.host;
  m.task = a.task;
  m.keep_output = a.keep_output;
  m.variant = a.variant;
  PredictRequest r;
  r.gpu = &find_gpu(a.gpu);
  r.host = parse_host_memory(a.host_memory);
  r.model = model_spec(m);
  r.batch_size = a.batch_size;
  r.max_batch = a.max_batch;
  if (!a.profiles.empty()) r.profiles = std::filesystem::path(a.profiles);
  return r;
}

void print_max_batch_only(const Prediction& p) {
  std::cout << fmt::format("{} on {} ({}, {}{})\n\n", p.model, p.gpu, zoo::to_string(p.precision),
                           zoo::to_string(p.optimizer), p.seq_len ? fmt::format(", seq_len {}", *p.seq_len) : "");
  const std::int64_t best = p.max_batch.value_or(0);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"largest batch that fits", std::to_string(best)},
      {"capacity", fmt::format("{} MiB (reported memory minus CUDA context and cuDNN workspace margin)",
                               fixed(mib(p.capacity_bytes), 1))}};
  if (best > 0) {
    rows.push_back(
        {fmt::format("peak allocated at {}", best), fmt::format("{} MiB", fixed(mib(p.peak_allocated_bytes), 1))});
    rows.push_back(
        {fmt::format("peak reserved at {}", best), fmt::format("{} MiB", fixed(mib(p.peak_reserved_bytes), 1))});
  }
  print_summary(std::cout, rows);
  if (best == 0) std::cout << "why not: " << p.oom_reason << '\n';
  std::cout << "source: model zoo tensor lifetimes replayed through the caching allocator (docs/zoo-memory.md)\n";
}

// Which side bounds each phase: the host issuing the ops or the GPU running
// them, and by how much.
void print_bounds(const Prediction& p) {
  const StepBreakdown& b = *p.breakdown;
  auto line = [](const char* phase, double host, double gpu) {
    const bool host_bound = host > gpu;
    const double lead = (host_bound ? host / std::max(gpu, 1e-12) : gpu / std::max(host, 1e-12)) - 1;
    return fmt::format("  {:<16} host {:>9} ms, GPU {:>9} ms: {}-bound by {:.0f} %\n", phase, fixed(host * 1e3, 2),
                       fixed(gpu * 1e3, 2), host_bound ? "host" : "GPU", lead * 100);
  };
  std::cout << fmt::format("\nhost and GPU per step ({}, host {}, {} sync point{} per step):\n", p.step_sync,
                           p.host_profile.empty() ? std::string("the GPU family's calibrated launch times")
                                                  : p.host_profile,
                           b.syncs, b.syncs == 1 ? "" : "s");
  std::cout << line("forward", b.host.forward, b.gpu.forward);
  std::cout << line("backward + step", b.host.backward, b.gpu.backward);
}

void print_prediction(const Prediction& p) {
  std::cout << fmt::format("{} on {} at batch size {} ({} host memory, {}, {})\n\n", p.model, p.gpu, p.batch_size,
                           to_string(p.host), zoo::to_string(p.precision), zoo::to_string(p.optimizer));
  Table t({"phase", "time ms", "source"});
  t.add({"transfer (H2D)", fixed(to_ms(p.transfer), 3), p.transfer_measured ? "measured" : "PCIe model"});
  t.add({"forward", fixed(to_ms(p.forward), 3), std::string(to_string(p.forward_provenance))});
  t.add({"backward + step", fixed(to_ms(p.backward), 3), std::string(to_string(p.backward_provenance))});
  t.add({"iteration", fixed(to_ms(p.iteration), 3), ""});
  t.print(std::cout);
  std::cout << '\n';
  std::vector<std::pair<std::string, std::string>> rows = {
      {"samples/s", fixed(p.samples_per_s(), 1)},
      {"peak allocated", fmt::format("{} MiB", fixed(mib(p.peak_allocated_bytes), 1))},
      {"peak reserved", fmt::format("{} MiB", fixed(mib(p.peak_reserved_bytes), 1))},
      {"capacity", fmt::format("{} MiB (reported memory minus CUDA context and cuDNN workspace margin)",
                               fixed(mib(p.capacity_bytes), 1))},
      {"fits", p.fits ? "yes" : "no"},
      {"memory from", p.memory_source},
  };
  if (p.max_batch) rows.push_back({"largest batch that fits", std::to_string(*p.max_batch)});
  print_summary(std::cout, rows);
  if (!p.fits) std::cout << "why not: " << p.oom_reason << '\n';
  if (p.breakdown) print_bounds(p);
  std::cout << "source: " << p.note << '\n';
}

void predict(const PredictArgs& a) {
  const PredictRequest r = request(a);
  warn_skipped_profiles(a.profiles);
  const Prediction p = gpemu::predict(r);
  for (const std::string& n : p.notes) std::cerr << "note: " << n << '\n';
  if (a.json)
    std::cout << prediction_json(p).dump(2) << '\n';
  else if (p.batch_size == 0)
    print_max_batch_only(p);
  else
    print_prediction(p);
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand("predict", "Predict one training iteration's time and memory for a model on a GPU");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->required();
  cmd->add_option("--model", a->model, "Model name")->required();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size (optional with --max-batch)")
      ->check(whole_number_in(1, std::numeric_limits<int>::max()));
  cmd->add_flag("--max-batch", a->max_batch,
                "Also find the largest batch size that fits on the GPU (model zoo models)");
  cmd->add_option("--seq-len", a->seq_len, "Sequence length of sequence models (default: the model's)")
      ->check(whole_number_in(1, zoo::kMaxSeqLen));
  cmd->add_option("--precision", a->precision, "fp32, amp (FP16 autocast) or bf16")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "sgd (momentum) or adam")->capture_default_str();
  cmd->add_option("--zero-grad", a->zero_grad,
                  "zero: zero_grad() keeps .grad (PyTorch < 2.0 default); none: set_to_none=True (PyTorch >= 2.0; "
                  "default with --torch 2)");
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--host-memory", a->host_memory, "Host memory the batch is copied from: pinned or pageable")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_task_option(cmd, a->task);
  add_keep_output_option(cmd, a->keep_output);
  add_variant_flags(cmd, a->variant);
  add_torch_options(cmd, a->torch, a->host);
  cmd->callback([a] { predict(*a); });
}

}  // namespace gpemu::cli
