// A job's iteration time under an allocation, from the engine (cluster.h):
// the job itself (job.h) runs a few steps under a virtual clock on that
// allocation, and the steady state of the later steps is its speed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/pipeline.h"
#include "gpemu/session.h"

namespace gpemu::cluster {
namespace {

std::string model_key(const TraceJob& job) {
  return job.model_spec.name + "|" + describe(program_variant(job.model_spec));
}

}  // namespace

double JobSpeed::iteration_s(const TraceJob& job, const Allocation& a) {
  if (job.model.empty()) return job.step_s;
  const bool loader = !job.dataset.empty() && a.cpus > 0;
  const auto key = std::make_tuple(model_key(job), job.batch,
                                   loader ? fmt::format("{}|{}", job.dataset, a.decode_us) : std::string(), a.gpu->id,
                                   a.gpus, a.nodes, loader ? a.cpus : 0);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  double t = 0;
  if (!loader) {  // rank 0's steps, in order: the steady state over the second half
    t = steady_s(step_ends(job, a, 6, 6), 6);
  } else {
    // Enough steps for a loader of `workers` per rank to reach its steady
    // state, E, read as one epoch; and then workers + 2 steps more (at most
    // E / 2), whose start is the loader's restart at each epoch (its workers'
    // first batches again), paid once per epoch of the whole dataset.
    const int workers = std::max(1, a.cpus / a.gpus);
    const std::int64_t e = std::min(64, 2 * workers * pipeline::LoaderOptions{}.prefetch_factor + 8);
    const double per_epoch = static_cast<double>(dataset(job.dataset).samples.size()) /
                             (static_cast<double>(job.batch) * static_cast<double>(a.gpus));
    if (per_epoch <= static_cast<double>(e)) {  // epochs shorter than that: their restarts are in the steady state
      t = steady_s(step_ends(job, a, 2 * e, 2 * e), 2 * e);
    } else {
      const std::int64_t x = std::min<std::int64_t>(e / 2, workers + 2);
      const std::vector<double> ends = step_ends(job, a, e + x, e);
      t = steady_s(ends, e);
      const double restart = (ends[static_cast<std::size_t>(e + x) - 1] - ends[static_cast<std::size_t>(e) - 1]) -
                             static_cast<double>(x) * t;
      t += std::max(0.0, restart) / per_epoch;
    }
  }
  memo_.emplace(key, t);
  return t;
}

double JobSpeed::steady_s(const std::vector<double>& ends, std::int64_t steps) {
  if (static_cast<std::int64_t>(ends.size()) < std::max<std::int64_t>(steps, 4))
    throw std::logic_error("JobSpeed: the job ran fewer steps than asked");
  const auto n = static_cast<std::size_t>(steps), from = n / 2;
  return (ends[n - 1] - ends[from - 1]) / static_cast<double>(n - from);
}

const pipeline::Dataset& JobSpeed::dataset(const std::string& name) {
  auto& d = datasets_[name];
  if (!d) d = std::make_unique<pipeline::Dataset>(pipeline::virtual_dataset(name));
  return *d;
}

const CostModel& JobSpeed::costs(const TraceJob& job) {
  auto& c = costs_[model_key(job)];
  if (!c) c = job_cost_model(job.model_spec);
  return *c;
}

// The job's spec for `steps` iterations on the allocation (the session or
// Job sets its GPUs' places): without a loader, in-memory batches; with one,
// the samples of `dataset_steps` steps read epoch after epoch.
JobSpec JobSpeed::spec_for(const TraceJob& job, const Allocation& a, std::int64_t steps, std::int64_t dataset_steps) {
  const bool loader = !job.dataset.empty() && a.cpus > 0;
  JobSpec spec;
  spec.compute.model = job.model_spec;
  spec.compute.use_allocator = false;  // speed only; memory is the job's own business here
  spec.compute.variation.cv = 0;
  spec.compute.variation.warmup_factor = 1;
  spec.batch_size = job.batch;
  spec.cluster.gpu = a.gpu;
  spec.cluster.gpus = a.gpus;
  spec.cluster.nodes = a.nodes;
  if (a.nodes > 1) spec.cluster.network = network_preset(network_);
  if (loader) {
    const int workers = std::max(1, a.cpus / a.gpus);
    spec.data.source = DataSource::Modelled;
    // The run reads only the samples of `dataset_steps` steps: the dataset's
    // first ones (a virtual dataset's seeded permutation spreads its sizes
    // over them), so a preset of a million files costs no more than the run
    // needs; epoch after epoch when the run has more steps than that.
    const pipeline::Dataset& d = dataset(job.dataset);
    const std::size_t per_step = static_cast<std::size_t>(job.batch) * static_cast<std::size_t>(a.gpus);
    const std::size_t take = std::min(static_cast<std::size_t>(dataset_steps) * per_step, d.samples.size());
    spec.data.dataset.root = d.root;
    spec.data.dataset.classes = d.classes;
    spec.data.dataset.samples.assign(d.samples.begin(), d.samples.begin() + static_cast<std::ptrdiff_t>(take));
    if (take < static_cast<std::size_t>(steps) * per_step)
      spec.schedule.epochs =
          static_cast<int>(static_cast<std::size_t>(steps) / std::max<std::size_t>(1, take / per_step) + 2);
    spec.data.loader.num_workers = workers;
    spec.data.model.cores = a.cpus;
    if (a.decode_us > 0) spec.data.model.decode_per_sample = from_seconds(a.decode_us * 1e-6);
  } else {
    spec.data.source = DataSource::Synthetic;
    spec.data.synthetic_batches = steps;
  }
  spec.schedule.max_iterations = steps;
  spec.record.steps = false;
  spec.record.kernels = false;
  return spec;
}

namespace {

// Rank 0's train step ends, seconds: a sink hears them, the record keeps no
// step or kernel. In a session a job's ranks are its GPUs from its first:
// the lowest GPU heard is its rank 0.
struct RankZeroEnds : RecordSink {
  std::map<int, std::vector<double>> by_gpu;
  void on_step(const StepRecord& s) override {
    if (s.phase == RunPhase::Train) by_gpu[s.gpu].push_back(to_seconds(s.step_end));
  }
  std::vector<double> take() { return by_gpu.empty() ? std::vector<double>{} : std::move(by_gpu.begin()->second); }
};

}  // namespace

std::vector<double> JobSpeed::step_ends(const TraceJob& job, const Allocation& a, std::int64_t steps,
                                        std::int64_t dataset_steps) {
  if (job.model.empty()) throw std::logic_error("JobSpeed::step_ends: a fixed-step job has no engine run");
  JobSpec spec = spec_for(job, a, steps, dataset_steps);
  RankZeroEnds sink;
  spec.record.sink = &sink;
  auto clock = make_virtual_clock();
  Job run(*clock, costs(job), spec);
  run.run();
  return sink.take();
}

// The jobs run together in one session of one node (pinned to their GPUs),
// each for its `steps`: each one's rank 0 step ends. Empty when a job failed
// (with `memory`, its allocator on: an out-of-memory of jobs sharing a GPU).
std::vector<std::vector<double>> JobSpeed::session_ends(const std::vector<Placed>& jobs,
                                                        const std::vector<std::int64_t>& steps, int node_gpus,
                                                        int node_cpus, std::string_view sharing, bool memory) {
  SessionSpec world;
  world.gpu = jobs.front().alloc.gpu;
  world.gpus_per_node = node_gpus;
  world.share.policy = parse_share_policy(sharing);
  world.placement = placement_policy("pinned");
  world.cpu_cores_per_node = std::max(1, node_cpus);
  auto clock = make_virtual_clock();
  Session session(*clock, costs(*jobs.front().job), world);
  std::vector<RankZeroEnds> sinks(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    SessionJob sj;
    sj.name = fmt::format("{}#{}", jobs[i].job->id, i);
    sj.job = spec_for(*jobs[i].job, jobs[i].alloc, steps[i], steps[i]);
    sj.job.compute.use_allocator = memory;
    sj.job.record.sink = &sinks[i];
    sj.gpu = jobs[i].first_gpu;
    sj.costs = std::shared_ptr<const CostModel>(std::shared_ptr<void>(), &costs(*jobs[i].job));  // not owned
    session.add_job(std::move(sj));
  }
  session.run();
  std::vector<std::vector<double>> out;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!session.outcome(static_cast<JobId>(i)).error.empty()) return {};
    out.push_back(sinks[i].take());
  }
  return out;
}

std::optional<std::vector<double>> JobSpeed::colocated_s(const std::vector<Placed>& jobs, int node_gpus, int node_cpus,
                                                         std::string_view sharing) {
  bool packed = false;
  std::string key = fmt::format("{}|{}|{}", sharing, node_gpus, node_cpus);
  std::vector<std::string> own(jobs.size());  // each job's configuration
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Placed& p = jobs[i];
    if (p.job->model.empty() || p.alloc.nodes != 1 || p.alloc.gpu != jobs.front().alloc.gpu)
      throw std::logic_error("JobSpeed::colocated_s: model jobs of one node and one GPU model only");
    const bool loader = !p.job->dataset.empty() && p.alloc.cpus > 0;
    own[i] = fmt::format("{}|{}|{}|{}|{}|{}", model_key(*p.job), p.job->batch,
                         loader ? fmt::format("{}|{}", p.job->dataset, p.alloc.decode_us) : std::string(),
                         p.alloc.gpu->id, p.alloc.gpus, loader ? p.alloc.cpus : 0);
    key += fmt::format("|{}|{}", own[i], p.first_gpu);
    for (std::size_t k = 0; k < i; ++k) packed = packed || jobs[k].first_gpu == p.first_gpu;
  }
  if (auto it = colocated_memo_.find(key); it != colocated_memo_.end()) return it->second;
  // Each job's steps: enough for its loader's prefetch to fill (as
  // iteration_s), the faster ones more, so that all run about as long.
  std::vector<double> alone(jobs.size());
  std::vector<std::int64_t> steps(jobs.size());
  double longest = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Allocation& a = jobs[i].alloc;
    alone[i] = iteration_s(*jobs[i].job, a);
    const bool loader = !jobs[i].job->dataset.empty() && a.cpus > 0;
    steps[i] =
        loader ? std::min(64, 2 * std::max(1, a.cpus / a.gpus) * pipeline::LoaderOptions{}.prefetch_factor + 8) : 12;
    longest = std::max(longest, static_cast<double>(steps[i]) * alone[i]);
  }
  for (std::size_t i = 0; i < jobs.size(); ++i)
    steps[i] = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(longest / alone[i])), steps[i], 2000);
  // A job's steady state over the second half of its steps that ended while
  // every job still ran (all of its steps when fewer than 4 did).
  const auto steady_until = [](const std::vector<double>& ends, double until) {
    std::size_t k = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), until) - ends.begin());
    if (k < 4) k = ends.size();
    const std::size_t h = k / 2;
    return (ends[k - 1] - ends[h - 1]) / static_cast<double>(k - h);
  };
  const auto together = session_ends(jobs, steps, node_gpus, node_cpus, sharing, packed);
  std::optional<std::vector<double>> out;
  if (!together.empty()) {
    double until = std::numeric_limits<double>::infinity();
    for (const auto& e : together) {
      if (e.size() < 4) throw std::logic_error("JobSpeed::colocated_s: a job ran fewer steps than asked");
      until = std::min(until, e.back());
    }
    out.emplace();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      // Alone, the same way: on the same GPUs, its own cores.
      Placed solo = jobs[i];
      solo.first_gpu = 0;
      auto [it, fresh] = alone_memo_.emplace(fmt::format("{}|{}|{}", sharing, own[i], steps[i]), 0.0);
      if (fresh) {
        const auto e = session_ends({solo}, {steps[i]}, solo.alloc.gpus, solo.alloc.cpus, sharing, false);
        it->second = steady_until(e.front(), std::numeric_limits<double>::infinity());
      }
      out->push_back(alone[i] * steady_until(together[i], until) / it->second);
    }
  }
  colocated_memo_.emplace(key, out);
  return out;
}

int JobSpeed::best_cpus(const TraceJob& job, Allocation a, int max_cpus) {
  if (job.model.empty() || job.dataset.empty()) return 0;
  max_cpus = std::max(max_cpus, 1);
  a.cpus = max_cpus;
  const double best = iteration_s(job, a);
  // The speed does not drop as cores are added: bisect the fewest within 2 %.
  int lo = 1, hi = max_cpus;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    a.cpus = mid;
    if (iteration_s(job, a) <= best * 1.02)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace gpemu::cluster
