// The cluster simulation's placement (simulation.h): which nodes' GPUs each job
// gets in the policy's order, packing on another job's GPU, and Gandiva's migration.
#include "cluster/simulation.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace gpemu::cluster::detail {

int even_nodes(int gpus, int spanned) {
  for (int d = std::max(1, spanned); d <= gpus; ++d)
    if (gpus % d == 0 && gpus / d <= kMaxGpusPerNode) return d;
  return gpus;
}

std::optional<Allocation> Simulation::allocation_on(const TraceJob& j, int model) const {
  for (const auto& kind : cluster_.nodes) {
    if (model >= 0 && kind.gpu != model_gpu_[static_cast<std::size_t>(model)]) continue;
    long have = 0;
    for (const auto& k2 : cluster_.nodes)
      if (k2.gpu == kind.gpu) have += static_cast<long>(k2.gpus) * k2.count;
    if (have < j.gpus) continue;
    Allocation a;
    a.gpu = kind.gpu;
    a.gpus = j.gpus;
    a.nodes = even_nodes(j.gpus, (j.gpus + kind.gpus - 1) / kind.gpus);
    a.cpus = std::max(1, kind.cpus * j.gpus / kind.gpus);
    a.decode_us = kind.decode_us;
    return a;
  }
  return std::nullopt;
}

Allocation Simulation::fair_allocation(const TraceJob& j) const {
  if (auto a = allocation_on(j, -1)) return *a;
  throw std::logic_error("fair_allocation: a job larger than the cluster passed the trace check");
}

void Simulation::take(std::size_t n, int gpus) {
  Node& node = nodes_[n];
  index_[static_cast<std::size_t>(node.model)].update(n, node.free_gpus, node.free_gpus - gpus);
  node.free_gpus -= gpus;
}

bool Simulation::place(const std::vector<std::size_t>& order) {
  for (auto& a : active_) {
    release(a.placement);
    a.previous = std::move(a.placement);
    a.placement.clear();
    a.was_on_cpu = a.on_cpu;
    a.on_cpu = false;
    a.host = -1;
  }
  if (o_.cpu != CpuAllocation::Prop)
    for (Node& n : nodes_) n.free_cpus = n.cpus, n.free_mem = n.dram_gib;
  bool waiting = false;
  long free_total = total_gpus_, free_cpus = total_cpus_;
  std::vector<std::size_t> guests;
  for (std::size_t k : order) {
    Active& a = active_[k];
    const TraceJob& j = trace_.jobs[a.trace_index];
    if (states_[k].pack_with >= 0) {  // beside its host, once the hosts are placed
      guests.push_back(k);
      continue;
    }
    if (cpu_configs_ && states_[k].use_cpu && j.cpu_config_cpus > 0) {
      a.on_cpu = free_cpus >= j.cpu_config_cpus;
      waiting = waiting || !a.on_cpu;
      if (a.on_cpu) free_cpus -= j.cpu_config_cpus;
      continue;
    }
    if (free_total < j.gpus) {
      waiting = true;
      if (free_total == 0 && !cpu_configs_) break;
      continue;
    }
    if (!place_job(a, j, states_[k].gpu_model) ||
        (o_.cpu != CpuAllocation::Prop && !greedy_cores(a, j, o_.cpu == CpuAllocation::Tune))) {
      waiting = true;
      continue;
    }
    free_total -= j.gpus;
    if (!cpu_configs_) continue;  // the pool matters to CPU configurations only
    if (j.cpus > 0) {
      free_cpus -= j.cpus;
    } else {
      for (const Slice& s : a.placement) free_cpus -= nodes_[s.node].cpus * s.gpus / nodes_[s.node].gpus;
    }
  }
  packing_ = !guests.empty();
  return (packing_ && !place_guests(guests)) || waiting;
}

bool Simulation::place_guests(const std::vector<std::size_t>& guests) {
  bool all = true;
  std::vector<char> hosting(active_.size(), 0);
  for (std::size_t k : guests) {
    Active& a = active_[k];
    const auto h = static_cast<std::size_t>(states_[k].pack_with);
    const bool ok = h < active_.size() && h != k && !hosting[h] && packable(trace_.jobs[a.trace_index]) &&
                    packable(trace_.jobs[active_[h].trace_index]) && active_[h].placement.size() == 1 &&
                    active_[h].host < 0 && states_[h].pack_with < 0;
    if (!ok) {
      all = false;
      continue;
    }
    hosting[h] = 1;
    a.host = static_cast<int>(h);
    a.placement.push_back(Slice{active_[h].placement.front().node, 0, 0});
  }
  return all;
}

bool Simulation::place_job(Active& a, const TraceJob& j, int model) {
  // Where it ran, if those GPUs are still free: no migration.
  bool same = !a.previous.empty();
  for (const Slice& s : a.previous)
    same = same && s.gpus > 0 && nodes_[s.node].free_gpus >= s.gpus && (model < 0 || nodes_[s.node].model == model);
  if (same) {
    for (const Slice& s : a.previous) take(s.node, s.gpus);
    a.placement = a.previous;
    return true;
  }
  for (std::size_t m = 0; m < index_.size(); ++m) {
    if (model >= 0 && m != static_cast<std::size_t>(model)) continue;
    auto& idx = index_[m];
    if (idx.total() < j.gpus) continue;
    if (j.gpus <= max_per_node_) {
      long n = idx.best_fit(j.gpus);
      if (n < 0 && policy_.defragments()) n = defragment(m, j.gpus);
      if (n >= 0) {
        take(static_cast<std::size_t>(n), j.gpus);
        a.placement.push_back(Slice{static_cast<std::size_t>(n), j.gpus, 0});
        return true;
      }
    }
    // Spread over the nodes with the most free GPUs.
    int left = j.gpus;
    while (left > 0) {
      const auto n = static_cast<std::size_t>(idx.most_free());
      const int g = std::min(left, nodes_[n].free_gpus);
      take(n, g);
      a.placement.push_back(Slice{n, g, 0});
      left -= g;
    }
    return true;
  }
  return false;
}

long Simulation::defragment(std::size_t m, int gpus) {
  auto& idx = index_[m];
  const long target = idx.most_free();
  if (target < 0) return -1;
  const auto n = static_cast<std::size_t>(target);
  std::vector<std::size_t> movable;
  for (std::size_t k = 0; k < active_.size(); ++k)
    if (active_[k].placement.size() == 1 && active_[k].placement.front().node == n &&
        active_[k].placement.front().gpus > 0)
      movable.push_back(k);
  std::stable_sort(movable.begin(), movable.end(), [&](std::size_t x, std::size_t y) {
    return active_[x].placement.front().gpus < active_[y].placement.front().gpus;
  });
  int freed = nodes_[n].free_gpus;
  take(n, freed);  // hidden from the index while jobs move off it
  std::vector<std::size_t> moved;
  for (std::size_t k : movable) {
    if (freed >= gpus) break;
    Slice& s = active_[k].placement.front();
    const TraceJob& j = trace_.jobs[active_[k].trace_index];
    long dest = idx.best_fit(s.gpus);
    if (o_.cpu != CpuAllocation::Prop) {  // a node that also holds its cores and memory
      dest = -1;
      for (std::size_t d = 0; d < nodes_.size() && dest < 0; ++d)
        if (d != n && nodes_[d].model == static_cast<int>(m) && nodes_[d].free_gpus >= s.gpus &&
            nodes_[d].free_cpus >= s.cpus && nodes_[d].free_mem >= mem_need(j, d, s.gpus))
          dest = static_cast<long>(d);
    }
    if (dest < 0) continue;
    move_slice(j, s, static_cast<std::size_t>(dest));
    freed += s.gpus;
    moved.push_back(k);
  }
  if (freed < gpus)  // undo
    for (std::size_t k : moved) {
      Slice& s = active_[k].placement.front();
      release({Slice{s.node, s.gpus, 0}});
      freed -= s.gpus;
      move_slice(trace_.jobs[active_[k].trace_index], s, n, false);
    }
  release({Slice{n, freed, 0}});
  return freed >= gpus ? target : -1;
}

void Simulation::move_slice(const TraceJob& j, Slice& s, std::size_t d, bool take_gpus) {
  if (take_gpus) take(d, s.gpus);
  if (o_.cpu != CpuAllocation::Prop) {
    nodes_[s.node].free_cpus += s.cpus, nodes_[s.node].free_mem += mem_need(j, s.node, s.gpus);
    nodes_[d].free_cpus -= s.cpus, nodes_[d].free_mem -= mem_need(j, d, s.gpus);
  }
  s.node = d;
}

void Simulation::release(const std::vector<Slice>& placement) {
  for (const Slice& s : placement) {
    Node& node = nodes_[s.node];
    index_[static_cast<std::size_t>(node.model)].update(s.node, node.free_gpus, node.free_gpus + s.gpus);
    node.free_gpus += s.gpus;
  }
}

}  // namespace gpemu::cluster::detail
