// The round-based cluster simulation (cluster.h's simulate): the state of a
// run, its nodes and active jobs, and the Simulation whose members three
// files define: simulator.cpp the rounds (arrivals, the policy's order,
// progress at the engine's speed, co-located jobs' speeds, checkpoint costs),
// placement.cpp which GPUs a job gets (packing, Gandiva's migration), and
// cpu_allocation.cpp the cores and DRAM of each placed job (proportional,
// Synergy-Tune, Synergy-Greedy).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cluster/free_gpus.h"
#include "gpemu/cluster.h"

namespace gpemu::cluster::detail {

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
int even_nodes(int gpus, int spanned);

class Simulation {
 public:
  Simulation(const ClusterConfig& c, const Trace& t, Policy& p, const SimOptions& o, JobSpeed& s);

  ClusterRun run();

 private:
  // The allocation a job gets alone, consolidated, with a GPU-proportional
  // share of the cores: the first node kind with enough GPUs of its model
  // (of GPU model `model`, when one is given; nullopt when it has too few).
  std::optional<Allocation> allocation_on(const TraceJob& j, int model) const;
  Allocation fair_allocation(const TraceJob& j) const;

  // ClusterView::iteration_s: active job k on its asked GPUs of model m.
  double iteration_on(std::size_t k, int m);
  // Whether a job may share a GPU: a model job of one GPU.
  static bool packable(const TraceJob& j) { return j.gpus == 1 && !j.model.empty(); }
  // ClusterView::packed_s: active jobs k and g on one GPU of the model k ran
  // on last round (else its first), with k's proportional cores shared.
  std::optional<std::pair<double, double>> packed_on(std::size_t k, std::size_t g);

  void admit(std::size_t i, ClusterRun& out);

  // Whole rounds before `need` seconds have passed (at least one).
  std::int64_t rounds_until(double need) const;

  // --fidelity iteration: whether the job's iterations are stepped by the
  // engine (a model's on GPUs; a fixed step, on GPUs or its CPU configuration,
  // is its step either way), and its segment, begun if it is not.
  bool stepped(const Active& a) const;
  Segment& segment(Active& a);
  // Steps the segment through the engine until its ends reach `e` seconds or
  // its last iteration: a run of the first n of its steps, n at least twice
  // the last run's (each run is the segment from its start; a longer one extends a shorter).
  void extend(Active& a, double e);

  void take(std::size_t n, int gpus);

  // Places jobs in the policy's order; returns whether a job is left waiting.
  bool place(const std::vector<std::size_t>& order);

  // Packing: a job of one GPU on the GPU of a placed job of one GPU that has
  // no other guest (a slice of no GPUs of its own on the host's node).
  // Returns whether every guest was placed.
  bool place_guests(const std::vector<std::size_t>& guests);

  bool place_job(Active& a, const TraceJob& j, int model);

  // Gandiva's migration: makes room for `gpus` GPUs on the node of model m
  // with the most free GPUs by moving jobs placed there this round (one node
  // each, fewest GPUs first) to other nodes of the model, best fit (under
  // Tune or Greedy only to nodes that also hold their cores and memory);
  // the node, or -1 (nothing moved) when that cannot free enough. A moved
  // job's GPUs changed: it pays its checkpoint (allocate_cpus).
  long defragment(std::size_t m, int gpus);
  // Moves a slice to node d (taking its GPUs there unless `take_gpus` is
  // false), and its booked cores and memory under Tune or Greedy.
  void move_slice(const TraceJob& j, Slice& s, std::size_t d, bool take_gpus = true);

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
  int greedy_need(const Active& a, const TraceJob& j, int gpus) const;
  double mem_need(const TraceJob& j, std::size_t node, int gpus) const;
  bool holds(const Active& a, const TraceJob& j, std::size_t node, int gpus) const;
  bool greedy_cores(Active& a, const TraceJob& j, bool tune = false);
  void book_fair_share(Active& a, const TraceJob& j);

  // Gives a placement's GPUs back to their nodes.
  void release(const std::vector<Slice>& placement);

  // Cores of each placed job on each of its nodes (Prop or Tune; Greedy's
  // are set at placement), then its allocation and speed.
  void allocate_cpus(const std::vector<std::size_t>& order, ClusterRun& out);

  // A placed job's allocation: the checkpoint it pays when its GPUs changed
  // (a migration when it ran last round), and its speed alone on it.
  void settle(std::size_t k, const Allocation& al, ClusterRun& out);

  // Guests on their hosts' GPU and cores, shared, if the engine says they
  // fit in its memory together; else the guest waits this round.
  void allocate_guests(ClusterRun& out);

  // Co-located jobs' speeds, the engine's for their company: each packed
  // pair on its GPU (allocate_cpus left out the guests that do not fit
  // beside their hosts in the GPU's memory); with node_interference, every node's jobs
  // together (each on its GPUs, a guest on its host's; the node's cores
  // those the jobs hold). A pair's or a node's speeds hold for the round.
  void colocate();

  // Synergy-Tune (Mohan et al., OSDI 2022, section 4.3): a job never gets
  // fewer cores than its GPU-proportional share unless it does not need
  // them; jobs that need fewer give the rest back, and jobs that gain from
  // more take it in the policy's order up to their best (the engine's).
  void tune(const std::vector<std::size_t>& order);

  // Runs every placed job for `span` seconds from `now`; returns the jobs finished.
  std::size_t progress(double now, double span, ClusterRun& out);

  void sample(ClusterRun& out, double now);

  static void thin(std::vector<UtilSample>& u);

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

}  // namespace gpemu::cluster::detail
