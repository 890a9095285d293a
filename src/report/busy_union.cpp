#include "report/busy_union.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

namespace gpemu {

BusyUnion::BusyUnion(Duration window, std::size_t max_intervals, std::size_t max_bins)
    : max_intervals_(std::max<std::size_t>(2, max_intervals)),
      max_bins_(std::max<std::size_t>(2, max_bins)),
      bin_(window) {
  if (window <= 0) throw std::invalid_argument("BusyUnion: the window must be positive");
}

void BusyUnion::add(Time start, Time end) {
  start = std::max(start, folded_to_);
  if (end <= start) return;
  auto it = open_.upper_bound(start);
  if (it != open_.begin() && std::prev(it)->second >= start) --it;
  while (it != open_.end() && it->first <= end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = open_.erase(it);
  }
  open_.emplace_hint(it, start, end);
  if (open_.size() > max_intervals_) fold_older_half();
}

void BusyUnion::fold_older_half() {
  auto it = open_.begin();
  for (std::size_t n = open_.size() / 2; n > 0; --n, ++it) {
    add_to_bins(it->first, it->second);
    folded_to_ = it->second;
  }
  open_.erase(open_.begin(), it);
}

void BusyUnion::add_to_bins(Time start, Time end) {
  const auto need = static_cast<std::size_t>((end - 1) / bin_) + 1;
  if (need > max_bins_) {
    // Twice as wide: each bin the sum of two.
    for (std::size_t k = 0; k < bins_.size(); ++k) bins_[k / 2] = (k % 2 ? bins_[k / 2] : 0) + bins_[k];
    bins_.resize((bins_.size() + 1) / 2);
    bin_ *= 2;
    add_to_bins(start, end);
    return;
  }
  if (bins_.size() < need) bins_.resize(need, 0);
  for (auto k = static_cast<std::size_t>(start / bin_); k < need; ++k) {
    const Time b0 = static_cast<Time>(k) * bin_;
    bins_[k] += std::min(end, b0 + bin_) - std::max(start, b0);
  }
}

std::vector<Duration> BusyUnion::busy(Time end, Duration window) const {
  if (end <= 0) return {};
  if (window <= 0) throw std::invalid_argument("BusyUnion: the window must be positive");
  const auto windows = static_cast<std::size_t>((end - 1) / window) + 1;
  std::vector<Duration> out(windows, 0);
  // `ns` busy in [a, b), spread evenly over it: added to the windows it
  // overlaps, rounded so that the parts add up to `ns`.
  auto spread = [&](Time a, Time b, Duration ns) {
    const Duration length = b - a;
    Duration given = 0;
    for (auto k = static_cast<std::size_t>(a / window); k < windows; ++k) {
      const Time w0 = static_cast<Time>(k) * window;
      if (w0 >= b || w0 >= end) break;
      const Time hi = std::min({b, w0 + window, end});
      const Duration upto =
          ns == length
              ? hi - a
              : std::llround(static_cast<double>(ns) * static_cast<double>(hi - a) / static_cast<double>(length));
      out[k] += upto - given;
      given = upto;
    }
  };
  for (std::size_t k = 0; k < bins_.size(); ++k) {
    const Time b0 = static_cast<Time>(k) * bin_;
    if (window % bin_ == 0) {  // whole bins in a window: exact
      if (b0 < end) out[static_cast<std::size_t>(b0 / window)] += bins_[k];
    } else {
      spread(b0, b0 + bin_, bins_[k]);
    }
  }
  for (const auto& [s, e] : open_) spread(s, e, e - s);
  return out;
}

}  // namespace gpemu
