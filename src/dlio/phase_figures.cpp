// DLIO's metrics of one phase (phase_figures.h).
#include "dlio/phase_figures.h"

#include <algorithm>
#include <cmath>

#include "gpemu/dlio/figures.h"

namespace gpemu::dlio::detail {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;  // DLIO's "MB"

// DLIO's compute_metrics_train for one block: total = block wall time - the
// left-out steps' proc times.
Figures block_figures(const Block& b) {
  Figures f;
  f.steps = b.steps;
  f.measured = b.measured;
  f.samples = b.samples;
  const Duration compute = b.compute, emulated = b.emulated, load = b.load;
  const std::uint64_t bytes = b.bytes;
  const Duration total = (b.end - b.start) - b.excluded;
  f.total_s = total > 0 ? to_seconds(total) : 0;
  f.compute_s = to_seconds(compute);
  f.emulated_s = to_seconds(emulated);
  f.load_wait_s = to_seconds(load);
  if (f.total_s > 0) {
    f.au_pct = compute > 0 ? 100.0 * to_seconds(compute) / f.total_s : 0;
    f.samples_per_s = static_cast<double>(f.samples) / f.total_s;
    f.bytes_per_s = static_cast<double>(bytes) / f.total_s;
  }
  return f;
}

// One rank's epoch: blocks weighted by their steps (DLIO's end_train).
Figures rank_figures(const RankPhase& p) {
  Figures f;
  double weight = 0;
  for (const Block& b : p.blocks) {
    const Figures bf = block_figures(b);
    const auto n = static_cast<double>(bf.steps);
    f.steps += bf.steps;
    f.measured += bf.measured;
    f.samples += bf.samples;
    f.au_pct += bf.au_pct * n;
    f.samples_per_s += bf.samples_per_s * n;
    f.bytes_per_s += bf.bytes_per_s * n;
    f.compute_s += bf.compute_s;
    f.total_s += bf.total_s;
    f.emulated_s += bf.emulated_s;
    f.load_wait_s += bf.load_wait_s;
    weight += n;
  }
  if (weight > 0) {
    f.au_pct /= weight;
    f.samples_per_s /= weight;
    f.bytes_per_s /= weight;
  }
  return f;
}

template <class M>
M metrics_of(const Figures& f) {
  M m;
  m.steps = f.steps;
  m.measured_steps = f.measured;
  m.au_pct = f.au_pct;
  m.samples_per_s = f.samples_per_s;
  m.mb_per_s = f.bytes_per_s / kMiB;
  m.compute_s = f.compute_s;
  m.total_s = f.total_s;
  m.emulated_compute_s = f.emulated_s;
  m.load_wait_s = f.load_wait_s;
  return m;
}

}  // namespace

void PhaseFigures::add(std::size_t gpu, RankPhase p) {
  const int epoch = p.epoch;
  auto& list = pending_[epoch];
  list.emplace_back(gpu, std::move(p));
  if (list.size() < ranks_) return;
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  DlioEpoch ep = epoch_figures(epoch, list);
  pending_.erase(epoch);
  if (train_ && o_.on_epoch) o_.on_epoch(ep);
  if (o_.keep_epochs) per_epoch_.push_back(std::move(ep));
}

DlioPhaseResult PhaseFigures::take_result(const DlioWorkload& w) {
  const auto epochs = static_cast<double>(epochs_);
  DlioPhaseResult r;
  r.epochs = epochs_;
  r.steps = steps_per_rank_;
  r.au_pct = epochs > 0 ? overall_.au_pct / epochs : 0.0;
  r.au_stdev_pct = epochs_ > 1 ? std::sqrt(au_m2_ / epochs) : 0.0;
  r.au_threshold_pct = 100.0 * w.metric.au;
  r.au_pass = epochs > 0 && meets_au_threshold(overall_.au_pct / epochs, 100.0 * w.metric.au);
  r.samples_per_s = epochs > 0 ? overall_.samples_per_s / epochs : 0.0;
  r.mb_per_s = epochs > 0 ? overall_.bytes_per_s / epochs / kMiB : 0.0;
  r.mb_per_s_dlio = epochs > 0 ? overall_.samples_per_s / epochs * w.dataset.record_length_bytes / kMiB : 0.0;
  r.compute_s = overall_.compute_s;
  r.total_s = overall_.total_s;
  r.emulated_compute_s = overall_.emulated_s;
  r.load_wait_s = overall_.load_wait_s;
  r.measured_steps = overall_.measured;
  if (o_.keep_epochs) r.per_epoch = std::move(per_epoch_);
  return r;
}

DlioEpoch PhaseFigures::epoch_figures(int epoch, const std::vector<std::pair<std::size_t, RankPhase>>& list) {
  Figures e;
  std::vector<DlioRankEpoch> ranks;
  for (const auto& [gpu, p] : list) {
    const Figures f = rank_figures(p);
    e.au_pct += f.au_pct;
    e.samples_per_s += f.samples_per_s;
    e.bytes_per_s += f.bytes_per_s;
    e.compute_s += f.compute_s;
    e.total_s += f.total_s;
    e.emulated_s += f.emulated_s;
    e.load_wait_s += f.load_wait_s;
    e.steps = std::max(e.steps, f.steps);
    e.measured = std::max(e.measured, f.measured);
    e.samples += f.samples;
    if (!o_.per_rank_epochs) continue;
    DlioRankEpoch re = metrics_of<DlioRankEpoch>(f);
    re.rank = p.rank;
    ranks.push_back(std::move(re));
  }
  const auto n = static_cast<double>(list.size());
  e.au_pct /= n;
  e.compute_s /= n;
  e.total_s /= n;
  e.emulated_s /= n;
  e.load_wait_s /= n;
  DlioEpoch ep = metrics_of<DlioEpoch>(e);
  ep.epoch = epoch;
  if (o_.per_rank_epochs) ep.ranks = std::move(ranks);
  if (o_.record_steps) ep.step_records = step_rows(list);
  ++epochs_;
  const double delta = e.au_pct - au_mean_;  // Welford's update
  au_mean_ += delta / static_cast<double>(epochs_);
  au_m2_ += delta * (e.au_pct - au_mean_);
  overall_.au_pct += e.au_pct;
  overall_.samples_per_s += e.samples_per_s;
  overall_.bytes_per_s += e.bytes_per_s;
  overall_.compute_s += e.compute_s;
  overall_.total_s += e.total_s;
  overall_.emulated_s += e.emulated_s;
  overall_.load_wait_s += e.load_wait_s;
  overall_.measured += e.measured;
  overall_.samples += e.samples;
  steps_per_rank_ += e.steps;
  return ep;
}

std::vector<DlioStepRow> PhaseFigures::step_rows(const std::vector<std::pair<std::size_t, RankPhase>>& list) {
  std::vector<DlioStepRow> steps;
  for (const auto& [gpu, p] : list) {
    for (std::size_t b = 0; b < p.blocks.size(); ++b) {
      for (const DlioStep& s : p.blocks[b].rows) {
        DlioStepRow row;
        row.rank = p.rank;
        row.block = b;
        row.step = s.index + 1;
        row.load_s = to_seconds(s.load);
        row.compute_s = to_seconds(s.compute);
        row.proc_s = to_seconds(s.proc);
        row.emulated_s = to_seconds(s.emulated);
        row.bytes = s.bytes;
        steps.push_back(row);
      }
    }
  }
  return steps;
}

}  // namespace gpemu::dlio::detail
