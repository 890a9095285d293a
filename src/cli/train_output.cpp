// `gpemu train`'s outputs (train_args.h): the report's configuration, the
// --json object and the text summary.
#include "cli/train_args.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/job_args.h"
#include "cli/output.h"
#include "cli/real_nodes.h"
#include "gpemu/job.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"
#include "train/summary_json.h"

namespace gpemu::cli {

// The run's configuration, as the report shows it.
nlohmann::json run_config(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec) {
  const JobArgs& j = a.job;
  nlohmann::json config = {{"gpu", rec.gpu},
                           {"gpus", j.gpus},
                           {"nodes", rec.nodes},
                           {"network", rec.nodes > 1 ? nlohmann::json(rec.network) : nlohmann::json()},
                           {"model", rec.model},
                           {"batch_size", spec.batch_size},
                           {"global_batch_size", static_cast<std::int64_t>(spec.batch_size) * j.gpus},
                           {"precision", j.model.precision},
                           {"program_variant", describe(program_variant(spec.compute.model))},
                           {"optimizer", j.model.optimizer},
                           {"zero_grad", j.model.zero_grad},
                           {"clock", j.clock},
                           {"sync", j.sync},
                           {"seed", j.seed},
                           {"epochs", a.epochs},
                           {"loader", d.loader_kind},
                           {"workers", spec.data.loader.num_workers},
                           {"prefetch_factor", j.prefetch_factor},
                           {"pin_memory", spec.data.pin_memory},
                           {"pin_mode", d.pin_mode_used},
                           {"cache_bytes", d.cache_bytes},
                           {"cache_policy", pipeline::to_string(d.cache_policy)},
                           {"storage", a.storage},
                           {"group_size", spec.data.dataset.group_size},
                           {"cold", a.cold},
                           {"read_method", pipeline::to_string(d.read_method)}};
  if (j.model.seq_len > 0) config["seq_len"] = j.model.seq_len;
  if (!d.dir.empty()) config["data"] = d.dir.string();
  if (d.virtual_data) config["data"] = spec.data.dataset.root + " (sizes without files)";
  return config;
}

// `gpemu train --json`'s object.
nlohmann::json train_json(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec,
                          double wall_s, const std::vector<std::string>& notes) {
  const JobArgs& j = a.job;
  nlohmann::json out = train::summary_json(rec);
  out["wall_s"] = wall_s;
  out["loader"] = d.loader_kind;
  out["workers"] = spec.data.loader.num_workers;
  out["prefetch_factor"] = j.prefetch_factor;
  out["global_batch_size"] = static_cast<std::int64_t>(spec.batch_size) * j.gpus;
  out["gpemu_gpus"] = j.gpemu_gpus;
  out["pin_memory"] = spec.data.pin_memory;
  out["pin_mode"] = d.pin_mode_used;
  out["precision"] = j.model.precision;
  out["program_variant"] = describe(program_variant(spec.compute.model));
  out["optimizer"] = j.model.optimizer;
  out["zero_grad"] = j.model.zero_grad;
  if (j.model.seq_len > 0) out["seq_len"] = j.model.seq_len;
  if (!d.synthetic) out["read_method"] = pipeline::to_string(d.read_method);
  if (!d.dir.empty() || d.virtual_data) {
    out["data"] = d.virtual_data ? spec.data.dataset.root : d.dir.string();
    out["dataset_images"] = d.images;
    out["dataset_bytes"] = d.bytes;
    nlohmann::json reads = train::loader_stats_json(rec.loader_stats, d.bytes);
    reads["cache_bytes"] = d.cache_bytes;
    reads["superbatch"] = spec.data.loader.superbatch;
    reads["group_size"] = spec.data.dataset.group_size;
    reads["cache_policy"] = d.cache_bytes > 0 ? nlohmann::json(pipeline::to_string(d.cache_policy)) : nlohmann::json();
    if (spec.data.loader.distributed_cache) {  // real nodes: this node's reads
      reads["distributed_cache"] = pipeline::to_string(spec.data.loader.distributed_cache->kind());
      reads["per_node_epoch"] = train::node_epoch_reads_json(real_node_epoch_reads(spec, rec));
    }
    if (spec.data.source == DataSource::Modelled) {
      const pipeline::LoaderModelOptions& m = spec.data.model;
      reads["distributed_cache"] = pipeline::to_string(spec.data.distributed_cache);
      reads["storage_shared"] = spec.data.shared_storage;
      reads["per_node_epoch"] = train::node_epoch_reads_json(train::node_epoch_reads(rec));
      reads["storage"] = m.storage ? nlohmann::json(m.storage->name) : nlohmann::json();
      if (m.storage) {
        reads["page_cache_bytes"] =
            m.page_cache_bytes == UINT64_MAX ? nlohmann::json("unlimited") : nlohmann::json(m.page_cache_bytes);
        reads["page_cache_cold"] = m.page_cache_cold;
      }
    }
    out["reads"] = reads;
  }
  out["prep_service"] = prep_service_json(spec, d.fastflow);
  out["virtual_dataset"] = d.virtual_data;
  if (!a.trace.empty()) out["trace"] = a.trace;
  if (!a.report.empty()) out["report"] = a.report;
  if (!notes.empty()) out["notes"] = notes;
  return out;
}

// The text summary: what ran, the summary rows, per-GPU figures, notes.
void print_train(const TrainArgs& a, const TrainData& d, const JobSpec& spec, const RunRecord& rec, double wall_s,
                 const std::vector<std::string>& notes) {
  const JobArgs& j = a.job;
  const RunSummary r = summarize(rec);
  std::cout << fmt::format("trained {} on {} emulated {}{} ({} clock), batch size {}, {} epoch{}\n", r.model,
                           j.gpus == 1 ? std::string("an") : std::to_string(j.gpus), r.gpu,
                           rec.nodes > 1 ? fmt::format(" in {} nodes joined by {}", rec.nodes, rec.network) : "",
                           j.clock,
                           j.gpus == 1 ? std::to_string(spec.batch_size)
                                       : fmt::format("{} per GPU ({} in all)", spec.batch_size,
                                                     static_cast<std::int64_t>(spec.batch_size) * j.gpus),
                           r.epochs.size(), r.epochs.size() == 1 ? "" : "s");
  if (const std::string label = gpemu_compat_label(j); !label.empty()) std::cout << label << '\n';
  if (!d.dir.empty())
    std::cout << fmt::format("data: {} ({} images, {:.1f} MB)\n", d.dir.string(), d.images,
                             static_cast<double>(d.bytes) / 1e6);
  if (d.virtual_data)
    std::cout << fmt::format("data: {}, sizes without files ({} images, {:.1f} MB)\n", spec.data.dataset.root, d.images,
                             static_cast<double>(d.bytes) / 1e6);
  std::cout << "batches: " << r.source << "\n\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const SummaryRow& row : train::summary_rows(rec)) rows.emplace_back(row.key, row.value);
  rows.emplace_back(
      "emulated time",
      d.clock == ClockKind::Virtual && wall_s > 0
          ? fmt::format("{} s (wall {} s: {} emulated s per wall s)", fixed(to_seconds(r.elapsed), 3), fixed(wall_s, 3),
                        fixed(to_seconds(r.elapsed) / wall_s, to_seconds(r.elapsed) >= 10 * wall_s ? 0 : 2))
          : fmt::format("{} s (wall {} s)", fixed(to_seconds(r.elapsed), 3), fixed(wall_s, 3)));
  const std::int64_t its = std::max<std::int64_t>(1, r.iterations * r.gpus);
  rows.emplace_back("forward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.forward_total) / its : 0, 3)));
  rows.emplace_back("backward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.backward_total) / its : 0, 3)));
  print_summary(std::cout, rows);
  if (r.gpus > 1) {
    std::cout << '\n';
    Table t({"GPU", "iterations", "samples", "util %", "stall %", "H2D %", "all-reduce %", "peak MiB"});
    for (const GpuSummary& g : r.per_gpu) {
      auto share = [&](Duration x) {
        return fixed(r.elapsed > 0 ? 100.0 * to_seconds(x) / to_seconds(r.elapsed) : 0, 1);
      };
      t.add({std::to_string(g.gpu), std::to_string(g.iterations), std::to_string(g.samples), share(g.compute_busy),
             share(g.data_stall), share(g.h2d), share(g.all_reduce_wait), fixed(mib(g.peak_allocated_bytes), 1)});
    }
    t.print(std::cout);
    if (!r.backward_split.empty()) std::cout << "backward split: " << r.backward_split << '\n';
  }
  const bool real_dcache = spec.data.loader.distributed_cache != nullptr;
  if (real_dcache || (spec.data.source == DataSource::Modelled &&
                      (rec.nodes > 1 || spec.data.distributed_cache != pipeline::DistributedCacheKind::None))) {
    std::cout << "\nreads per node and epoch ("
              << pipeline::to_string(real_dcache ? spec.data.loader.distributed_cache->kind()
                                                 : spec.data.distributed_cache)
              << " distributed cache" << (spec.data.shared_storage ? ", shared storage" : "")
              << (real_dcache ? ", this node's reads" : "") << ")\n";
    Table t({"node", "epoch", "cache hits", "remote hits", "storage reads", "storage MB", "network MB"});
    for (const train::NodeEpochReads& n : real_dcache ? real_node_epoch_reads(spec, rec) : train::node_epoch_reads(rec))
      t.add({std::to_string(n.node), std::to_string(n.epoch + 1), std::to_string(n.cache_hits),
             std::to_string(n.remote_hits), std::to_string(n.storage_requests),
             fixed(static_cast<double>(n.storage_bytes) / 1e6, 1),
             fixed(static_cast<double>(n.network_bytes) / 1e6, 1)});
    t.print(std::cout);
  }
  std::cout << "GPU costs: " << r.cost.note << '\n';
  if (spec.compute.step_time == StepTime::CostModel) {
    // Which program and host the step times are of (--torch, --host).
    const ModelSpec& m = spec.compute.model;
    std::cout << fmt::format("program: {}, zero_grad {}, steps {}, host {}\n", describe(program_variant(m)),
                             m.keep_grads ? "keeps grads" : "to None", to_string(m.sync),
                             m.host ? m.host->name : "the GPU family's calibrated launch times (--torch 1)");
  }
  std::cout << "GPU memory: " << r.memory_plan << '\n';
  for (const std::string& n : notes) std::cout << "note: " << n << '\n';
  if (!a.trace.empty()) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
  if (!a.report.empty()) std::cout << "report: " << a.report << '\n';
  std::cout.flush();
}

}  // namespace gpemu::cli
