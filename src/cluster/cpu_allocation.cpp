// The cluster simulation's CPU allocation (simulation.h): the cores and DRAM
// of each placed job, GPU-proportional, Synergy-Tune or Synergy-Greedy, and
// the checkpoint a job pays when its GPUs changed.
#include "cluster/simulation.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace gpemu::cluster::detail {

int Simulation::greedy_need(const Active& a, const TraceJob& j, int gpus) const {
  return std::max(1, (a.best_cpus * gpus + j.gpus - 1) / j.gpus);
}

double Simulation::mem_need(const TraceJob& j, std::size_t node, int gpus) const {
  const Node& n = nodes_[node];
  return j.mem_gib > 0 ? j.mem_gib * gpus / j.gpus : n.dram_gib * gpus / n.gpus;
}

bool Simulation::holds(const Active& a, const TraceJob& j, std::size_t node, int gpus) const {
  return nodes_[node].free_cpus >= greedy_need(a, j, gpus) && nodes_[node].free_mem >= mem_need(j, node, gpus);
}

bool Simulation::greedy_cores(Active& a, const TraceJob& j, bool tune) {
  bool fits = true;
  for (const Slice& s : a.placement) fits = fits && holds(a, j, s.node, s.gpus);
  const bool kept = a.placement.size() == a.previous.size() &&
                    std::equal(a.placement.begin(), a.placement.end(), a.previous.begin(),
                               [](const Slice& x, const Slice& y) { return x.node == y.node && x.gpus == y.gpus; });
  if (!fits && tune && (kept || j.gpus > max_per_node_)) {
    book_fair_share(a, j);
    return true;
  }
  if (!fits) {
    const int model = nodes_[a.placement.front().node].model;
    const std::vector<Slice> placed = a.placement;
    release(a.placement);
    a.placement.clear();
    long pick = -1;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      if (node.model == model && node.free_gpus >= j.gpus && holds(a, j, n, j.gpus) &&
          (pick < 0 || node.free_gpus < nodes_[static_cast<std::size_t>(pick)].free_gpus))
        pick = static_cast<long>(n);
    }
    if (pick < 0 && tune) {
      for (const Slice& sl : placed) take(sl.node, sl.gpus);
      a.placement = placed;
      book_fair_share(a, j);
      return true;
    }
    if (pick < 0) return false;
    take(static_cast<std::size_t>(pick), j.gpus);
    a.placement.push_back(Slice{static_cast<std::size_t>(pick), j.gpus, 0});
  }
  for (Slice& s : a.placement) {
    s.cpus = greedy_need(a, j, s.gpus);
    nodes_[s.node].free_cpus -= s.cpus;
    nodes_[s.node].free_mem -= mem_need(j, s.node, s.gpus);
  }
  return true;
}

void Simulation::book_fair_share(Active& a, const TraceJob& j) {
  for (Slice& s : a.placement) {
    Node& n = nodes_[s.node];
    s.cpus = std::min(n.cpus * s.gpus / n.gpus, greedy_need(a, j, s.gpus));
    n.free_cpus -= s.cpus;
    n.free_mem -= std::min(n.dram_gib * s.gpus / n.gpus, mem_need(j, s.node, s.gpus));
  }
}

void Simulation::allocate_cpus(const std::vector<std::size_t>& order, ClusterRun& out) {
  if (o_.cpu == CpuAllocation::Prop) {
    for (auto& a : active_)
      for (Slice& s : a.placement) s.cpus = nodes_[s.node].cpus * s.gpus / nodes_[s.node].gpus;
  } else if (o_.cpu == CpuAllocation::Tune) {
    tune(order);
  }
  for (std::size_t k = 0; k < active_.size(); ++k) {
    Active& a = active_[k];
    if ((a.placement.empty() && !a.on_cpu) || a.host >= 0) continue;  // guests: allocate_guests
    const TraceJob& j = trace_.jobs[a.trace_index];
    if (a.on_cpu) {  // its CPU configuration: its cores, its step time there
      if (!a.was_on_cpu && a.ran_before && o_.checkpoint_cost) a.overhead_s += 2 * checkpoint_s_per_gpu_ * j.gpus;
      a.alloc = Allocation{};
      a.alloc.cpus = j.cpu_config_cpus;
      a.iter_s = j.cpu_step_s;
      a.colocated = a.packed = false;
      states_[k].ran_on_model = -1;
      continue;
    }
    Allocation al;
    const Node& first = nodes_[a.placement.front().node];
    al.gpu = first.gpu;
    al.decode_us = first.decode_us;
    states_[k].ran_on_model = first.model;  // for the next round's policy
    al.gpus = j.gpus;
    al.nodes = even_nodes(j.gpus, static_cast<int>(a.placement.size()));
    al.cpus = 0;
    for (const Slice& s : a.placement) al.cpus += s.cpus;
    al.cpus = std::max(1, al.cpus);
    settle(k, al, out);
  }
  if (packing_) allocate_guests(out);
  if (packing_ || o_.node_interference) colocate();
}

void Simulation::settle(std::size_t k, const Allocation& al, ClusterRun& out) {
  Active& a = active_[k];
  const TraceJob& j = trace_.jobs[a.trace_index];
  const bool moved = a.was_on_cpu || a.placement.size() != a.previous.size() ||
                     !std::equal(a.placement.begin(), a.placement.end(), a.previous.begin(),
                                 [](const Slice& x, const Slice& y) { return x.node == y.node && x.gpus == y.gpus; });
  if (moved && a.ran_before && o_.checkpoint_cost) a.overhead_s += 2 * checkpoint_s_per_gpu_ * j.gpus;
  if (moved && states_[k].running && !a.was_on_cpu && !a.previous.empty()) ++out.jobs[a.trace_index].migrations;
  if (moved || al.cpus != a.alloc.cpus || a.iter_s == 0 || a.alloc.gpu == nullptr || a.colocated) {
    a.alloc = al;
    a.iter_s = a.host >= 0 ? 0 : speed_.iteration_s(j, al);  // a guest's: its pair's (colocate)
    if (a.segment) a.segment->live = false;                  // a new run on the new allocation
  }
  a.colocated = a.packed = false;
}

void Simulation::tune(const std::vector<std::size_t>& order) {
  std::vector<int> spare(nodes_.size());
  for (std::size_t n = 0; n < nodes_.size(); ++n) spare[n] = nodes_[n].cpus;
  std::vector<int> want(active_.size(), 0);
  for (std::size_t k : order) {
    Active& a = active_[k];
    if (a.placement.empty() || a.host >= 0) continue;  // a guest shares its host's cores
    const TraceJob& j = trace_.jobs[a.trace_index];
    int best = j.cpus;
    if (best == 0) {
      Allocation al;
      al.gpu = nodes_[a.placement.front().node].gpu;
      al.decode_us = nodes_[a.placement.front().node].decode_us;
      al.gpus = j.gpus;
      al.nodes = even_nodes(j.gpus, static_cast<int>(a.placement.size()));
      int max_cpus = 0;
      for (const Slice& s : a.placement) max_cpus += nodes_[s.node].cpus;
      best = speed_.best_cpus(j, al, max_cpus);  // 0: its speed does not depend on cores
    }
    want[k] = best;
    // First pass: min(proportional share, best) on each node.
    for (Slice& s : a.placement) {
      const int prop = nodes_[s.node].cpus * s.gpus / nodes_[s.node].gpus;
      const int share = std::max(1, best * s.gpus / j.gpus);
      s.cpus = std::min(prop, share);
      spare[s.node] -= s.cpus;
    }
  }
  // Second pass: the spare cores to those that want more, in order.
  for (std::size_t k : order) {
    Active& a = active_[k];
    if (a.host >= 0) continue;
    const TraceJob& j = trace_.jobs[a.trace_index];
    for (Slice& s : a.placement) {
      const int share = std::max(1, want[k] * s.gpus / j.gpus);
      const int extra = std::min(spare[s.node], std::max(0, share - s.cpus));
      s.cpus += extra;
      spare[s.node] -= extra;
    }
  }
}

}  // namespace gpemu::cluster::detail
