// Running a job: its ranks' host threads (their data sources, DDP's
// reducer, the records reserved up front, one body per rank whose first
// failure is the job's), run() and the ranks' barrier. What each rank's
// thread runs: step_loop.cpp.
#include <algorithm>
#include <exception>
#include <map>
#include <mutex>

#include "clock/host_sync.h"
#include "gpemu/job/job.h"
#include "interconnect/ddp_reducer.h"
#include "workload/job_impl.h"
#include "workload/node_loaders.h"

namespace gpemu {

RunRecord Job::run(JobObserver* observer) {
  std::vector<std::function<void()>> bodies = host_threads(observer);
  try {
    clock_.run_concurrently(std::move(bodies));
  } catch (...) {
    std::lock_guard lock(error_mu_);
    if (!first_error_) first_error_ = std::current_exception();
  }
  if (first_error_ && !spec_.schedule.keep_partial) std::rethrow_exception(first_error_);
  return record();
}

void StepBoundary::restore_memory() const { job_.allocate_persistent(*static_cast<Job::Rank*>(rank_)); }

void StepBoundary::barrier() const { job_.barrier(static_cast<Job::Rank*>(rank_)->index); }

// Through the host sync, so that under the virtual clock a rank waiting here
// lets time move to its peers' next wake-ups, and a peer's failure ends the wait.
void Job::barrier(int rank) {
  std::uint64_t passed = 0;
  bool last = false;
  {
    std::lock_guard lock(sync_->mutex());
    passed = barrier_passed_;
    if (++barrier_arrived_ == spec_.cluster.gpus) {
      barrier_arrived_ = 0;
      ++barrier_passed_;
      last = true;
    }
  }
  if (last) {
    sync_->notify_all();
    return;
  }
  sync_->wait_until(rank, [&] { return barrier_passed_ != passed; });
}

std::vector<std::function<void()>> Job::host_threads(JobObserver* observer) {
  if (sync_) throw std::logic_error("Job::run called twice");
  const int gpus = spec_.cluster.gpus;
  sync_ = std::make_unique<HostSync>(clock_, gpus);
  for (auto& r : ranks_) r->sleep = sync_->sleeper(r->index);

  // Sources, one per rank (and per phase), made now: a custom source may need the job's timeline.
  const std::shared_ptr<pipeline::DistributedCache> distributed_cache = make_distributed_cache(spec_);
  // One copy of each phase's sample list for all ranks' modelled loaders.
  std::map<const DataSpec*, std::shared_ptr<const pipeline::Dataset>> datasets;
  auto make_source = [&](const DataSpec& d, int g, int batch) -> std::unique_ptr<pipeline::BatchSource> {
    pipeline::LoaderOptions lo = d.loader;
    lo.batch_size = static_cast<std::size_t>(batch);
    lo.rank = spec_.cluster.real_node * gpus + g;  // one node of several processes: its global ranks
    lo.world_size = spec_.cluster.real_nodes * gpus;
    const HostMemoryKind mem = d.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
    switch (d.source) {
      case DataSource::Synthetic: {
        const std::uint64_t bytes =
            d.synthetic_bytes_per_sample > 0 ? d.synthetic_bytes_per_sample : cost_.input_bytes_per_sample;
        if (d.synthetic_over_dataset) {
          const pipeline::SamplerOptions so = pipeline::sampler_options(lo);
          return std::make_unique<pipeline::SyntheticSource>(clock_, pipeline::Sampler(d.dataset.size(), so), batch,
                                                             bytes, mem);
        }
        return std::make_unique<pipeline::SyntheticSource>(clock_, d.synthetic_batches, batch, bytes, mem);
      }
      case DataSource::Loader: {
        pipeline::PipelineSourceOptions so;
        so.rank = g;
        so.cold = d.cold;
        so.trace = timeline_;
        so.untimed = d.untimed_reads;
        return std::make_unique<pipeline::PipelineSource>(clock_, d.dataset, lo, so);
      }
      case DataSource::Modelled: {
        lo.cache.reset();
        const pipeline::LoaderModelOptions m =
            node_loader_model(spec_, d, g, &d == &spec_.data ? distributed_cache : nullptr);
        std::shared_ptr<const pipeline::Dataset>& shared = datasets[&d];
        if (!shared) shared = std::make_shared<const pipeline::Dataset>(d.dataset);
        return std::make_unique<pipeline::ModelledLoader>(clock_, shared, lo, m, timeline_);
      }
      case DataSource::Custom: return d.custom(g, clock_, *timeline_);
    }
    return nullptr;
  };
  if (spec_.schedule.train) {
    for (auto& r : ranks_) {
      r->train_source = make_source(spec_.data, r->index, spec_.batch_size);
      if (spec_.schedule.eval.first_epoch > 0 && spec_.schedule.eval.steps > 0)
        r->eval_source = make_source(spec_.schedule.eval.data, r->index,
                                     static_cast<int>(spec_.schedule.eval.data.loader.batch_size
                                                          ? spec_.schedule.eval.data.loader.batch_size
                                                          : static_cast<std::size_t>(spec_.batch_size)));
    }
  }

  if (comm_ && spec_.compute.step_time == StepTime::CostModel && spec_.compute.all_reduce) {
    std::vector<Stream*> comm;
    for (auto& r : ranks_) comm.push_back(r->comm);
    reducer_ =
        std::make_unique<DdpReducer>(*comm_, *sync_, comm, plan_->backward.gradient_bytes, spec_.cluster.buckets);
    plan_->backward_ends = bucket_chunk_ends(plan_->backward, reducer_->buckets());
  }

  // The records grow by one step each: reserve them up front and touch their
  // pages now, so a growing vector is never copied, nor its new pages
  // faulted in, between two steps on the host's critical path (a fault costs
  // microseconds on a virtual machine: a 100 us step would lose 1-2 % of AU).
  {
    const std::int64_t evals = spec_.schedule.eval.first_epoch > 0
                                   ? static_cast<std::int64_t>(spec_.schedule.eval.steps) * spec_.schedule.epochs
                                   : 0;
    // Reserved for at most 4 Mi steps over all ranks (about 1 GiB of address
    // space), touched for at most 1 Mi (a longer run grows as usual).
    const auto ranks = static_cast<std::size_t>(gpus);
    const auto planned =
        std::min(static_cast<std::size_t>(std::max<std::int64_t>(planned_ + evals, 0)), (std::size_t{1} << 22) / ranks);
    const std::size_t steps = std::min(planned, (std::size_t{1} << 20) / ranks);
    // Kernels per step: forward and backward+step, or with DDP forward, one
    // per run of backward chunks and the optimizer step; at most 256 Ki reserved.
    const std::size_t kernels_per_step = std::max<std::size_t>(2, 2 + plan_->backward_ends.size());
    for (auto& r : ranks_) {
      if (spec_.record.steps) {
        r->steps.reserve(planned);
        r->steps.resize(steps);
        r->steps.clear();
      }
      if (spec_.record.kernels) {
        r->spans.resize(std::min(steps * kernels_per_step, std::size_t{1} << 18));
        r->spans.clear();
      }
    }
  }

  for (auto& r : ranks_) allocate_persistent(*r);
  start_ = clock_.now();

  std::vector<std::function<void()>> bodies;
  for (int g = 0; g < gpus; ++g) {
    bodies.push_back([this, g, observer] {
      try {
        run_rank(*ranks_[g], observer);
        sync_->finish(g);
      } catch (const PeerFailed&) {
        sync_->finish(g);  // another rank's error is the job's
      } catch (...) {
        {
          std::lock_guard lock(error_mu_);
          if (!first_error_) first_error_ = std::current_exception();
        }
        sync_->abort();
        sync_->finish(g);
      }
    });
  }
  return bodies;
}

}  // namespace gpemu
