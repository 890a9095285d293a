// The GPUs of a job of several (PlacementPolicy::place_gpus): the default,
// and the free GPUs of one node or of several that the policies give.
#include <algorithm>
#include <span>
#include <vector>

#include "gpemu/session.h"

namespace gpemu {

std::vector<int> PlacementPolicy::place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const {
  if (job.nodes > 1) return free_gpus_of_nodes(job, gpus);
  if (job.gpus > 1) return free_gpus_of_one_node(job, gpus);
  const int g = place(job, gpus);
  return g < 0 ? std::vector<int>{} : std::vector<int>{g};
}

std::vector<int> free_gpus_of_one_node(const PlacementRequest& job, std::span<const GpuLoad> gpus) {
  if (!job.want.empty()) {
    for (const int g : job.want)
      if (g < 0 || static_cast<std::size_t>(g) >= gpus.size() || gpus[static_cast<std::size_t>(g)].jobs > 0) return {};
    return job.want;
  }
  std::vector<int> out;
  for (const GpuLoad& g : gpus) {
    if (job.gpu >= 0 && g.index < job.gpu) continue;
    if (!out.empty() && gpus[static_cast<std::size_t>(out.front())].node != g.node) {
      if (job.gpu >= 0) break;
      out.clear();
    }
    if (g.jobs == 0) {
      out.push_back(g.index);
    } else if (job.gpu >= 0) {
      break;  // the GPUs from the one it names must all be free
    }
    if (static_cast<int>(out.size()) == job.gpus) return out;
  }
  return {};
}

std::vector<int> free_gpus_of_nodes(const PlacementRequest& job, std::span<const GpuLoad> gpus) {
  if (!job.want.empty()) return free_gpus_of_one_node(job, gpus);  // its own GPUs, all free
  const int per = job.gpus / std::max(1, job.nodes);
  std::vector<int> out, node;  // the GPUs taken; the current node's free ones
  for (std::size_t i = 0; i < gpus.size() && static_cast<int>(out.size()) < job.gpus; ++i) {
    if (gpus[i].jobs == 0 && static_cast<int>(node.size()) < per) node.push_back(gpus[i].index);
    if (i + 1 == gpus.size() || gpus[i + 1].node != gpus[i].node) {  // the node's last GPU
      if (static_cast<int>(node.size()) == per) out.insert(out.end(), node.begin(), node.end());
      node.clear();
    }
  }
  return static_cast<int>(out.size()) == job.gpus ? out : std::vector<int>{};
}

}  // namespace gpemu
