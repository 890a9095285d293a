// Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep
// Learning", OSDI 2018): its three mechanisms at the round's granularity.
// Gandiva's own code is not public; Gavel's baseline of it
// (stanford-futuredata/gavel scheduler/policies/gandiva.py, GandivaPolicy,
// read, not copied) fixed the packing rules used here.
//
// - Time slicing (section 4.1, suspend-resume): the scheduling units (a job,
//   or a packed pair) take turns as under `timeslice` (policy_timeslice.cpp):
//   those that have waited longest since they last ran first.
// - Packing (section 4.2): only while the cluster is oversubscribed (the GPUs
//   asked exceed the cluster's; Gavel: "if jobs fit in cluster, do not deploy
//   packing"), two jobs of one GPU share one GPU when the engine says they
//   fit in its memory together and their pair beats slicing: the normalised
//   throughput of the pair, the sum over the two of speed packed / speed
//   alone (Gavel's _get_normalized_throughput), exceeds 1 (time slicing the
//   two gives them 1 together). Pairs are formed best first, each lowering
//   the GPUs asked by one, until the jobs fit; a pair is undone when the
//   jobs fit without it (least gain first) or no longer gains (section 4.2's
//   "unpack"), and ends with either job. The speeds are the engine's
//   (ClusterView::packed_s: a session of the two on one GPU).
// - Migration (section 4.3): defragments() asks the placement to move jobs
//   off a node so that a waiting multi-GPU job gets its GPUs on one node;
//   each moved job pays its checkpoint's write and read.
// Gandiva's grow-shrink and its introspective profiling are not modelled:
// the engine's speeds stand in for its measurements.
#include <algorithm>
#include <map>
#include <tuple>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

// At most this many unpaired jobs are considered for new pairs each round.
constexpr std::size_t kPackCandidates = 32;

class GandivaPolicy final : public Policy {
 public:
  std::string name() const override { return "gandiva"; }
  bool defragments() const override { return true; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    std::map<std::size_t, std::size_t> at;  // trace index -> view index
    long asked = 0;
    for (std::size_t i : order) at[jobs[i].index] = i, asked += jobs[i].job->gpus;
    // Pairs whose jobs are both active and still gain, best first.
    std::vector<std::tuple<double, std::size_t, std::size_t>> kept;  // gain, host, guest (trace indices)
    for (const auto& [host, guest] : pairs_) {
      if (!at.count(host) || !at.count(guest)) continue;
      const double g = gain(view, at[host], at[guest]);
      if (g > 1) kept.emplace_back(g, host, guest);
    }
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
    // Unpack while the jobs fit without a pair: the least gain first.
    while (!kept.empty() && asked - static_cast<long>(kept.size()) + 1 <= view.total_gpus) kept.pop_back();
    pairs_.clear();
    std::vector<char> paired(jobs.size(), 0);
    for (const auto& [g, host, guest] : kept) {
      pairs_.emplace_back(host, guest);
      paired[at[host]] = paired[at[guest]] = 1;
    }
    // Pack while oversubscribed: the best new pair first.
    long demand = asked - static_cast<long>(pairs_.size());
    if (demand > view.total_gpus) {
      std::vector<std::size_t> free;
      for (std::size_t i : order)
        if (!paired[i] && jobs[i].job->gpus == 1 && !jobs[i].job->model.empty()) free.push_back(i);
      std::stable_sort(free.begin(), free.end(),
                       [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
      if (free.size() > kPackCandidates) free.resize(kPackCandidates);
      std::vector<std::tuple<double, std::size_t, std::size_t>> candidates;  // -gain, host, guest (view indices)
      for (std::size_t a = 0; a < free.size(); ++a)
        for (std::size_t b = a + 1; b < free.size(); ++b)
          if (const double g = gain(view, free[a], free[b]); g > 1) candidates.emplace_back(-g, a, b);
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
      for (const auto& [g, a, b] : candidates) {
        if (demand <= view.total_gpus) break;
        if (paired[free[a]] || paired[free[b]]) continue;
        paired[free[a]] = paired[free[b]] = 1;
        pairs_.emplace_back(jobs[free[a]].index, jobs[free[b]].index);
        --demand;
      }
    }
    // Turns between the units (a guest rides with its host), then each
    // guest right after its host, packed on its GPU.
    std::map<std::size_t, std::size_t> guest_of;  // host's view index -> guest's
    for (const auto& [host, guest] : pairs_) guest_of[at[host]] = at[guest];
    std::vector<char> is_guest(jobs.size(), 0);
    for (const auto& [h, g] : guest_of) is_guest[g] = 1;
    std::vector<std::size_t> units;
    for (std::size_t i : order)
      if (!is_guest[i]) units.push_back(i);
    slicing_->order(view, units);
    order.clear();
    for (std::size_t i : units) {
      order.push_back(i);
      if (auto it = guest_of.find(i); it != guest_of.end()) {
        order.push_back(it->second);
        jobs[it->second].pack_with = static_cast<int>(i);
      }
    }
  }

 private:
  // The pair's normalised throughput: the sum over the two of speed packed
  // over speed alone on the GPU model the host would get; 0 when they do not
  // fit together.
  static double gain(const ClusterView& view, std::size_t host, std::size_t guest) {
    const auto packed = view.packed_s(host, guest);
    if (!packed) return 0;
    const int model = std::max(0, (*view.jobs)[host].ran_on_model);
    return view.iteration_s(host, model) / packed->first + view.iteration_s(guest, model) / packed->second;
  }

  std::vector<std::pair<std::size_t, std::size_t>> pairs_;  // (host, guest) by trace index
  std::unique_ptr<Policy> slicing_ = make_timeslice_policy();
};

}  // namespace

std::unique_ptr<Policy> make_gandiva_policy() { return std::make_unique<GandivaPolicy>(); }

}  // namespace gpemu::cluster
