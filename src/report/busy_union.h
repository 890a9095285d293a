// The union of busy intervals (kernels of several jobs on one GPU) that
// arrive one by one, roughly but not exactly in time order, in memory that
// does not grow with the intervals: a GPU's utilisation over a long run.
//
// Intervals are kept coalesced (touching or overlapping ones merge). Past
// `max_intervals` disjoint ones, the older half is folded into busy time
// per bin of the window asked (bins doubled in width when more than
// `max_bins` are needed), and an interval that arrives later for time
// already folded counts only from there on. So the figures are exact while a
// run has at most `max_intervals` idle gaps, or while intervals arrive
// within max_intervals / 2 gaps of their time (a job's kernels settle a few
// steps after they run); window figures stay exact while the bins are the
// asked window, and a bin that straddles two windows is split between them
// in proportion past that. docs/decisions.md has the reasons.
//
// Thread safety: none; a caller that adds from several threads locks.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "gpemu/time.h"

namespace gpemu {

class BusyUnion {
 public:
  explicit BusyUnion(Duration window, std::size_t max_intervals = std::size_t{1} << 15,
                     std::size_t max_bins = std::size_t{1} << 19);
  void add(Time start, Time end);
  // Busy ns of each window [k w, (k + 1) w) of [0, end), the last cut at end;
  // `window` a whole multiple of the constructor's.
  std::vector<Duration> busy(Time end, Duration window) const;
  // Intervals and bins held: what memory the union takes.
  std::size_t stored() const { return open_.size() + bins_.size(); }

 private:
  void fold_older_half();
  void add_to_bins(Time start, Time end);
  std::size_t max_intervals_, max_bins_;
  std::map<Time, Time> open_;  // start -> end: disjoint, not touching, after folded_to_
  Time folded_to_ = 0;         // busy time before this is in bins_
  Duration bin_;               // bins_[k] is the busy ns of [k bin_, (k + 1) bin_)
  std::vector<Duration> bins_;
};

}  // namespace gpemu
