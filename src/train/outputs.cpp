#include "gpemu/train.h"
#include "train/summary_json.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpemu::train {
namespace {

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
double pct(Duration part, Duration whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
std::string percent(double v) { return fmt::format("{:.1f}%", v); }

std::int64_t total_iterations(const RunSummary& r) {
  std::int64_t n = 0;
  for (const GpuSummary& g : r.per_gpu) n += g.iterations;
  return n;
}

}  // namespace

nlohmann::json loader_stats_json(const std::vector<pipeline::LoaderStats>& stats, std::uint64_t dataset_bytes) {
  pipeline::LoaderStats t;
  for (const pipeline::LoaderStats& s : stats) {
    t.samples += s.samples;
    t.bytes_read += s.bytes_read;
    t.cache_hits += s.cache_hits;
    t.cache_misses += s.cache_misses;
    t.cache_resident_bytes += s.cache_resident_bytes;
    t.page_cache_hits += s.page_cache_hits;
    t.page_cache_misses += s.page_cache_misses;
    t.page_cache_resident_bytes += s.page_cache_resident_bytes;
    t.storage_requests += s.storage_requests;
    t.storage_bytes += s.storage_bytes;
  }
  auto pct = [](double part, double whole) {
    return whole > 0 ? nlohmann::json(100.0 * part / whole) : nlohmann::json();
  };
  nlohmann::json j = {
      {"samples", t.samples},
      {"bytes_read", t.bytes_read},
      {"cache_hits", t.cache_hits},
      {"cache_misses", t.cache_misses},
      {"cache_hit_pct", pct(static_cast<double>(t.cache_hits), static_cast<double>(t.cache_hits + t.cache_misses))},
      {"cache_resident_pct", pct(static_cast<double>(t.cache_resident_bytes), static_cast<double>(dataset_bytes))}};
  if (t.page_cache_hits + t.page_cache_misses > 0) {
    j["page_cache_hits"] = t.page_cache_hits;
    j["page_cache_hit_pct"] =
        pct(static_cast<double>(t.page_cache_hits), static_cast<double>(t.page_cache_hits + t.page_cache_misses));
    j["page_cache_resident_pct"] =
        pct(static_cast<double>(t.page_cache_resident_bytes), static_cast<double>(dataset_bytes));
    j["storage_requests"] = t.storage_requests;
    j["bytes_from_storage"] = t.storage_bytes;
  }
  return j;
}

nlohmann::json summary_json(const RunRecord& rec) {
  const RunSummary r = summarize(rec);
  const std::int64_t its = total_iterations(r);
  nlohmann::json epoch_times = nlohmann::json::array();
  for (const EpochSummary& e : r.epochs) epoch_times.push_back(to_seconds(e.end - e.start));
  nlohmann::json j = {{"gpu", r.gpu},
                      {"gpus", r.gpus},
                      {"nodes", rec.nodes},
                      {"network", rec.nodes > 1 ? nlohmann::json(rec.network) : nlohmann::json()},
                      {"model", r.model},
                      {"batch_size", r.batch_size},
                      {"clock", r.clock},
                      {"iterations", r.iterations},
                      {"samples", r.samples},
                      {"epochs", r.epochs.size()},
                      {"epoch_s", r.mean_epoch_s()},
                      {"epoch_times_s", epoch_times},
                      {"elapsed_s", to_seconds(r.elapsed)},
                      {"iterations_per_s", r.iterations_per_s},
                      {"samples_per_s", r.samples_per_s},
                      {"gpu_util_pct", r.gpu_util_pct},
                      {"data_stall_pct", r.data_stall_pct},
                      {"fetch_stall_pct", r.fetch_stall_pct},
                      {"prep_stall_pct", r.prep_stall_pct},
                      {"h2d_pct", r.h2d_pct},
                      {"forward_ms_mean", its ? to_ms(r.forward_total) / static_cast<double>(its) : 0.0},
                      {"backward_ms_mean", its ? to_ms(r.backward_total) / static_cast<double>(its) : 0.0},
                      {"peak_allocated_mib", mib(r.peak_allocated_bytes)},
                      {"peak_reserved_mib", mib(r.peak_reserved_bytes)},
                      {"note", r.cost.note},
                      {"source", r.source},
                      {"memory_plan", r.memory_plan}};
  if (r.gpus > 1) {
    j["all_reduce_pct"] = r.all_reduce_pct;
    j["all_reduces"] = r.all_reduces;
    j["buckets"] = r.buckets;
    j["all_reduce_mib_per_iteration"] = mib(r.all_reduce_bytes);
    j["backward_split"] = r.backward_split;
    nlohmann::json per = nlohmann::json::array();
    for (const GpuSummary& g : r.per_gpu)
      per.push_back({{"gpu", g.gpu},
                     {"iterations", g.iterations},
                     {"samples", g.samples},
                     {"gpu_util_pct", pct(g.compute_busy, r.elapsed)},
                     {"data_stall_pct", pct(g.data_stall, r.elapsed)},
                     {"h2d_pct", pct(g.h2d, r.elapsed)},
                     {"all_reduce_pct", pct(g.all_reduce_wait, r.elapsed)},
                     {"peak_allocated_mib", mib(g.peak_allocated_bytes)}});
    j["per_gpu"] = per;
  }
  return j;
}

std::vector<SummaryRow> summary_rows(const RunRecord& rec) {
  const RunSummary r = summarize(rec);
  std::vector<SummaryRow> rows;
  const double epoch_s = r.mean_epoch_s();
  rows.push_back({r.epochs.size() > 1 ? "epoch time (mean)" : "epoch time",
                  r.epochs.empty() ? std::string("none finished") : fmt::format("{:.3f} s", epoch_s)});
  rows.push_back({"samples/s", fmt::format("{:.1f}", r.samples_per_s)});
  rows.push_back({"GPU utilization", percent(r.gpu_util_pct)});
  rows.push_back({"data stall share", fmt::format("{} (fetch {}, prep {})", percent(r.data_stall_pct),
                                                  percent(r.fetch_stall_pct), percent(r.prep_stall_pct))});
  rows.push_back({"H2D share", percent(r.h2d_pct)});
  if (r.gpus > 1)
    rows.push_back({"all-reduce share",
                    fmt::format("{} exposed ({} all-reduces in {} buckets/iteration, {:.1f} MiB)",
                                percent(r.all_reduce_pct), r.all_reduces, r.buckets, mib(r.all_reduce_bytes))});
  rows.push_back({"peak GPU memory", fmt::format("{:.1f} MiB allocated, {:.1f} MiB reserved",
                                                 mib(r.peak_allocated_bytes), mib(r.peak_reserved_bytes))});
  rows.push_back({"iterations", r.gpus > 1 ? fmt::format("{} per GPU", r.iterations) : std::to_string(r.iterations)});
  rows.push_back({"samples", std::to_string(r.samples)});
  return rows;
}

RunReport make_run_report(const RunRecord& rec, std::vector<SummaryRow> configuration) {
  const RunSummary r = summarize(rec);
  RunReport rep;
  rep.title = fmt::format("{} on {}x {}, batch {}", r.model, r.gpus, r.gpu, r.batch_size);
  rep.generator = "gpemu train";
  rep.summary = summary_rows(rec);
  const Time end = r.start + r.elapsed;
  for (const GpuSummary& g : r.per_gpu) {
    const std::string name = fmt::format("GPU {}", g.gpu);
    GpuTimeBreakdown b;
    b.gpu = name;
    const Duration accounted = g.compute_busy + g.h2d + g.data_stall + g.all_reduce_wait;
    b.components = {{"compute", to_seconds(g.compute_busy)},
                    {"H2D", to_seconds(g.h2d)},
                    {"data stall", to_seconds(g.data_stall)}};
    if (r.gpus > 1) b.components.push_back({"all-reduce wait", to_seconds(g.all_reduce_wait)});
    b.components.push_back({"other", to_seconds(std::max<Duration>(0, r.elapsed - accounted))});
    rep.breakdown.push_back(std::move(b));

    // Buckets of about 1/200 of the run, at least 1 ms.
    const Duration bucket = std::max<Duration>(kMillisecond, r.elapsed / 200);
    std::vector<BusyInterval> busy;
    busy.reserve(g.compute_intervals.size());
    for (const KernelSpan& k : g.compute_intervals) busy.push_back({k.start, k.end});
    UtilizationSeries u = utilization_from_intervals(name, busy, bucket, r.start, end);
    // Times from the run's start.
    for (UtilizationSample& s : u.samples) s.time_s -= to_seconds(r.start);
    u.end_s -= to_seconds(r.start);
    rep.utilization.push_back(std::move(u));

    BatchSeries stall;
    stall.name = r.gpus > 1 ? fmt::format("data stall per batch, GPU {}", g.gpu) : "data stall per batch";
    stall.unit = "ms";
    for (const StepRecord& b : rec.steps)
      if (b.gpu == g.gpu && b.phase == RunPhase::Train) stall.values.push_back(to_ms(b.data_stall));
    rep.per_batch.push_back(std::move(stall));
  }
  rep.stall_shares = StallShares{.fetch_stall = r.fetch_stall_pct / 100.0,
                                 .prep_stall = r.prep_stall_pct / 100.0,
                                 .compute = r.gpu_util_pct / 100.0};
  rep.configuration = std::move(configuration);
  rep.notes.push_back(fmt::format("Batches: {}.", r.source));
  rep.notes.push_back(fmt::format("GPU costs: {}", r.cost.note));
  rep.notes.push_back(
      "Data stall: time a GPU was idle because its next batch was not ready (the host was waiting in the loader's "
      "next() while the GPU had finished its previous work). Fetch and prep stall split each batch's stall by the "
      "loader's read and decode time for that batch.");
  if (r.gpus > 1) rep.notes.push_back(fmt::format("Backward split: {}.", r.backward_split));
  return rep;
}

void add_stall_spans(const RunRecord& r, Timeline& timeline) {
  if (!timeline.tracing()) return;
  for (const StepRecord& b : r.steps) {
    if (b.delivered > b.next_called)
      timeline.add_host_span(
          {fmt::format("next() batch {}", b.index), "loader wait", "train loop", b.gpu, b.next_called, b.delivered});
    if (b.data_stall > 0) {
      const Time from = std::max(b.next_called, b.gpu_idle_since);
      timeline.add_host_span({"data stall", "stall", "train loop", b.gpu, from, from + b.data_stall});
    }
  }
}

}  // namespace gpemu::train
