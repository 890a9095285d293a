// Nodes indexed by their free GPUs, per GPU model, so the placement finds a
// best-fit node in O(GPUs per node) instead of scanning every node.
#pragma once

#include <cstddef>
#include <vector>

namespace gpemu::cluster::detail {

class FreeGpuIndex {
 public:
  // `free[i]` the free GPUs of node i (each at most max_per_node).
  FreeGpuIndex(int max_per_node, std::size_t nodes)
      : buckets_(static_cast<std::size_t>(max_per_node) + 1), pos_(nodes) {}
  void insert(std::size_t node, int free) {
    auto& b = buckets_[static_cast<std::size_t>(free)];
    pos_[node] = b.size();
    b.push_back(node);
    total_ += free;
  }
  void erase(std::size_t node, int free) {
    auto& b = buckets_[static_cast<std::size_t>(free)];
    const std::size_t p = pos_[node];
    b[p] = b.back();
    pos_[b[p]] = p;
    b.pop_back();
    total_ -= free;
  }
  void update(std::size_t node, int from, int to) {
    erase(node, from);
    insert(node, to);
  }
  // A node with the fewest free GPUs that still has `want` (best fit), or -1.
  long best_fit(int want) const {
    for (std::size_t k = static_cast<std::size_t>(want); k < buckets_.size(); ++k)
      if (!buckets_[k].empty()) return static_cast<long>(buckets_[k].back());
    return -1;
  }
  // The node with the most free GPUs (at least 1), or -1.
  long most_free() const {
    for (std::size_t k = buckets_.size() - 1; k >= 1; --k)
      if (!buckets_[k].empty()) return static_cast<long>(buckets_[k].back());
    return -1;
  }
  long total() const { return total_; }

 private:
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> pos_;
  long total_ = 0;
};

}  // namespace gpemu::cluster::detail
