#include "torch/summary.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::torch_backend {
namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json text_or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

nlohmann::json steps_json(const TorchSteps& st) {
  nlohmann::json j;
  j["source"] = text_or_null(st.source);
  j["count"] = st.count;
  j["step_ms"] = st.step_ms;
  if (const std::optional<StepStats> s = step_stats(st)) {
    j["median_ms"] = s->median_ms;
    j["min_ms"] = s->min_ms;
    j["max_ms"] = s->max_ms;
  } else {
    j["median_ms"] = j["min_ms"] = j["max_ms"] = nullptr;
  }
  return j;
}

// A part's value, InputError naming the key when it is missing or of another type.
template <typename T>
T field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key))
    throw InputError(fmt::format("gpemu torch part: no '{}' in a rank's summary", key));
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("gpemu torch part: '{}' of a rank's summary: {}", key, e.what()));
  }
}

template <typename T>
std::optional<T> optional_field(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j.at(key).is_null()) return std::nullopt;
  return field<T>(j, key);
}

// The mean of the processes' values that are not null.
std::optional<double> mean_of(const std::vector<TorchRunRecord>& procs, std::optional<double> TorchRunRecord::*member) {
  double sum = 0;
  int n = 0;
  for (const TorchRunRecord& p : procs)
    if (p.*member) {
      sum += *(p.*member);
      ++n;
    }
  return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
}

}  // namespace

std::optional<StepStats> step_stats(const TorchSteps& steps) {
  if (steps.step_ms.empty()) return std::nullopt;
  std::vector<double> sorted = steps.step_ms;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return StepStats{n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2, sorted.front(), sorted.back()};
}

nlohmann::json to_json(const TorchRunRecord& r) {
  nlohmann::json j;
  j["gpu"] = r.run.gpu;
  j["gpus"] = r.run.gpus;
  j["clock"] = r.run.clock;
  j["nodes"] = r.run.nodes;
  j["network"] = r.run.nodes > 1 ? nlohmann::json(r.run.network) : nlohmann::json(nullptr);
  j["model_correction"] = text_or_null(r.run.model);
  j["serve"] = or_null(r.serve);
  j["elapsed_s"] = r.elapsed_s;
  j["emulated_seconds"] = r.elapsed_s;
  j["iterations"] = r.iterations;
  j["optimizer_steps"] = r.optimizer_steps;
  j["steps"] = steps_json(r.steps);
  j["host_profile"] = r.host_profile;
  j["host_load_delay_s"] = or_null(r.host_load_delay_s);
  j["iterations_per_s"] = or_null(r.iterations_per_s);
  j["forward_ms_mean"] = or_null(r.forward_ms_mean);
  j["backward_ms_mean"] = or_null(r.backward_ms_mean);
  j["optimizer_ms_mean"] = or_null(r.optimizer_ms_mean);
  j["kernels"] = r.kernels;
  j["view_ops"] = r.view_ops;
  j["h2d_copies"] = r.h2d_copies;
  j["d2h_copies"] = r.d2h_copies;
  j["blocking_syncs"] = r.blocking_syncs;
  j["collectives"] = r.collectives;
  nlohmann::json devs = nlohmann::json::array();
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const RankRecord& rank = r.run.ranks.at(i);
    const TorchDeviceRecord& d = r.devices[i];
    devs.push_back({{"index", rank.gpu},
                    {"kernels", d.kernels},
                    {"compute_busy_seconds", to_seconds(rank.compute_busy)},
                    {"h2d_busy_seconds", to_seconds(d.h2d_busy)},
                    {"d2h_busy_seconds", to_seconds(d.d2h_busy)},
                    {"collective_busy_seconds", to_seconds(d.collective_busy)},
                    {"h2d_bytes", d.h2d_bytes},
                    {"d2h_bytes", d.d2h_bytes},
                    {"peak_allocated_bytes", rank.peak_allocated_bytes},
                    {"peak_reserved_bytes", rank.peak_reserved_bytes}});
  }
  j["devices"] = devs;
  j["gpu_util_pct"] = or_null(r.gpu_util_pct);
  j["peak_allocated_mib"] = r.peak_allocated_mib;
  j["peak_reserved_mib"] = r.peak_reserved_mib;
  j["ops_through_meta"] = r.ops_through_meta.empty() ? nlohmann::json::object() : nlohmann::json(r.ops_through_meta);
  if (!r.process.empty()) j["process"] = r.process;
  if (!r.processes.empty()) {
    nlohmann::json procs = nlohmann::json::array();
    for (const TorchRunRecord& p : r.processes) procs.push_back(to_json(p));
    j["processes"] = std::move(procs);
  }
  return j;
}

TorchRunRecord torch_run_record(const nlohmann::json& j) {
  TorchRunRecord r;
  r.run.gpu = field<std::string>(j, "gpu");
  r.run.gpus = field<int>(j, "gpus");
  r.run.clock = field<std::string>(j, "clock");
  r.run.nodes = field<int>(j, "nodes");
  r.run.network = optional_field<std::string>(j, "network").value_or("");
  r.run.model = optional_field<std::string>(j, "model_correction").value_or("");
  r.serve = optional_field<std::string>(j, "serve");
  r.elapsed_s = field<double>(j, "elapsed_s");
  r.iterations = field<std::uint64_t>(j, "iterations");
  r.optimizer_steps = field<std::uint64_t>(j, "optimizer_steps");
  const nlohmann::json st = field<nlohmann::json>(j, "steps");
  r.steps.source = optional_field<std::string>(st, "source").value_or("");
  r.steps.count = field<std::uint64_t>(st, "count");
  r.steps.step_ms = field<std::vector<double>>(st, "step_ms");
  r.host_profile = field<std::string>(j, "host_profile");
  r.host_load_delay_s = optional_field<double>(j, "host_load_delay_s");
  r.iterations_per_s = optional_field<double>(j, "iterations_per_s");
  r.forward_ms_mean = optional_field<double>(j, "forward_ms_mean");
  r.backward_ms_mean = optional_field<double>(j, "backward_ms_mean");
  r.optimizer_ms_mean = optional_field<double>(j, "optimizer_ms_mean");
  r.kernels = field<std::uint64_t>(j, "kernels");
  r.view_ops = field<std::uint64_t>(j, "view_ops");
  r.h2d_copies = field<std::uint64_t>(j, "h2d_copies");
  r.d2h_copies = field<std::uint64_t>(j, "d2h_copies");
  r.blocking_syncs = field<std::uint64_t>(j, "blocking_syncs");
  r.collectives = field<std::uint64_t>(j, "collectives");
  for (const nlohmann::json& d : field<nlohmann::json>(j, "devices")) {
    RankRecord rank;
    rank.gpu = field<int>(d, "index");
    rank.compute_busy = from_seconds(field<double>(d, "compute_busy_seconds"));
    rank.peak_allocated_bytes = field<std::uint64_t>(d, "peak_allocated_bytes");
    rank.peak_reserved_bytes = field<std::uint64_t>(d, "peak_reserved_bytes");
    r.run.ranks.push_back(std::move(rank));
    TorchDeviceRecord dev;
    dev.kernels = field<std::uint64_t>(d, "kernels");
    dev.h2d_busy = from_seconds(field<double>(d, "h2d_busy_seconds"));
    dev.d2h_busy = from_seconds(field<double>(d, "d2h_busy_seconds"));
    dev.collective_busy = from_seconds(field<double>(d, "collective_busy_seconds"));
    dev.h2d_bytes = field<std::uint64_t>(d, "h2d_bytes");
    dev.d2h_bytes = field<std::uint64_t>(d, "d2h_bytes");
    r.devices.push_back(dev);
  }
  r.gpu_util_pct = optional_field<double>(j, "gpu_util_pct");
  r.peak_allocated_mib = field<double>(j, "peak_allocated_mib");
  r.peak_reserved_mib = field<double>(j, "peak_reserved_mib");
  r.ops_through_meta = field<std::map<std::string, std::uint64_t>>(j, "ops_through_meta");
  if (j.contains("process")) r.process = field<std::string>(j, "process");
  return r;
}

TorchRunRecord merge_records(TorchRunRecord main, const std::vector<TorchRunRecord>& parts) {
  if (parts.empty()) return main;
  std::vector<TorchRunRecord> procs;
  if (main.kernels > 0) {
    TorchRunRecord m = main;
    m.process = "main";
    procs.push_back(std::move(m));
  }
  procs.insert(procs.end(), parts.begin(), parts.end());
  main.kernels = main.view_ops = main.h2d_copies = main.d2h_copies = main.blocking_syncs = main.collectives = 0;
  for (const TorchRunRecord& p : procs) {
    main.kernels += p.kernels;
    main.view_ops += p.view_ops;
    main.h2d_copies += p.h2d_copies;
    main.d2h_copies += p.d2h_copies;
    main.blocking_syncs += p.blocking_syncs;
    main.collectives += p.collectives;
    main.elapsed_s = std::max(main.elapsed_s, p.elapsed_s);
    main.peak_allocated_mib = std::max(main.peak_allocated_mib, p.peak_allocated_mib);
    main.peak_reserved_mib = std::max(main.peak_reserved_mib, p.peak_reserved_mib);
    main.iterations = std::max(main.iterations, p.iterations);
  }
  main.forward_ms_mean = mean_of(procs, &TorchRunRecord::forward_ms_mean);
  main.backward_ms_mean = mean_of(procs, &TorchRunRecord::backward_ms_mean);
  main.optimizer_ms_mean = mean_of(procs, &TorchRunRecord::optimizer_ms_mean);
  main.gpu_util_pct = mean_of(procs, &TorchRunRecord::gpu_util_pct);
  main.iterations_per_s =
      main.elapsed_s > 0 ? std::optional<double>(static_cast<double>(main.iterations) / main.elapsed_s) : std::nullopt;
  // Steps: the script's own when it stepped; else the first rank's (mp.spawn's
  // parent only waits for its ranks).
  if (main.steps.count == 0)
    for (const TorchRunRecord& p : procs)
      if (p.steps.count > 0) {
        main.steps = p.steps;
        break;
      }
  main.processes = std::move(procs);
  return main;
}

}  // namespace gpemu::torch_backend
