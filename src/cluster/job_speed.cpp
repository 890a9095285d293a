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

  auto& costs = costs_[std::get<0>(key)];
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
  // Enough steps for a loader of `workers` per rank to reach its steady state.
  int steps = 6;
  if (loader) {
    const int workers = std::max(1, a.cpus / a.gpus);
    spec.data.source = DataSource::Modelled;
    steps = std::min(64, 2 * workers * spec.data.loader.prefetch_factor + 8);
    // The run reads only its steps' samples: the dataset's first ones (a
    // virtual dataset's seeded permutation spreads its sizes over them), so
    // a preset of a million files costs no more than the run needs.
    auto& dataset = datasets_[job.dataset];
    if (!dataset) dataset = std::make_unique<pipeline::Dataset>(pipeline::virtual_dataset(job.dataset));
    const std::size_t needed =
        static_cast<std::size_t>(steps) * static_cast<std::size_t>(job.batch) * static_cast<std::size_t>(a.gpus);
    spec.data.dataset.root = dataset->root;
    spec.data.dataset.classes = dataset->classes;
    spec.data.dataset.samples.assign(dataset->samples.begin(),
                                     dataset->samples.begin() +
                                         static_cast<std::ptrdiff_t>(std::min(needed, dataset->samples.size())));
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
    std::vector<Time> ends;
    void on_step(const StepRecord& s) override {
      if (s.gpu == 0 && s.phase == RunPhase::Train) ends.push_back(s.step_end);
    }
  } sink;
  spec.record.steps = false;
  spec.record.kernels = false;
  spec.record.sink = &sink;
  auto clock = make_virtual_clock();
  Job run(*clock, *costs, spec);
  run.run();
  // Rank 0's steps, in order: the steady state over the second half.
  const std::vector<Time>& ends = sink.ends;
  if (ends.size() < 4) throw std::logic_error("JobSpeed: the job ran fewer than four steps");
  const std::size_t from = ends.size() / 2;
  const double t = to_seconds(ends.back() - ends[from - 1]) / static_cast<double>(ends.size() - from);
  memo_.emplace(key, t);
  return t;
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
