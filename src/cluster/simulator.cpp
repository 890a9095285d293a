// The round-based cluster simulation (cluster.h): arrivals, the policy's
// order, placement, the CPU allocation, progress at the engine's speed,
// checkpoint costs, and the skipping of rounds in which nothing can change.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "cluster/free_gpus.h"
#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {
namespace {

// --fidelity iteration's "small cluster".
constexpr int kMaxIterationGpus = 256;

struct Node {
  const GpuSpec* gpu = nullptr;
  int model = 0;  // index of its GPU model
  int gpus = 0, cpus = 0;
  int free_gpus = 0;
  double decode_us = 0;
  int free_cpus = 0;  // Tune, Greedy: cores not yet booked this round
  double dram_gib = 0;
  double free_mem = 0;  // Tune, Greedy: DRAM not yet booked this round, GiB
};

struct Slice {
  std::size_t node = 0;
  int gpus = 0;
  int cpus = 0;
};

// --fidelity iteration: a job's run on one allocation, from when it starts
// iterating there to when it leaves it, each iteration stepped by the engine.
struct Segment {
  bool live = false;
  double iters = 0;          // the job's remaining iterations when it began (maybe a fraction)
  double elapsed_s = 0;      // seconds of iterating in it so far
  std::vector<double> ends;  // the engine's step ends from its start, s (its first ones)
  std::int64_t steps() const { return static_cast<std::int64_t>(std::ceil(iters - 1e-9)); }
  bool complete() const { return static_cast<std::int64_t>(ends.size()) >= steps(); }
  // Seconds into the segment at which `x` iterations are done (the step in
  // flight counted by its fraction); needs the ends up to x.
  double time_at(double x) const {
    const auto k = static_cast<std::size_t>(std::floor(x));
    const double prev = k == 0 ? 0 : ends[std::min(k, ends.size()) - 1];
    return k < ends.size() && x > static_cast<double>(k) ? prev + (x - static_cast<double>(k)) * (ends[k] - prev)
                                                         : prev;
  }
  // Iterations done after e seconds of it (the step in flight by its fraction).
  double done_at(double e) const {
    const auto k = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), e) - ends.begin());
    const double prev = k == 0 ? 0 : ends[k - 1];
    const double part = k < ends.size() ? (e - prev) / (ends[k] - prev) : 0;
    return std::min(iters, static_cast<double>(k) + part);
  }
};

// The simulator's side of an active job (JobState is the policy's side).
struct Active {
  std::size_t trace_index = 0;
  double remaining_iters = 0;
  double fair_iter_s = 0;  // on its asked GPUs, consolidated, proportional cores
  double best_iter_s = 0;  // Tune, Greedy: there with its best cores (Synergy's speed-up over fair share)
  int best_cpus = 0;       // Tune, Greedy: those cores (0: its speed does not depend on them)
  std::vector<Slice> placement, previous;
  Allocation alloc;  // of the current placement
  double iter_s = 0;
  double overhead_s = 0;  // checkpoint I/O still to do before iterating
  bool ran_before = false;
  bool on_cpu = false, was_on_cpu = false;  // on its CPU configuration this round, last round
  // --fidelity iteration (out of line: a run at the speed keeps Active small).
  std::unique_ptr<Segment> segment;
};

// The smallest node count >= spanned that splits the GPUs evenly with at most
// kMaxGpusPerNode per node (the engine's multi-node job is an even split).
int even_nodes(int gpus, int spanned) {
  for (int d = std::max(1, spanned); d <= gpus; ++d)
    if (gpus % d == 0 && gpus / d <= kMaxGpusPerNode) return d;
  return gpus;
}

class Simulation {
 public:
  Simulation(const ClusterConfig& c, const Trace& t, Policy& p, const SimOptions& o, JobSpeed& s)
      : cluster_(c), trace_(t), policy_(p), o_(o), speed_(s) {
    if (!(o.round_s > 0) || !std::isfinite(o.round_s))
      throw InputError(fmt::format("--round {}: expected a positive number of seconds", o.round_s));
    std::map<std::string, int> models;
    for (const auto& kind : c.nodes) {
      auto [it, added] = models.emplace(kind.gpu->id, static_cast<int>(models.size()));
      if (added) model_gpu_.push_back(kind.gpu);
      for (int i = 0; i < kind.count; ++i) {
        nodes_.push_back(Node{kind.gpu, it->second, kind.gpus, kind.cpus, kind.gpus, kind.decode_us, 0, kind.dram_gib});
        total_cpus_ += kind.cpus;
      }
      max_per_node_ = std::max(max_per_node_, kind.gpus);
    }
    total_gpus_ = c.total_gpus();
    if (o.cpu == CpuAllocation::Greedy)
      for (const auto& j : t.jobs) {
        bool room = j.mem_gib <= 0;
        for (const auto& kind : c.nodes)
          room = room || j.mem_gib * std::min(j.gpus, kind.gpus) / j.gpus <= kind.dram_gib;
        if (!room)
          throw InputError(fmt::format(
              "job '{}' asks for {} GiB of DRAM over its {} GPUs; under --cpu-allocation greedy it would wait for "
              "ever: no node holds its share of that (lower its mem_gib, or use tune or prop)",
              j.id, j.mem_gib, j.gpus));
      }
    if (o.fidelity == Fidelity::Iteration && total_gpus_ > kMaxIterationGpus)
      throw InputError(fmt::format(
          "--fidelity iteration: the cluster has {} GPUs; stepping every iteration through the engine is for "
          "clusters of at most {} GPUs: use --fidelity speed (the memoised speed per configuration)",
          total_gpus_, kMaxIterationGpus));
    for (const auto& j : t.jobs) cpu_configs_ = cpu_configs_ || j.cpu_config_cpus > 0;
    for (std::size_t m = 0; m < model_gpu_.size(); ++m) index_.emplace_back(max_per_node_, nodes_.size());
    for (std::size_t n = 0; n < nodes_.size(); ++n)
      index_[static_cast<std::size_t>(nodes_[n].model)].insert(n, nodes_[n].gpus);
    checkpoint_s_per_gpu_ = c.checkpoint_gib * 1.073741824 / c.storage_gb_per_s;  // GiB -> GB
  }

  ClusterRun run() {
    ClusterRun out;
    out.policy = policy_.name();
    out.cpu_allocation = std::string(to_string(o_.cpu));
    out.fidelity = std::string(to_string(o_.fidelity));
    out.round_s = o_.round_s;
    out.total_gpus = total_gpus_;
    out.total_cpus = total_cpus_;
    out.jobs.resize(trace_.jobs.size());
    for (std::size_t i = 0; i < trace_.jobs.size(); ++i) {
      const TraceJob& j = trace_.jobs[i];
      JobResult& r = out.jobs[i];
      r.id = j.id, r.user = j.user, r.model = j.model.empty() ? "fixed" : j.model_spec.name;
      r.gpus = j.gpus, r.arrival_s = j.arrival_s;
    }
    const double R = o_.round_s;
    std::size_t next = 0, done = 0;
    std::int64_t round = 0;
    std::vector<std::size_t> order;
    while (done < trace_.jobs.size()) {
      const double now = static_cast<double>(round) * R;
      while (next < trace_.jobs.size() && trace_.jobs[next].arrival_s <= now) admit(next++, out);
      if (active_.empty()) {
        round = std::max(round + 1, static_cast<std::int64_t>(std::ceil(trace_.jobs[next].arrival_s / R)));
        continue;
      }
      // The remaining time a policy sees: at fair share; under Tune at the speed
      // the job ran at last round, or at its best if it did not run (Synergy's
      // remaining_duration(fair=False), whose speed-up Tune resets each round).
      for (std::size_t k = 0; k < active_.size(); ++k) {
        const Active& a = active_[k];
        const double iter_s = o_.cpu == CpuAllocation::Prop ? a.fair_iter_s
                              : states_[k].running          ? a.iter_s
                                                            : a.best_iter_s;
        states_[k].remaining_s = a.remaining_iters * iter_s;
      }
      if (cpu_configs_)
        for (std::size_t k = 0; k < active_.size(); ++k) {
          states_[k].remaining_cpu_s = active_[k].remaining_iters * trace_.jobs[active_[k].trace_index].cpu_step_s;
          states_[k].use_cpu = false;
        }
      order.resize(active_.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      ClusterView view{now, R, total_gpus_, total_cpus_, 0, &states_};
      try {
        policy_.order(view, order);
      } catch (const PolicyFailure& e) {  // the run so far, finished jobs' records complete
        out.stopped = e.what();
        out.stopped_at_s = now;
        break;
      }
      ++out.rounds;
      const bool waiting = place(order);
      allocate_cpus(order);
      if (next == trace_.jobs.size() && std::none_of(active_.begin(), active_.end(), [](const Active& a) {
            return !a.placement.empty() || a.on_cpu;
          })) {
        out.stopped = fmt::format(
            "{} left every job waiting (none ordered, or none that fits) with nothing "
            "running and no job to arrive: the run cannot go on",
            policy_.name());
        out.stopped_at_s = now;
        break;
      }
      // Rounds that can run as one: nothing waits, so nothing changes until
      // the next arrival or the first finish.
      std::int64_t k = 1;
      if (!waiting) {
        std::int64_t limit = std::numeric_limits<std::int64_t>::max();
        if (next < trace_.jobs.size())
          limit =
              std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(trace_.jobs[next].arrival_s / R)) - round);
        // The speed's finish of each job; stepped jobs' from the engine's
        // steps, looked for up to one round past what their speeds foresee
        // (a job not done by then limits the rounds to that).
        std::int64_t foreseen = limit;
        for (const Active& a : active_) {
          const std::int64_t by_speed = rounds_until(a.overhead_s + a.remaining_iters * a.iter_s);
          if (stepped(a))
            foreseen = std::min(foreseen, by_speed);
          else
            limit = std::min(limit, by_speed);
        }
        if (o_.fidelity == Fidelity::Iteration) {
          const double horizon = foreseen == std::numeric_limits<std::int64_t>::max()
                                     ? std::numeric_limits<double>::infinity()
                                     : static_cast<double>(foreseen + 1) * R;
          for (Active& a : active_) {
            if (!stepped(a)) continue;
            Segment& sg = segment(a);
            extend(a, sg.elapsed_s + std::max(0.0, horizon - a.overhead_s));
            limit = std::min(limit, rounds_until(sg.complete() ? a.overhead_s + sg.time_at(sg.iters) - sg.elapsed_s
                                                               : horizon));
          }
        }
        k = limit;
      }
      const double span = static_cast<double>(k) * R;
      sample(out, now);
      done += progress(now, span, out);
      round += k;
      if (o_.progress) o_.progress(done, trace_.jobs.size(), now + span);
    }
    for (const auto& r : out.jobs) out.makespan_s = std::max(out.makespan_s, r.finish_s);
    out.speed_configurations = speed_.configurations();
    out.engine_steps = engine_steps_;
    thin(out.utilisation);
    return out;
  }

 private:
  // The allocation a job gets alone, consolidated, with a GPU-proportional
  // share of the cores: the first node kind with enough GPUs of its model.
  Allocation fair_allocation(const TraceJob& j) const {
    for (const auto& kind : cluster_.nodes) {
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
    throw std::logic_error("fair_allocation: a job larger than the cluster passed the trace check");
  }

  void admit(std::size_t i, ClusterRun& out) {
    const TraceJob& j = trace_.jobs[i];
    Active a;
    a.trace_index = i;
    Allocation fair = fair_allocation(j);
    a.fair_iter_s = a.best_iter_s = speed_.iteration_s(j, fair);
    if (o_.cpu != CpuAllocation::Prop) {
      int node_cpus = 0;
      for (const auto& kind : cluster_.nodes)
        if (kind.gpu == fair.gpu && node_cpus == 0) node_cpus = kind.cpus;
      const int best = a.best_cpus = j.cpus > 0 ? j.cpus : speed_.best_cpus(j, fair, node_cpus * fair.nodes);
      if (best > 0) {
        fair.cpus = best;
        a.best_iter_s = speed_.iteration_s(j, fair);
      }
    }
    double iters = static_cast<double>(j.iterations);
    if (iters == 0) iters = std::max(1.0, std::round(j.duration_s / a.fair_iter_s));
    a.remaining_iters = iters;
    out.jobs[i].iterations = static_cast<std::int64_t>(iters);
    JobState s;
    s.index = i;
    s.job = &j;
    s.arrival_s = j.arrival_s;
    s.last_run_end_s = j.arrival_s;
    active_.push_back(std::move(a));
    states_.push_back(s);
  }

  // Whole rounds before `need` seconds have passed (at least one).
  std::int64_t rounds_until(double need) const {
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(need / o_.round_s)));
  }

  // --fidelity iteration: whether the job's iterations are stepped by the
  // engine (a model's on GPUs; a fixed step, on GPUs or its CPU configuration,
  // is its step either way), and its segment, begun if it is not.
  bool stepped(const Active& a) const {
    return o_.fidelity == Fidelity::Iteration && !a.on_cpu && !a.placement.empty() &&
           !trace_.jobs[a.trace_index].model.empty();
  }
  Segment& segment(Active& a) {
    if (!a.segment || !a.segment->live) {
      a.segment = std::make_unique<Segment>();
      a.segment->live = true;
      a.segment->iters = a.remaining_iters;
    }
    return *a.segment;
  }
  // Steps the segment through the engine until its ends reach `e` seconds or
  // its last iteration: a run of the first n of its steps, n at least twice
  // the last run's (each run is the segment from its start; a longer one extends a shorter).
  void extend(Active& a, double e) {
    Segment& sg = *a.segment;
    while (!sg.complete() && (sg.ends.empty() || sg.ends.back() < e)) {
      const double guess = std::isfinite(e) ? std::ceil(e / a.iter_s) + 8 : static_cast<double>(sg.steps());
      const std::int64_t n =
          std::min(sg.steps(), std::max({static_cast<std::int64_t>(std::min(guess, static_cast<double>(sg.steps()))),
                                         2 * static_cast<std::int64_t>(sg.ends.size()), std::int64_t{8}}));
      sg.ends = speed_.step_ends(trace_.jobs[a.trace_index], a.alloc, n, sg.steps());
      engine_steps_ += n;
      if (static_cast<std::int64_t>(sg.ends.size()) < n)
        throw std::logic_error("--fidelity iteration: the engine ran fewer steps than asked");
    }
  }

  void take(std::size_t n, int gpus) {
    Node& node = nodes_[n];
    index_[static_cast<std::size_t>(node.model)].update(n, node.free_gpus, node.free_gpus - gpus);
    node.free_gpus -= gpus;
  }

  // Places jobs in the policy's order; returns whether a job is left waiting.
  bool place(const std::vector<std::size_t>& order) {
    for (auto& a : active_) {
      release(a.placement);
      a.previous = std::move(a.placement);
      a.placement.clear();
      a.was_on_cpu = a.on_cpu;
      a.on_cpu = false;
    }
    if (o_.cpu != CpuAllocation::Prop)
      for (Node& n : nodes_) n.free_cpus = n.cpus, n.free_mem = n.dram_gib;
    bool waiting = false;
    long free_total = total_gpus_, free_cpus = total_cpus_;
    for (std::size_t k : order) {
      Active& a = active_[k];
      const TraceJob& j = trace_.jobs[a.trace_index];
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
      if (!place_job(a, j) || (o_.cpu != CpuAllocation::Prop && !greedy_cores(a, j, o_.cpu == CpuAllocation::Tune))) {
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
    return waiting;
  }

  bool place_job(Active& a, const TraceJob& j) {
    // Where it ran, if those GPUs are still free: no migration.
    bool same = !a.previous.empty();
    for (const Slice& s : a.previous) same = same && nodes_[s.node].free_gpus >= s.gpus;
    if (same) {
      for (const Slice& s : a.previous) take(s.node, s.gpus);
      a.placement = a.previous;
      return true;
    }
    for (std::size_t m = 0; m < index_.size(); ++m) {
      auto& idx = index_[m];
      if (idx.total() < j.gpus) continue;
      if (j.gpus <= max_per_node_) {
        const long n = idx.best_fit(j.gpus);
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

  // Synergy-Greedy: the job's best cores on each of its nodes (its share of
  // them by GPUs, at least one), or, where a node lacks them, a node of its
  // GPU model that has both the GPUs and the cores (best fit by GPUs); else
  // the job gives its GPUs back and waits.
  // Synergy-Tune (`tune`) places a newly placed job the same way (its
  // allocate_synergy_tune tries the job's whole demand first), but where no
  // node has its best cores it stays where it was placed and books its fair
  // share, min(proportional, best); a job kept where it ran does not move.
  // The cores booked here only steer placement: tune() gives the cores.
  // DRAM is part of the demand (Synergy's demand vector): the job's trace
  // mem_gib, its share by GPUs on each node, else its proportional share of
  // the node's DRAM; a node must also hold it, and the fair share books the
  // lesser of the two. It constrains placement only (a job's speed does not
  // depend on its DRAM here).
  int greedy_need(const Active& a, const TraceJob& j, int gpus) const {
    return std::max(1, (a.best_cpus * gpus + j.gpus - 1) / j.gpus);
  }
  double mem_need(const TraceJob& j, std::size_t node, int gpus) const {
    const Node& n = nodes_[node];
    return j.mem_gib > 0 ? j.mem_gib * gpus / j.gpus : n.dram_gib * gpus / n.gpus;
  }
  bool holds(const Active& a, const TraceJob& j, std::size_t node, int gpus) const {
    return nodes_[node].free_cpus >= greedy_need(a, j, gpus) && nodes_[node].free_mem >= mem_need(j, node, gpus);
  }
  bool greedy_cores(Active& a, const TraceJob& j, bool tune = false) {
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
  void book_fair_share(Active& a, const TraceJob& j) {
    for (Slice& s : a.placement) {
      Node& n = nodes_[s.node];
      s.cpus = std::min(n.cpus * s.gpus / n.gpus, greedy_need(a, j, s.gpus));
      n.free_cpus -= s.cpus;
      n.free_mem -= std::min(n.dram_gib * s.gpus / n.gpus, mem_need(j, s.node, s.gpus));
    }
  }

  // Gives a placement's GPUs back to their nodes.
  void release(const std::vector<Slice>& placement) {
    for (const Slice& s : placement) {
      Node& node = nodes_[s.node];
      index_[static_cast<std::size_t>(node.model)].update(s.node, node.free_gpus, node.free_gpus + s.gpus);
      node.free_gpus += s.gpus;
    }
  }

  // Cores of each placed job on each of its nodes (Prop or Tune; Greedy's
  // are set at placement), then its allocation and speed.
  void allocate_cpus(const std::vector<std::size_t>& order) {
    if (o_.cpu == CpuAllocation::Prop) {
      for (auto& a : active_)
        for (Slice& s : a.placement) s.cpus = nodes_[s.node].cpus * s.gpus / nodes_[s.node].gpus;
    } else if (o_.cpu == CpuAllocation::Tune) {
      tune(order);
    }
    for (auto& a : active_) {
      if (a.placement.empty() && !a.on_cpu) continue;
      const TraceJob& j = trace_.jobs[a.trace_index];
      if (a.on_cpu) {  // its CPU configuration: its cores, its step time there
        if (!a.was_on_cpu && a.ran_before && o_.checkpoint_cost) a.overhead_s += 2 * checkpoint_s_per_gpu_ * j.gpus;
        a.alloc = Allocation{};
        a.alloc.cpus = j.cpu_config_cpus;
        a.iter_s = j.cpu_step_s;
        continue;
      }
      Allocation al;
      al.gpu = nodes_[a.placement.front().node].gpu;
      al.decode_us = nodes_[a.placement.front().node].decode_us;
      al.gpus = j.gpus;
      al.nodes = even_nodes(j.gpus, static_cast<int>(a.placement.size()));
      al.cpus = 0;
      for (const Slice& s : a.placement) al.cpus += s.cpus;
      al.cpus = std::max(1, al.cpus);
      const bool moved =
          a.was_on_cpu || a.placement.size() != a.previous.size() ||
          !std::equal(a.placement.begin(), a.placement.end(), a.previous.begin(),
                      [](const Slice& x, const Slice& y) { return x.node == y.node && x.gpus == y.gpus; });
      if (moved && a.ran_before && o_.checkpoint_cost) a.overhead_s += 2 * checkpoint_s_per_gpu_ * j.gpus;
      if (moved || al.cpus != a.alloc.cpus || a.iter_s == 0 || a.alloc.gpu == nullptr) {
        a.alloc = al;
        a.iter_s = speed_.iteration_s(j, al);
        if (a.segment) a.segment->live = false;  // a new run on the new allocation
      }
    }
  }

  // Synergy-Tune (Mohan et al., OSDI 2022, section 4.3): a job never gets
  // fewer cores than its GPU-proportional share unless it does not need
  // them; jobs that need fewer give the rest back, and jobs that gain from
  // more take it in the policy's order up to their best (the engine's).
  void tune(const std::vector<std::size_t>& order) {
    std::vector<int> spare(nodes_.size());
    for (std::size_t n = 0; n < nodes_.size(); ++n) spare[n] = nodes_[n].cpus;
    std::vector<int> want(active_.size(), 0);
    for (std::size_t k : order) {
      Active& a = active_[k];
      if (a.placement.empty()) continue;
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
      const TraceJob& j = trace_.jobs[a.trace_index];
      for (Slice& s : a.placement) {
        const int share = std::max(1, want[k] * s.gpus / j.gpus);
        const int extra = std::min(spare[s.node], std::max(0, share - s.cpus));
        s.cpus += extra;
        spare[s.node] -= extra;
      }
    }
  }

  // Runs every placed job for `span` seconds from `now`; returns the jobs finished.
  std::size_t progress(double now, double span, ClusterRun& out) {
    std::size_t finished = 0;
    for (std::size_t k = 0; k < active_.size();) {
      Active& a = active_[k];
      JobState& st = states_[k];
      JobResult& r = out.jobs[a.trace_index];
      const bool placed = !a.placement.empty() || a.on_cpu;
      if (placed && !st.running && a.ran_before) ++r.preemptions;  // resumes after a preemption
      if (!placed) {
        if (a.segment) a.segment->live = false;
        if (st.running) st.last_run_end_s = now;
        st.running = false;
        ++k;
        continue;
      }
      if (r.start_s < 0) r.start_s = now;
      if (!st.running) a.overhead_s += cluster_.job_start_s;
      a.ran_before = true;
      st.running = true;
      st.ran_on_cpu = r.on_cpu = a.on_cpu;
      const double overhead = std::min(span, a.overhead_s);
      a.overhead_s -= overhead;
      const double compute = span - overhead;
      double held = span;
      if (stepped(a)) {  // the engine's steps of its segment
        Segment& sg = segment(a);
        extend(a, sg.elapsed_s + compute);
        const double end = sg.complete() ? sg.time_at(sg.iters) : std::numeric_limits<double>::infinity();
        if (sg.elapsed_s + compute >= end) {
          held = overhead + (end - sg.elapsed_s);
          a.remaining_iters = 0;
          r.finish_s = now + held;
        } else {
          sg.elapsed_s += compute;
          a.remaining_iters = std::max(0.0, sg.iters - sg.done_at(sg.elapsed_s));
        }
      } else if (const double can = compute / a.iter_s; can >= a.remaining_iters) {
        held = overhead + a.remaining_iters * a.iter_s;
        a.remaining_iters = 0;
        r.finish_s = now + held;
      } else {
        a.remaining_iters -= can;
      }
      const int gpus = a.on_cpu ? 0 : trace_.jobs[a.trace_index].gpus;
      r.gpu_s += gpus * held;
      r.cpu_s += a.alloc.cpus * held;
      st.attained_gpu_s += gpus * held;
      st.run_s += held;
      st.last_run_end_s = now + held;
      if (a.remaining_iters == 0) {
        release(a.placement);
        active_[k] = std::move(active_.back());
        active_.pop_back();
        states_[k] = states_.back();
        states_.pop_back();
        ++finished;
        continue;
      }
      ++k;
    }
    return finished;
  }

  void sample(ClusterRun& out, double now) {
    if (o_.util_every_s > 0 && !out.utilisation.empty() && now < out.utilisation.back().t_s + o_.util_every_s) return;
    UtilSample u;
    u.t_s = now;
    for (const Active& a : active_) {
      for (const Slice& s : a.placement) u.busy_gpus += s.gpus, u.busy_cpus += s.cpus;
      if (a.on_cpu) u.busy_cpus += a.alloc.cpus;
    }
    u.active_jobs = static_cast<int>(active_.size());
    out.utilisation.push_back(u);
  }

  static void thin(std::vector<UtilSample>& u) {
    constexpr std::size_t kMax = 10'000;
    if (u.size() <= kMax) return;
    const std::size_t stride = (u.size() + kMax - 1) / kMax;
    std::size_t w = 0;
    for (std::size_t i = 0; i < u.size(); i += stride) u[w++] = u[i];
    u.resize(w);
  }

  const ClusterConfig& cluster_;
  const Trace& trace_;
  Policy& policy_;
  const SimOptions& o_;
  JobSpeed& speed_;
  std::vector<Node> nodes_;
  std::vector<const GpuSpec*> model_gpu_;
  std::vector<detail::FreeGpuIndex> index_;
  int max_per_node_ = 0, total_gpus_ = 0, total_cpus_ = 0;
  bool cpu_configs_ = false;  // some job of the trace has a CPU configuration
  double checkpoint_s_per_gpu_ = 0;
  std::int64_t engine_steps_ = 0;  // --fidelity iteration
  std::vector<Active> active_;
  std::vector<JobState> states_;
};

}  // namespace

CpuAllocation parse_cpu_allocation(std::string_view text) {
  if (text == "prop") return CpuAllocation::Prop;
  if (text == "tune") return CpuAllocation::Tune;
  if (text == "greedy") return CpuAllocation::Greedy;
  throw InputError(
      fmt::format("--cpu-allocation '{}': unknown; accepted: prop (GPU-proportional cores), tune "
                  "(Synergy-Tune), greedy (Synergy-Greedy)",
                  text));
}

Fidelity parse_fidelity(std::string_view text) {
  if (text == "speed") return Fidelity::Speed;
  if (text == "iteration") return Fidelity::Iteration;
  throw InputError(fmt::format(
      "--fidelity '{}': unknown; accepted: speed (the engine's speed per configuration, memoised), iteration "
      "(every iteration stepped through the engine; clusters of at most {} GPUs)",
      text, kMaxIterationGpus));
}

std::string_view to_string(Fidelity f) { return f == Fidelity::Speed ? "speed" : "iteration"; }

std::string_view to_string(CpuAllocation a) {
  return a == CpuAllocation::Prop ? "prop" : a == CpuAllocation::Tune ? "tune" : "greedy";
}

ClusterRun simulate(const ClusterConfig& cluster, const Trace& trace, Policy& policy, const SimOptions& options,
                    JobSpeed& speed) {
  return Simulation(cluster, trace, policy, options, speed).run();
}

}  // namespace gpemu::cluster
