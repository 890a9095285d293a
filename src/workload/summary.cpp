// A run's summary: pure functions of its record (include/gpemu/job/summary.h).
#include "gpemu/job/summary.h"

#include <algorithm>
#include <map>

namespace gpemu {

namespace {
double pct(Duration part, Duration whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
}  // namespace

double RunSummary::mean_epoch_s() const {
  if (epochs.empty()) return 0;
  double s = 0;
  for (const EpochSummary& e : epochs) s += to_seconds(e.end - e.start);
  return s / static_cast<double>(epochs.size());
}

RunSummary summarize(const RunRecord& rec) {
  RunSummary res;
  res.model = rec.model;
  res.gpu = rec.gpu;
  res.gpus = rec.gpus;
  res.batch_size = rec.batch_size;
  res.clock = rec.clock;
  res.start = rec.start;
  res.cost = rec.cost;
  res.backward_split = rec.backward_split;
  res.memory_plan = rec.memory_plan;
  res.buckets = rec.buckets;
  res.all_reduce_bytes = rec.all_reduce_bytes;
  res.all_reduces = rec.all_reduces;
  if (!rec.ranks.empty()) res.source = rec.ranks.front().source;
  std::map<std::uint64_t, EpochSummary> epochs;
  Time end = rec.start;
  for (const RankRecord& rr : rec.ranks) {
    GpuSummary g;
    g.gpu = rr.gpu;
    g.iterations = rr.iterations;
    g.end = rec.start;
    g.compute_busy = rr.compute_busy;
    g.compute_intervals = rr.compute_intervals;
    g.peak_allocated_bytes = rr.peak_allocated_bytes;
    g.peak_reserved_bytes = rr.peak_reserved_bytes;
    for (const EpochMark& m : rec.epochs) {
      if (m.gpu != rr.gpu) continue;
      g.end = std::max(g.end, m.end);
      if (m.phase != RunPhase::Train) continue;
      auto [it, fresh] = epochs.try_emplace(m.epoch);
      EpochSummary& er = it->second;
      if (fresh) {
        er.epoch = m.epoch;
        er.start = m.start;
        er.end = m.end;
      } else {
        er.start = std::min(er.start, m.start);
        er.end = std::max(er.end, m.end);
      }
      er.samples += m.samples;
    }
    res.peak_allocated_bytes = std::max(res.peak_allocated_bytes, rr.peak_allocated_bytes);
    res.peak_reserved_bytes = std::max(res.peak_reserved_bytes, rr.peak_reserved_bytes);
    res.iterations = std::max(res.iterations, rr.iterations);
    res.forward_total += rr.forward_total;
    res.backward_total += rr.backward_total;
    end = std::max(end, g.end);
    res.per_gpu.push_back(std::move(g));
  }
  // The train steps' totals (RankRecord::train, kept whether or not the
  // record keeps the steps).
  for (std::size_t i = 0; i < rec.ranks.size(); ++i) {
    const StepTotals& t = rec.ranks[i].train;
    GpuSummary& g = res.per_gpu[i];
    // A run stopped early (keep_partial) has no mark for the phase it was
    // in; its steps still count, so the time they took counts too.
    if (t.steps > 0) g.end = std::max(g.end, t.end);
    end = std::max(end, g.end);
    g.samples += t.samples;
    g.data_stall += t.data_stall;
    g.fetch_stall += t.fetch_stall;
    g.prep_stall += t.prep_stall;
    g.h2d += t.h2d;
    g.all_reduce_wait += t.all_reduce_wait;
    res.samples += t.samples;
  }
  for (auto& [e, er] : epochs) res.epochs.push_back(er);
  res.elapsed = end - rec.start;
  const double secs = to_seconds(res.elapsed);
  res.samples_per_s = secs > 0 ? static_cast<double>(res.samples) / secs : 0;
  res.iterations_per_s = secs > 0 ? static_cast<double>(res.iterations) / secs : 0;
  const double n = static_cast<double>(std::max<std::size_t>(1, res.per_gpu.size()));
  for (const GpuSummary& g : res.per_gpu) {
    res.gpu_util_pct += pct(g.compute_busy, res.elapsed) / n;
    res.data_stall_pct += pct(g.data_stall, res.elapsed) / n;
    res.fetch_stall_pct += pct(g.fetch_stall, res.elapsed) / n;
    res.prep_stall_pct += pct(g.prep_stall, res.elapsed) / n;
    res.h2d_pct += pct(g.h2d, res.elapsed) / n;
    res.all_reduce_pct += pct(g.all_reduce_wait, res.elapsed) / n;
  }
  return res;
}

}  // namespace gpemu
