// The round-based cluster simulation (cluster.h): arrivals, the policy's
// order, placement, the CPU allocation, progress at the engine's speed,
// checkpoint costs, and the skipping of rounds in which nothing can change.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>

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
  int host = -1;           // packed this round on the GPU of this active job (its index)
  std::vector<Slice> placement, previous;
  Allocation alloc;  // of the current placement
  double iter_s = 0;
  double overhead_s = 0;  // checkpoint I/O still to do before iterating
  bool ran_before = false;
  bool on_cpu = false, was_on_cpu = false;  // on its CPU configuration this round, last round
  bool packed = false;                      // shares its GPU this round (either of a pair)
  bool colocated = false;                   // its speed this round is the engine's for its company
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
    const std::string& ps = o.pack_sharing;
    if (ps != "timeslice" && ps != "mps" && ps != "priority" && (ps != "fifo" || o.node_interference))
      throw InputError(fmt::format(
          "--pack-sharing '{}': jobs packed on one GPU share it under timeslice, mps, priority or fifo (fifo not "
          "with --interference node: a node's session of jobs of several GPUs cannot hold a GPU for a whole step); "
          "mig gives each job a slice of its own, which is partitioning, not packing",
          ps));
    for (const auto& j : t.jobs) cpu_configs_ = cpu_configs_ || j.cpu_config_cpus > 0;
    for (std::size_t m = 0; m < model_gpu_.size(); ++m) index_.emplace_back(max_per_node_, nodes_.size());
    for (const GpuSpec* g : model_gpu_) gpu_models_.push_back(GpuModelCount{g, 0});
    for (const Node& n : nodes_) gpu_models_[static_cast<std::size_t>(n.model)].gpus += n.gpus;
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
        states_[k].pack_with = -1;
        states_[k].gpu_model = -1;
      }
      if (cpu_configs_)
        for (std::size_t k = 0; k < active_.size(); ++k) {
          states_[k].remaining_cpu_s = active_[k].remaining_iters * trace_.jobs[active_[k].trace_index].cpu_step_s;
          states_[k].use_cpu = false;
        }
      order.resize(active_.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      ClusterView view{now, R, total_gpus_, total_cpus_, 0, &states_, gpu_models_};
      view.iteration_s = [this](std::size_t k, int m) { return iteration_on(k, m); };
      view.packed_s = [this](std::size_t k, std::size_t g) { return packed_on(k, g); };
      try {
        policy_.order(view, order);
      } catch (const PolicyFailure& e) {  // the run so far, finished jobs' records complete
        out.stopped = e.what();
        out.stopped_at_s = now;
        break;
      }
      ++out.rounds;
      const bool waiting = place(order);
      allocate_cpus(order, out);
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
      if (!waiting && !policy_.every_round()) {
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
    out.colocations = speed_.colocations();
    out.engine_steps = engine_steps_;
    thin(out.utilisation);
    return out;
  }

 private:
  // The allocation a job gets alone, consolidated, with a GPU-proportional
  // share of the cores: the first node kind with enough GPUs of its model
  // (of GPU model `model`, when one is given; nullopt when it has too few).
  std::optional<Allocation> allocation_on(const TraceJob& j, int model) const {
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
  Allocation fair_allocation(const TraceJob& j) const {
    if (auto a = allocation_on(j, -1)) return *a;
    throw std::logic_error("fair_allocation: a job larger than the cluster passed the trace check");
  }

  // ClusterView::iteration_s: active job k on its asked GPUs of model m.
  double iteration_on(std::size_t k, int m) {
    if (m < 0 || static_cast<std::size_t>(m) >= model_gpu_.size())
      throw std::logic_error("ClusterView::iteration_s: no such GPU model");
    const TraceJob& j = trace_.jobs[active_.at(k).trace_index];
    const auto a = allocation_on(j, m);
    return a ? speed_.iteration_s(j, *a) : std::numeric_limits<double>::infinity();
  }
  // Whether a job may share a GPU: a model job of one GPU.
  static bool packable(const TraceJob& j) { return j.gpus == 1 && !j.model.empty(); }
  // ClusterView::packed_s: active jobs k and g on one GPU of the model k ran
  // on last round (else its first), with k's proportional cores shared.
  std::optional<std::pair<double, double>> packed_on(std::size_t k, std::size_t g) {
    const TraceJob& hj = trace_.jobs[active_.at(k).trace_index];
    const TraceJob& gj = trace_.jobs[active_.at(g).trace_index];
    if (k == g || !packable(hj) || !packable(gj)) return std::nullopt;
    const auto a = allocation_on(hj, states_[k].ran_on_model);
    if (!a) return std::nullopt;
    const auto t = speed_.colocated_s({{&hj, *a, 0}, {&gj, *a, 0}}, 1, a->cpus, o_.pack_sharing);
    if (!t) return std::nullopt;
    return std::make_pair((*t)[0], (*t)[1]);
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
    return o_.fidelity == Fidelity::Iteration && !a.on_cpu && !a.colocated && !a.placement.empty() &&
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

  // Packing: a job of one GPU on the GPU of a placed job of one GPU that has
  // no other guest (a slice of no GPUs of its own on the host's node).
  // Returns whether every guest was placed.
  bool place_guests(const std::vector<std::size_t>& guests) {
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

  bool place_job(Active& a, const TraceJob& j, int model) {
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

  // Gandiva's migration: makes room for `gpus` GPUs on the node of model m
  // with the most free GPUs by moving jobs placed there this round (one node
  // each, fewest GPUs first) to other nodes of the model, best fit (under
  // Tune or Greedy only to nodes that also hold their cores and memory);
  // the node, or -1 (nothing moved) when that cannot free enough. A moved
  // job's GPUs changed: it pays its checkpoint (allocate_cpus).
  long defragment(std::size_t m, int gpus) {
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
  // Moves a slice to node d (taking its GPUs there unless `take_gpus` is
  // false), and its booked cores and memory under Tune or Greedy.
  void move_slice(const TraceJob& j, Slice& s, std::size_t d, bool take_gpus = true) {
    if (take_gpus) take(d, s.gpus);
    if (o_.cpu != CpuAllocation::Prop) {
      nodes_[s.node].free_cpus += s.cpus, nodes_[s.node].free_mem += mem_need(j, s.node, s.gpus);
      nodes_[d].free_cpus -= s.cpus, nodes_[d].free_mem -= mem_need(j, d, s.gpus);
    }
    s.node = d;
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
  void allocate_cpus(const std::vector<std::size_t>& order, ClusterRun& out) {
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

  // A placed job's allocation: the checkpoint it pays when its GPUs changed
  // (a migration when it ran last round), and its speed alone on it.
  void settle(std::size_t k, const Allocation& al, ClusterRun& out) {
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

  // Guests on their hosts' GPU and cores, shared, if the engine says they
  // fit in its memory together; else the guest waits this round.
  void allocate_guests(ClusterRun& out) {
    for (std::size_t k = 0; k < active_.size(); ++k) {
      Active& a = active_[k];
      if (a.host < 0) continue;
      const Active& h = active_[static_cast<std::size_t>(a.host)];
      for (Slice& s : a.placement) s.cpus = 0;
      if (!speed_.colocated_s({{&trace_.jobs[h.trace_index], h.alloc, 0}, {&trace_.jobs[a.trace_index], h.alloc, 0}}, 1,
                              h.alloc.cpus, o_.pack_sharing)) {
        a.placement.clear();
        a.host = -1;
        continue;
      }
      states_[k].ran_on_model = states_[static_cast<std::size_t>(a.host)].ran_on_model;
      settle(k, h.alloc, out);
    }
  }

  // Co-located jobs' speeds, the engine's for their company: each packed
  // pair on its GPU (allocate_cpus left out the guests that do not fit
  // beside their hosts in the GPU's memory); with node_interference, every node's jobs
  // together (each on its GPUs, a guest on its host's; the node's cores
  // those the jobs hold). A pair's or a node's speeds hold for the round.
  void colocate() {
    std::vector<std::size_t> guests;
    for (std::size_t k = 0; k < active_.size(); ++k)
      if (active_[k].host >= 0) guests.push_back(k);
    for (std::size_t k : guests) {
      Active& a = active_[k];
      Active& h = active_[static_cast<std::size_t>(a.host)];
      const auto t =
          speed_.colocated_s({{&trace_.jobs[h.trace_index], h.alloc, 0}, {&trace_.jobs[a.trace_index], a.alloc, 0}}, 1,
                             h.alloc.cpus, o_.pack_sharing);
      if (!t) throw std::logic_error("colocate: a pair that fit does not");
      h.iter_s = (*t)[0], a.iter_s = (*t)[1];
      h.colocated = h.packed = a.colocated = a.packed = true;
      if (h.segment) h.segment->live = false;
      if (a.segment) a.segment->live = false;
    }
    if (!o_.node_interference) return;
    std::map<std::size_t, std::vector<std::size_t>> on_node;  // single-node model jobs on GPUs, by node
    for (std::size_t k = 0; k < active_.size(); ++k) {
      const Active& a = active_[k];
      if (a.on_cpu || a.placement.size() != 1 || a.alloc.nodes != 1 || trace_.jobs[a.trace_index].model.empty())
        continue;
      on_node[a.placement.front().node].push_back(k);
    }
    for (auto& [n, ks] : on_node) {
      if (ks.size() < 2) continue;
      // Hosts and lone jobs on GPUs from 0 in turn, each guest on its host's first.
      std::vector<JobSpeed::Placed> placed(ks.size());
      std::map<std::size_t, int> first;
      int next_gpu = 0, cores = 0;
      for (int pass = 0; pass < 2; ++pass)
        for (std::size_t i = 0; i < ks.size(); ++i) {
          const Active& a = active_[ks[i]];
          if ((a.host >= 0) != (pass == 1)) continue;
          int gpu = next_gpu;
          if (a.host >= 0) {
            gpu = first.at(static_cast<std::size_t>(a.host));
          } else {
            next_gpu += a.alloc.gpus;
            cores += a.alloc.cpus;
          }
          first[ks[i]] = gpu;
          placed[i] = JobSpeed::Placed{&trace_.jobs[a.trace_index], a.alloc, gpu};
        }
      const auto t = speed_.colocated_s(placed, nodes_[n].gpus, cores, o_.pack_sharing);
      if (!t) continue;  // the pairs fit alone (checked above); kept at their pairs' speeds
      for (std::size_t i = 0; i < ks.size(); ++i) {
        Active& a = active_[ks[i]];
        a.iter_s = (*t)[i];
        a.colocated = true;
        if (a.segment) a.segment->live = false;
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

  // Runs every placed job for `span` seconds from `now`; returns the jobs finished.
  std::size_t progress(double now, double span, ClusterRun& out) {
    std::size_t finished = 0;
    // A packed job whose partner finishes within the span runs alone from then.
    const auto ends_in = [](const Active& a) { return a.overhead_s + a.remaining_iters * a.iter_s; };
    alone_from_.assign(packing_ ? active_.size() : 0, std::numeric_limits<double>::infinity());
    for (std::size_t k = 0; k < alone_from_.size(); ++k) {
      const Active& g = active_[k];
      if (g.host < 0 || !g.packed) continue;
      const auto h = static_cast<std::size_t>(g.host);
      const double th = ends_in(active_[h]), tg = ends_in(g);
      if (th < tg && th < span) alone_from_[k] = th;
      if (tg < th && tg < span) alone_from_[h] = tg;
    }
    for (std::size_t k = 0; k < active_.size();) {
      Active& a = active_[k];
      JobState& st = states_[k];
      JobResult& r = out.jobs[a.trace_index];
      const bool placed = !a.placement.empty() || a.on_cpu;
      if (placed && !st.running && a.ran_before) ++r.preemptions;  // resumes after a preemption
      if (!placed) {
        if (a.segment) a.segment->live = false;
        if (st.running) st.last_run_end_s = now;
        st.running = st.packed = false;
        st.ran_on_model = -1;
        ++k;
        continue;
      }
      if (r.start_s < 0) r.start_s = now;
      if (!st.running) a.overhead_s += cluster_.job_start_s;
      a.ran_before = true;
      st.running = true;
      st.ran_on_cpu = r.on_cpu = a.on_cpu;
      st.packed = a.packed;  // (ran_on_model: set by allocate_cpus)
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
      } else {
        // At its speed until its partner (if packed) finishes, then alone
        // (at its speed alone on the same GPU and cores).
        const double alone_from = alone_from_.empty() ? std::numeric_limits<double>::infinity() : alone_from_[k];
        const double split = std::clamp(alone_from - overhead, 0.0, compute);
        const double first = split / a.iter_s;
        if (first >= a.remaining_iters) {
          held = overhead + a.remaining_iters * a.iter_s;
          a.remaining_iters = 0;
        } else if (split < compute) {
          const double alone_s = speed_.iteration_s(trace_.jobs[a.trace_index], a.alloc);
          if ((compute - split) / alone_s >= a.remaining_iters - first) {
            held = overhead + split + (a.remaining_iters - first) * alone_s;
            a.remaining_iters = 0;
          } else {
            a.remaining_iters -= first + (compute - split) / alone_s;
          }
        } else {
          a.remaining_iters -= first;
        }
        if (a.remaining_iters == 0) r.finish_s = now + held;
      }
      // A packed job holds half of its GPU's time while its partner runs.
      const double together =
          a.packed ? std::min(held, alone_from_.empty() ? held : std::min(held, alone_from_[k])) : 0.0;
      const double gpus = a.on_cpu ? 0 : trace_.jobs[a.trace_index].gpus;
      r.gpu_s += gpus * (held - 0.5 * together);
      r.cpu_s += a.alloc.cpus * held;
      r.packed_s += together;
      st.attained_gpu_s += gpus * (held - 0.5 * together);
      st.run_s += held;
      st.last_run_end_s = now + held;
      if (a.remaining_iters == 0) {
        release(a.placement);
        active_[k] = std::move(active_.back());
        active_.pop_back();
        states_[k] = states_.back();
        states_.pop_back();
        if (!alone_from_.empty()) {  // it follows its job
          alone_from_[k] = alone_from_.back();
          alone_from_.pop_back();
        }
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
  std::vector<GpuModelCount> gpu_models_;  // ClusterView::gpu_models
  std::vector<detail::FreeGpuIndex> index_;
  int max_per_node_ = 0, total_gpus_ = 0, total_cpus_ = 0;
  bool cpu_configs_ = false;        // some job of the trace has a CPU configuration
  bool packing_ = false;            // some job is packed on another's GPU this round
  std::vector<double> alone_from_;  // packing: when each job's partner finishes in the span (progress)
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
