// What the max-min policies share: whether the set of active jobs changed
// since their allocation was computed (Gavel recomputes it then).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "gpemu/cluster.h"

namespace gpemu::cluster::detail {

// Whether the jobs of `order` (by trace index) are other than `ids`; when
// they are, `ids` becomes them.
inline bool active_set_changed(const std::vector<JobState>& jobs, const std::vector<std::size_t>& order,
                               std::vector<std::size_t>& ids) {
  std::vector<std::size_t> now;
  now.reserve(order.size());
  for (std::size_t i : order) now.push_back(jobs[i].index);
  std::sort(now.begin(), now.end());
  if (now == ids) return false;
  ids = std::move(now);
  return true;
}

}  // namespace gpemu::cluster::detail
