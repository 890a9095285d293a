// A job's iteration time under an allocation, from the engine (cluster.h):
// the job itself (job.h) runs a few steps under a virtual clock on that
// allocation, and the steady state of the later steps is its speed.
#include <algorithm>

#include <fmt/format.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/pipeline.h"

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

std::vector<double> JobSpeed::step_ends(const TraceJob& job, const Allocation& a, std::int64_t steps,
                                        std::int64_t dataset_steps) {
  if (job.model.empty()) throw std::logic_error("JobSpeed::step_ends: a fixed-step job has no engine run");
  const bool loader = !job.dataset.empty() && a.cpus > 0;
  auto& costs = costs_[model_key(job)];
  if (!costs) costs = job_cost_model(job.model_spec);
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
  // Only rank 0's step ends are read: a sink hears them, the record keeps no step or kernel.
  struct RankZeroEnds : RecordSink {
    std::vector<double> ends;
    void on_step(const StepRecord& s) override {
      if (s.gpu == 0 && s.phase == RunPhase::Train) ends.push_back(to_seconds(s.step_end));
    }
  } sink;
  spec.record.steps = false;
  spec.record.kernels = false;
  spec.record.sink = &sink;
  auto clock = make_virtual_clock();
  Job run(*clock, *costs, spec);
  run.run();
  return std::move(sink.ends);
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
