// The round-based cluster simulation (cluster.h): arrivals, the policy's
// order, placement, the CPU allocation, progress at the engine's speed,
// checkpoint costs, and the skipping of rounds in which nothing can change.
// Placement is placement.cpp's, the cores cpu_allocation.cpp's; the state
// they share, simulation.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cluster/free_gpus.h"
#include "cluster/simulation.h"
#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster::detail {

Simulation::Simulation(const ClusterConfig& c, const Trace& t, Policy& p, const SimOptions& o, JobSpeed& s)
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
      for (const auto& kind : c.nodes) room = room || j.mem_gib * std::min(j.gpus, kind.gpus) / j.gpus <= kind.dram_gib;
      if (!room)
        throw InputError(fmt::format(
            "job '{}' asks for {} GiB of DRAM over its {} GPUs; under --cpu-allocation greedy it would wait for "
            "ever: no node holds its share of that (lower its mem_gib, or use tune or prop)",
            j.id, j.mem_gib, j.gpus));
    }
  if (o.fidelity == Fidelity::Iteration && total_gpus_ > kMaxIterationGpus)
    throw InputError(
        fmt::format("--fidelity iteration: the cluster has {} GPUs; stepping every iteration through the engine is for "
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

ClusterRun Simulation::run() {
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
    if (next == trace_.jobs.size() && std::none_of(active_.begin(), active_.end(),
                                                   [](const Active& a) { return !a.placement.empty() || a.on_cpu; })) {
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
          limit = std::min(limit,
                           rounds_until(sg.complete() ? a.overhead_s + sg.time_at(sg.iters) - sg.elapsed_s : horizon));
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

double Simulation::iteration_on(std::size_t k, int m) {
  if (m < 0 || static_cast<std::size_t>(m) >= model_gpu_.size())
    throw std::logic_error("ClusterView::iteration_s: no such GPU model");
  const TraceJob& j = trace_.jobs[active_.at(k).trace_index];
  const auto a = allocation_on(j, m);
  return a ? speed_.iteration_s(j, *a) : std::numeric_limits<double>::infinity();
}

std::optional<std::pair<double, double>> Simulation::packed_on(std::size_t k, std::size_t g) {
  const TraceJob& hj = trace_.jobs[active_.at(k).trace_index];
  const TraceJob& gj = trace_.jobs[active_.at(g).trace_index];
  if (k == g || !packable(hj) || !packable(gj)) return std::nullopt;
  const auto a = allocation_on(hj, states_[k].ran_on_model);
  if (!a) return std::nullopt;
  const auto t = speed_.colocated_s({{&hj, *a, 0}, {&gj, *a, 0}}, 1, a->cpus, o_.pack_sharing);
  if (!t) return std::nullopt;
  return std::make_pair((*t)[0], (*t)[1]);
}

void Simulation::admit(std::size_t i, ClusterRun& out) {
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

std::int64_t Simulation::rounds_until(double need) const {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(need / o_.round_s)));
}

bool Simulation::stepped(const Active& a) const {
  return o_.fidelity == Fidelity::Iteration && !a.on_cpu && !a.colocated && !a.placement.empty() &&
         !trace_.jobs[a.trace_index].model.empty();
}

Segment& Simulation::segment(Active& a) {
  if (!a.segment || !a.segment->live) {
    a.segment = std::make_unique<Segment>();
    a.segment->live = true;
    a.segment->iters = a.remaining_iters;
  }
  return *a.segment;
}

void Simulation::extend(Active& a, double e) {
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

void Simulation::allocate_guests(ClusterRun& out) {
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

void Simulation::colocate() {
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
    if (a.on_cpu || a.placement.size() != 1 || a.alloc.nodes != 1 || trace_.jobs[a.trace_index].model.empty()) continue;
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

std::size_t Simulation::progress(double now, double span, ClusterRun& out) {
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

void Simulation::sample(ClusterRun& out, double now) {
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

void Simulation::thin(std::vector<UtilSample>& u) {
  constexpr std::size_t kMax = 10'000;
  if (u.size() <= kMax) return;
  const std::size_t stride = (u.size() + kMax - 1) / kMax;
  std::size_t w = 0;
  for (std::size_t i = 0; i < u.size(); i += stride) u[w++] = u[i];
  u.resize(w);
}

}  // namespace gpemu::cluster::detail

namespace gpemu::cluster {

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
      text, detail::kMaxIterationGpus));
}

std::string_view to_string(Fidelity f) { return f == Fidelity::Speed ? "speed" : "iteration"; }

std::string_view to_string(CpuAllocation a) {
  return a == CpuAllocation::Prop ? "prop" : a == CpuAllocation::Tune ? "tune" : "greedy";
}

ClusterRun simulate(const ClusterConfig& cluster, const Trace& trace, Policy& policy, const SimOptions& options,
                    JobSpeed& speed) {
  return detail::Simulation(cluster, trace, policy, options, speed).run();
}

}  // namespace gpemu::cluster
