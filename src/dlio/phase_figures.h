// DLIO's metrics of one phase (training's or evaluation's): the records a
// rank's epoch is made of (its steps, in blocks between the checkpoints written
// inside an epoch), DLIO's compute_metrics_train over a block, and the means
// over ranks and epochs (PhaseFigures). The runner (runner.cpp) builds the
// records from the job's observer hooks and hands each rank's epoch over as it ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "gpemu/dlio/config.h"
#include "gpemu/dlio/result.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/time.h"

namespace gpemu::dlio::detail {

// --- Records ------------------------------------------------------------------

struct DlioStep {
  std::uint64_t index = 0;  // 0-based within the epoch
  Duration load = 0;        // start of loading -> batch in hand (DLIO's batch_loaded)
  Duration compute = 0;     // start of compute -> synchronize returned (DLIO's compute)
  Duration proc = 0;        // start of loading -> end of compute (DLIO's batch_processed)
  Duration emulated = 0;    // the kernels' emulated durations
  std::uint64_t bytes = 0;  // sample bytes of the batch
  std::uint64_t samples = 0;
};

// What DLIO's compute_metrics_train reads of a block: the first
// exclude_start steps of the block and the steps among the last exclude_end
// of the epoch are left out. Summed as the steps come, so a run's memory
// does not grow with its steps; each step's row is kept only when asked
// (DlioRunOptions::record_steps).
struct Exclusion {
  std::uint64_t epoch_steps = 0;
  int exclude_start = 0, exclude_end = 0;
};

struct Block {
  Time start = 0, end = 0;
  std::uint64_t steps = 0, measured = 0, samples = 0, bytes = 0;
  Duration excluded = 0, compute = 0, emulated = 0, load = 0;
  std::vector<DlioStep> rows;

  void add(const DlioStep& s, const Exclusion& x, bool keep_row) {
    const bool out = steps < static_cast<std::uint64_t>(x.exclude_start) ||
                     s.index + static_cast<std::uint64_t>(x.exclude_end) >= x.epoch_steps;
    ++steps;
    if (keep_row) rows.push_back(s);
    if (out) {
      excluded += s.proc;
      return;
    }
    ++measured;
    samples += s.samples;
    compute += s.compute;
    emulated += s.emulated;
    load += s.load;
    bytes += s.bytes;
  }
};

struct RankPhase {
  int rank = 0;
  int epoch = 0;
  std::vector<Block> blocks;
};

struct Figures {
  std::uint64_t steps = 0, measured = 0, samples = 0;
  double au_pct = 0, samples_per_s = 0, bytes_per_s = 0;
  double compute_s = 0, total_s = 0, emulated_s = 0, load_wait_s = 0;
};

// One phase's (training's or evaluation's) figures over ranks: per epoch the
// AU is the mean over ranks (DLIO's allreduce / size), samples/s and MB/s are
// summed over ranks; the phase's figures are the means over its epochs. A
// rank's epoch comes in as it ends; once every rank has ended it, the epoch is
// folded into the totals, handed to `on_epoch` and kept in per_epoch only
// when the caller asks (DlioRunOptions::keep_epochs), so what a run keeps does
// not grow with its epochs. Each rank ends its epochs in order, so epochs
// complete in order. Not thread-safe: the observer locks around it.
class PhaseFigures {
 public:
  PhaseFigures(std::size_t ranks, const DlioRunOptions& o, bool train) : ranks_(ranks), o_(o), train_(train) {}

  void add(std::size_t gpu, RankPhase p);

  // The phase's figures; hands per_epoch over (call once, after the run).
  DlioPhaseResult take_result(const DlioWorkload& w);

 private:
  DlioEpoch epoch_figures(int epoch, const std::vector<std::pair<std::size_t, RankPhase>>& list);
  static std::vector<DlioStepRow> step_rows(const std::vector<std::pair<std::size_t, RankPhase>>& list);

  std::size_t ranks_;
  const DlioRunOptions& o_;
  bool train_;
  std::map<int, std::vector<std::pair<std::size_t, RankPhase>>> pending_;  // epochs not every rank has ended
  Figures overall_;
  std::uint64_t steps_per_rank_ = 0, epochs_ = 0;
  double au_mean_ = 0, au_m2_ = 0;  // the epochs' AU: running mean and sum of squared deviations
  std::vector<DlioEpoch> per_epoch_;
};

}  // namespace gpemu::dlio::detail
