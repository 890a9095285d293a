// Per node and epoch, what the loaders read: the figures of a run over
// several nodes (docs/pipeline.md, "Several nodes").
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "gpemu/train.h"
#include "train/summary_json.h"

namespace gpemu::train {

std::vector<NodeEpochReads> node_epoch_reads(const RunRecord& r) {
  const int nodes = std::max(1, r.nodes);
  const int per_node = std::max(1, static_cast<int>(r.loader_stats.size()) / nodes);
  std::map<std::pair<int, std::size_t>, NodeEpochReads> sums;  // (node, epoch position)
  for (std::size_t rank = 0; rank < r.loader_stats.size(); ++rank) {
    const int node = std::min(static_cast<int>(rank) / per_node, nodes - 1);
    const auto& epochs = r.loader_stats[rank].epochs;
    for (std::size_t i = 0; i < epochs.size(); ++i) {
      NodeEpochReads& s = sums[{node, i}];
      s.node = node;
      s.epoch = epochs[i].epoch;
      s.cache_hits += epochs[i].cache_hits;
      s.remote_hits += epochs[i].remote_hits;
      s.storage_requests += epochs[i].storage_requests;
      s.storage_bytes += epochs[i].storage_bytes;
      s.network_bytes += epochs[i].network_bytes;
    }
  }
  std::vector<NodeEpochReads> out;
  out.reserve(sums.size());
  for (const auto& [key, s] : sums) out.push_back(s);
  return out;
}

nlohmann::json node_epoch_reads_json(const std::vector<NodeEpochReads>& reads) {
  nlohmann::json a = nlohmann::json::array();
  for (const NodeEpochReads& s : reads)
    a.push_back({{"node", s.node},
                 {"epoch", s.epoch},
                 {"cache_hits", s.cache_hits},
                 {"remote_hits", s.remote_hits},
                 {"storage_reads", s.storage_requests},
                 {"storage_bytes", s.storage_bytes},
                 {"network_bytes", s.network_bytes}});
  return a;
}

}  // namespace gpemu::train
