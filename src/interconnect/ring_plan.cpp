// Which ring a collective runs on, and how much NVLink bandwidth it gets.
//
// NCCL runs a collective over several rings at once (channels), each on its
// own NVLinks, in both directions. On a fabric of point-to-point NVLinks
// (hybrid cube-mesh, full mesh, bridges) we find the most Hamiltonian cycles
// through the participating GPUs that use disjoint NVLinks; each cycle run
// both ways is two rings, so the collective's traffic spreads over 2k links
// per GPU and direction. We emulate that as one ring (the first cycle) whose
// hops are capped at 2k links' bandwidth: the same time for the same bytes,
// with far fewer operations. docs/interconnect.md works the DGX-1 case.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"

namespace gpemu {
namespace {

using Multigraph = std::vector<std::vector<int>>;  // connections between local GPU indices

// Every Hamiltonian cycle through 0..n-1 (n >= 3) once: starting at 0, in the
// orientation whose second node is smaller than its last.
std::vector<std::vector<int>> hamiltonian_cycles(const Multigraph& g) {
  const int n = static_cast<int>(g.size());
  std::vector<std::vector<int>> cycles;
  std::vector<int> path{0};
  std::vector<bool> used(n, false);
  used[0] = true;
  std::function<void()> extend = [&] {
    const int last = path.back();
    if (static_cast<int>(path.size()) == n) {
      if (g[last][0] > 0 && path[1] < path[n - 1]) cycles.push_back(path);
      return;
    }
    for (int next = 1; next < n; ++next) {
      if (used[next] || g[last][next] == 0) continue;
      used[next] = true;
      path.push_back(next);
      extend();
      path.pop_back();
      used[next] = false;
    }
  };
  extend();
  return cycles;
}

// The largest set of cycles that fit in the connection counts together.
std::vector<int> disjoint_cycles(const std::vector<std::vector<int>>& cycles, Multigraph g) {
  const int n = static_cast<int>(g.size());
  int bound = 1 << 30;
  for (int a = 0; a < n; ++a) {
    int degree = 0;
    for (int b = 0; b < n; ++b) degree += g[a][b];
    bound = std::min(bound, degree / 2);
  }
  std::vector<int> best, chosen;
  auto apply = [&](const std::vector<int>& c, int delta) {
    for (int p = 0; p < n; ++p) {
      const int a = c[p], b = c[(p + 1) % n];
      g[a][b] += delta;
      g[b][a] += delta;
    }
  };
  auto fits = [&](const std::vector<int>& c) {
    for (int p = 0; p < n; ++p)
      if (g[c[p]][c[(p + 1) % n]] == 0) return false;
    return true;
  };
  std::function<void(std::size_t)> search = [&](std::size_t from) {
    if (chosen.size() > best.size()) best = chosen;
    if (static_cast<int>(best.size()) >= bound) return;
    for (std::size_t i = from; i < cycles.size(); ++i) {
      if (!fits(cycles[i])) continue;
      apply(cycles[i], -1);
      chosen.push_back(static_cast<int>(i));
      search(i + 1);
      chosen.pop_back();
      apply(cycles[i], +1);
      if (static_cast<int>(best.size()) >= bound) return;
    }
  };
  search(0);
  return best;
}

}  // namespace

RingPlan Node::plan_ring(std::span<const int> gpus) const {
  if (gpus.empty()) throw InputError("ring over no GPUs: give at least one GPU of the node");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    check_gpu(gpus[i]);
    for (std::size_t j = 0; j < i; ++j)
      if (gpus[i] == gpus[j]) throw InputError(fmt::format("ring lists GPU {} twice: give each GPU once", gpus[i]));
  }
  const int n = static_cast<int>(gpus.size());
  RingPlan plan;
  plan.order.assign(gpus.begin(), gpus.end());
  if (n == 1) {
    plan.hops.push_back(Path{});
    return plan;
  }

  const bool point_to_point_nvlink =
      fabric_ == Fabric::HybridCubeMesh || fabric_ == Fabric::FullMesh || fabric_ == Fabric::NVLinkBridge;
  int links_per_gpu = 0;
  if (point_to_point_nvlink && n == 2) {
    // Two GPUs: one ring per connection between them, each direction used by one GPU.
    links_per_gpu = bricks_[gpus[0]][gpus[1]];
  } else if (point_to_point_nvlink) {
    Multigraph g(n, std::vector<int>(n, 0));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) g[a][b] = bricks_[gpus[a]][gpus[b]];
    const auto cycles = hamiltonian_cycles(g);
    const auto chosen = disjoint_cycles(cycles, g);
    if (!chosen.empty()) {
      links_per_gpu = 2 * static_cast<int>(chosen.size());
      const auto& first = cycles[chosen.front()];
      for (int p = 0; p < n; ++p) plan.order[p] = gpus[first[p]];
    }
  }

  for (int p = 0; p < n; ++p) {
    Path hop = path(plan.order[p], plan.order[(p + 1) % n]);
    if (links_per_gpu > 0) hop.rate_cap = std::min(nvlink_bps_, links_per_gpu * brick_bps_);
    plan.hops.push_back(hop);
  }
  plan.nvlinks_per_gpu = links_per_gpu;
  return plan;
}

}  // namespace gpemu
