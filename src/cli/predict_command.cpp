#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/workload.h"

namespace gpemu::cli {
namespace {

struct PredictArgs {
  std::string gpu, model, profiles, host_memory = "pinned";
  int batch_size = 0;
  bool json = false;
};

Duration transfer_time(const StepCost& c, const PcieModel& pcie, HostMemoryKind kind, int batch) {
  const auto measured = kind == HostMemoryKind::Pinned ? c.transfer_pinned : c.transfer_pageable;
  if (measured) return *measured;
  const double bytes = static_cast<double>(c.input_bytes_per_sample) * batch;
  return pcie.latency(kind) + static_cast<Duration>(bytes / pcie.gbs(kind));
}

void predict(const PredictArgs& a) {
  const GpuSpec& gpu = find_gpu(a.gpu);
  const HostMemoryKind kind = parse_host_memory(a.host_memory);
  auto costs = make_cost_model(a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles));
  const StepCost c = costs->step_cost(gpu, a.model, a.batch_size);
  const PcieModel pcie = PcieModel::for_link(gpu.pcie_gen, gpu.pcie_lanes);
  const Duration transfer = transfer_time(c, pcie, kind, a.batch_size);
  const std::uint64_t capacity = gpu.memory_bytes - Device::default_context_reserve(gpu);
  const MemoryCheck mem = check_memory(c, a.batch_size, capacity);
  const Duration iteration = transfer + c.forward + c.backward;

  if (a.json) {
    nlohmann::json j = {
        {"gpu", gpu.id},
        {"model", canonical_model_name(a.model)},
        {"batch_size", a.batch_size},
        {"host_memory", std::string(to_string(kind))},
        {"forward_ms", to_ms(c.forward)},
        {"backward_ms", to_ms(c.backward)},
        {"transfer_ms", to_ms(transfer)},
        {"iteration_ms", to_ms(iteration)},
        {"samples_per_s", a.batch_size / to_seconds(iteration)},
        {"peak_allocated_mib", mib(mem.peak_allocated_bytes)},
        {"peak_reserved_mib", mib(mem.peak_reserved_bytes)},
        {"capacity_mib", mib(capacity)},
        {"fits", mem.fits},
        {"provenance",
         {{"forward", std::string(to_string(c.forward_provenance))},
          {"backward", std::string(to_string(c.backward_provenance))},
          {"memory", std::string(to_string(c.memory_provenance))}}},
        {"note", c.note},
        {"cost_model", costs->describe()}};
    if (!mem.fits) j["oom_reason"] = mem.reason;
    if (c.oom_evidence_batch) j["oom_evidence_batch"] = *c.oom_evidence_batch;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{} on {} at batch size {} ({} host memory)\n\n", canonical_model_name(a.model), gpu.id,
                           a.batch_size, to_string(kind));
  Table t({"phase", "time ms", "source"});
  t.add({"transfer (H2D)", fixed(to_ms(transfer), 3),
         (kind == HostMemoryKind::Pinned ? c.transfer_pinned : c.transfer_pageable) ? "measured" : "PCIe model"});
  t.add({"forward", fixed(to_ms(c.forward), 3), std::string(to_string(c.forward_provenance))});
  t.add({"backward + step", fixed(to_ms(c.backward), 3), std::string(to_string(c.backward_provenance))});
  t.add({"iteration", fixed(to_ms(iteration), 3), ""});
  t.print(std::cout);
  std::cout << '\n';
  print_summary(std::cout, {
                               {"samples/s", fixed(a.batch_size / to_seconds(iteration), 1)},
                               {"peak allocated", fmt::format("{} MiB", fixed(mib(mem.peak_allocated_bytes), 1))},
                               {"peak reserved", fmt::format("{} MiB", fixed(mib(mem.peak_reserved_bytes), 1))},
                               {"capacity", fmt::format("{} MiB (card minus CUDA context)", fixed(mib(capacity), 1))},
                               {"fits", mem.fits ? "yes" : "no"},
                           });
  if (!mem.fits) std::cout << "why not: " << mem.reason << '\n';
  std::cout << "source: " << c.note << '\n';
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand("predict", "Predict one training iteration's time and memory for a model on a GPU");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->required();
  cmd->add_option("--model", a->model, "Model name")->required();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size")->required();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--host-memory", a->host_memory, "Host memory the batch is copied from: pinned or pageable")->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { predict(*a); });
}

}  // namespace gpemu::cli
