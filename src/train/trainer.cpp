#include "gpemu/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/profile.h"

namespace gpemu::train {
namespace {

VariationOptions with_cv(VariationOptions v, std::optional<double> measured) {
  if (measured) v.cv = *measured;
  return v;
}

// TrainingJob's noise streams are 1 (forward) and 2 (backward); GPU g uses
// 1 + 2g and 2 + 2g, so GPU 0 draws what a TrainingJob draws.
std::uint64_t forward_stream(int gpu) { return 1 + 2 * static_cast<std::uint64_t>(gpu); }
std::uint64_t backward_stream(int gpu) { return 2 + 2 * static_cast<std::uint64_t>(gpu); }

double pct(Duration part, Duration whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

struct Pending {
  BatchRecord rec;
  Time issue = 0;
  Completion prev_tail, h2d, forward, backward, all_reduce, step;
  bool has_all_reduce = false;
  Duration read = 0, decode = 0;
};

struct EpochMark {
  std::uint64_t epoch = 0;
  Time start = 0;
  std::vector<Completion> tails;
  std::int64_t samples = 0;
};

}  // namespace

double TrainResult::mean_epoch_s() const {
  if (epochs.empty()) return 0;
  double s = 0;
  for (const EpochResult& e : epochs) s += to_seconds(e.end - e.start);
  return s / static_cast<double>(epochs.size());
}

struct Trainer::Rank {
  int index = 0;
  Device* device = nullptr;
  Stream* stream = nullptr;  // the training loop's stream (the legacy default stream, as a PyTorch loop)
  Stream* comm = nullptr;    // DDP's communication stream (gpus > 1)
  Variation forward_noise, backward_noise;
  std::vector<CachingAllocator::Ptr> persistent;
  std::map<std::int64_t, std::pair<StepCost, MemoryPlan>> per_batch;
  std::shared_ptr<void> current;  // the batch the loop holds (x), until the next one
  std::int64_t iterations = 0;
  std::vector<Pending> pending;
  std::vector<std::pair<Completion, Duration>> kernels;
  std::vector<EpochMark> epochs;
  Duration forward_total = 0, backward_total = 0;

  Rank(VariationOptions fwd, VariationOptions bwd, int gpu)
      : index(gpu), forward_noise(fwd, forward_stream(gpu)), backward_noise(bwd, backward_stream(gpu)) {}
  ~Rank() {
    current.reset();
    for (auto p : persistent) device->allocator().free(p);
  }
};

Trainer::Trainer(Clock& clock, const GpuSpec& spec, const CostModel& costs, TrainOptions options)
    : clock_(clock), spec_(spec), costs_(costs), options_(std::move(options)) {
  if (options_.batch_size < 1)
    throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", options_.batch_size));
  if (options_.gpus < 1) throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", options_.gpus));
  if (options_.epochs < 1)
    throw InputError(fmt::format("--epochs {} is impossible: it must be at least 1", options_.epochs));
  if (options_.max_iterations < -1)
    throw InputError(fmt::format("iterations {} is impossible: it must be 0 or more", options_.max_iterations));
  cost_ = costs_.step_cost(spec_, options_.model, options_.batch_size);
  timeline_ = std::make_unique<Timeline>(clock_);
  const ClusterOptions cluster = plan_cluster(options_.gpus, options_.nodes, options_.node, options_.network);
  if (options_.gpus == 1) {
    DeviceOptions d = options_.node.device;
    d.index = options_.node.first_device_index;
    single_ = std::make_unique<Device>(*timeline_, spec_, d);
  } else {
    cluster_ = std::make_unique<Cluster>(*timeline_, spec_, cluster);
    comm_ = std::make_unique<ClusterCommunicator>(*cluster_);
    backward_ = plan_backward(spec_, options_.model, cost_, options_.batch_size, options_.backward_even_chunks,
                              options_.backward_max_chunks);
  }
  const VariationOptions fwd = with_cv(options_.variation, cost_.forward_cv);
  const VariationOptions bwd = with_cv(options_.variation, cost_.backward_cv);
  for (int g = 0; g < options_.gpus; ++g) {
    auto r = std::make_unique<Rank>(fwd, bwd, g);
    r->device = &device(g);
    r->stream = &r->device->default_stream();
    if (cluster_) r->comm = &r->device->create_stream(/*non_blocking=*/true);
    ranks_.push_back(std::move(r));
  }
}

Trainer::~Trainer() { ranks_.clear(); }

Device& Trainer::device(int gpu) {
  if (gpu < 0 || gpu >= options_.gpus)
    throw InputError(fmt::format("GPU {}: this run has GPUs 0 to {}", gpu, options_.gpus - 1));
  return cluster_ ? cluster_->device(gpu) : *single_;
}

std::vector<TraceDeviceName> Trainer::trace_devices() const {
  std::vector<TraceDeviceName> out;
  for (const auto& r : ranks_)
    out.push_back({r->device->index(), fmt::format("GPU {} ({})", r->device->index(), spec_.id)});
  return out;
}

std::int64_t Trainer::planned_iterations(const std::vector<std::unique_ptr<BatchSource>>& sources) const {
  if (sources.empty()) return 0;
  const std::int64_t all = static_cast<std::int64_t>(sources.front()->batches_per_epoch()) * options_.epochs;
  return options_.max_iterations >= 0 ? std::min(all, options_.max_iterations) : all;
}

namespace {

// A host copy over a node GPU's switch uplink, as Device::copy issues it, but
// without blocking: the caller waits through its HostSync.
Completion node_copy(Cluster& cluster, int rank, Stream& s, Engine engine, std::uint64_t bytes, HostMemoryKind host,
                     std::string_view name) {
  const PcieModel& p = s.device().pcie();
  OpSpec spec;
  spec.duration = p.latency(host);
  const Node& node = cluster.node(cluster.node_of(rank));
  const int sw = node.switch_of(cluster.local_of(rank));
  spec.link = engine == Engine::CopyH2D ? &node.switch_uplink_h2d(sw) : &node.switch_uplink_d2h(sw);
  spec.bytes = static_cast<double>(bytes);
  spec.rate_cap = p.gbs(host) * 1e9;
  spec.tag.name = name;
  spec.tag.category = engine == Engine::CopyH2D ? "h2d" : "d2h";
  return s.enqueue(spec, engine);
}

}  // namespace

void Trainer::run_rank(Rank& r, BatchSource& source, std::int64_t total,
                       const std::function<void(std::int64_t, std::int64_t)>& progress) {
  Timeline& tl = *timeline_;
  Stream& s = *r.stream;
  CachingAllocator& alloc = r.device->allocator();
  HostSync& sync = *sync_;
  const SleepFn sleep = [&](Time t) { sync.sleep_until(r.index, t); };
  auto host_wait = [&](const Completion& c) { sync.wait(r.index, tl, c); };

  bool stop = false;
  for (int e = 0; e < options_.epochs && !stop; ++e) {
    if (options_.max_iterations >= 0 && r.iterations >= options_.max_iterations) break;
    EpochMark mark;
    mark.epoch = static_cast<std::uint64_t>(e);
    mark.start = clock_.now();
    source.begin_epoch(static_cast<std::uint64_t>(e));
    for (;;) {
      if (options_.max_iterations >= 0 && r.iterations >= options_.max_iterations) {
        stop = true;
        break;
      }
      if (sync.aborted()) throw PeerFailed("another GPU's host thread failed");
      const Time called = clock_.now();
      std::optional<LoadedBatch> b = source.next(sleep);
      if (!b) break;
      const Time delivered = clock_.now();

      // ---- one iteration, for a batch that is in host memory now ----
      auto found = r.per_batch.find(b->samples);
      if (found == r.per_batch.end()) {
        const int n = static_cast<int>(b->samples);
        StepCost c = n == options_.batch_size ? cost_ : costs_.step_cost(spec_, options_.model, n);
        MemoryPlan plan = make_memory_plan(c, n);
        found = r.per_batch.emplace(b->samples, std::make_pair(std::move(c), std::move(plan))).first;
      }
      const StepCost& cost = found->second.first;
      const MemoryPlan& plan = found->second.second;
      const std::int64_t it = r.iterations;

      Pending p;
      p.rec.gpu = r.index;
      p.rec.epoch = b->epoch;
      p.rec.index = b->index;
      p.rec.iteration = it;
      p.rec.samples = b->samples;
      p.rec.bytes = b->bytes;
      p.rec.sample_indices = std::move(b->sample_indices);
      p.rec.next_called = called;
      p.rec.delivered = delivered;
      p.rec.ready = b->ready;
      p.read = b->read;
      p.decode = b->decode;
      p.issue = tl.issue_time();
      p.prev_tail = s.tail();

      std::vector<CachingAllocator::Ptr> live;
      live.reserve(plan.activation_tensors.size() + 1);
      try {
        live.push_back(alloc.allocate(b->bytes));
        // x.to(device): a measured transfer time is replayed (scaled by the
        // batch's bytes when it is not the profiled size); otherwise the
        // PCIe model moves the batch's real bytes.
        const bool pinned = b->memory == HostMemoryKind::Pinned;
        const auto measured = pinned ? cost.transfer_pinned : cost.transfer_pageable;
        if (measured) {
          OpSpec spec;
          spec.duration = *measured;
          if (b->bytes != plan.input_bytes && plan.input_bytes > 0)
            spec.duration = std::llround(static_cast<double>(*measured) * static_cast<double>(b->bytes) /
                                         static_cast<double>(plan.input_bytes));
          spec.tag.name = "H2D batch";
          spec.tag.category = "h2d";
          p.h2d = s.enqueue(spec, Engine::CopyH2D);
          if (!pinned) host_wait(p.h2d);
        } else if (!cluster_) {
          p.h2d = s.copy_h2d(b->bytes, b->memory, "H2D batch");  // pageable: blocks, as cudaMemcpy
        } else {
          p.h2d = node_copy(*cluster_, r.index, s, Engine::CopyH2D, b->bytes, b->memory, "H2D batch");
          if (!pinned) host_wait(p.h2d);
        }
        for (std::uint64_t t : plan.activation_tensors) live.push_back(alloc.allocate(t));
        const Duration fwd = r.forward_noise.sample(cost.forward, it);
        p.forward = s.launch_kernel(fwd, "forward");
        r.kernels.emplace_back(p.forward, fwd);
        const Duration bwd = r.backward_noise.sample(cost.backward, it);
        r.forward_total += fwd;
        r.backward_total += bwd;
        if (!cluster_) {
          p.backward = s.launch_kernel(bwd, "backward+step");
          r.kernels.emplace_back(p.backward, bwd);
        } else {
          const std::vector<Duration> parts = split_backward(backward_, bwd);
          for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
            const Completion c = s.launch_kernel(parts[k], "backward");
            r.kernels.emplace_back(c, parts[k]);
            for (int g : backward_.chunks[k].gradients) reducer_->gradient_ready(r.index, it, g, c);
          }
          p.backward = s.tail();
          // End of DDP's backward: the stream waits for the all-reduces.
          p.all_reduce = reducer_->finish(r.index, it);
          p.has_all_reduce = true;
          OpSpec wait;
          wait.trace = false;
          wait.tag.name = "wait for all-reduce";
          const Completion dep[] = {p.all_reduce};
          s.enqueue(wait, std::nullopt, dep);
          const Completion o = s.launch_kernel(parts.back(), "optimizer step");
          r.kernels.emplace_back(o, parts.back());
        }
        // Frees are host-side and stream-ordered, as in PyTorch.
        for (auto q = live.rbegin(); q != live.rend(); ++q) alloc.free(*q);
        live.clear();
      } catch (...) {
        for (auto q = live.rbegin(); q != live.rend(); ++q) alloc.free(*q);
        throw;
      }
      if (options_.sync == SyncMode::EveryIteration) {
        if (!cluster_) {
          s.copy_d2h(4, HostMemoryKind::Pageable, "loss.item()");
        } else {
          host_wait(node_copy(*cluster_, r.index, s, Engine::CopyD2H, 4, HostMemoryKind::Pageable, "loss.item()"));
        }
      }
      p.step = s.tail();
      // The loop drops the previous batch (its staging buffer) when x is rebound.
      r.current = std::move(b->keep_alive);
      mark.samples += p.rec.samples;
      r.pending.push_back(std::move(p));
      ++r.iterations;
      if (progress && r.index == 0) progress(r.iterations, total);
    }
    // End of the epoch: the host waits for the GPU (torch.cuda.synchronize()).
    host_wait(s.tail());
    mark.tails.push_back(s.tail());
    if (r.comm) {
      host_wait(r.comm->tail());
      mark.tails.push_back(r.comm->tail());
    }
    r.epochs.push_back(std::move(mark));
  }
  r.current.reset();
}

TrainResult Trainer::run(std::vector<std::unique_ptr<BatchSource>> sources,
                         const std::function<void(std::int64_t, std::int64_t)>& progress) {
  if (static_cast<int>(sources.size()) != options_.gpus)
    throw InputError(fmt::format("{} GPUs need {} batch sources, got {}", options_.gpus, options_.gpus, sources.size()));
  for (const auto& s : sources)
    if (!s) throw InputError("a batch source is missing");
  if (sync_) throw std::logic_error("Trainer::run called twice");

  // Persistent state (weights, gradients, optimizer state) on every GPU.
  const MemoryPlan full = make_memory_plan(cost_, options_.batch_size);
  for (auto& r : ranks_)
    for (std::uint64_t t : full.persistent_tensors) r->persistent.push_back(r->device->allocator().allocate(t));

  sync_ = std::make_unique<HostSync>(clock_, options_.gpus);
  if (cluster_) {
    std::vector<Stream*> comm;
    for (auto& r : ranks_) comm.push_back(r->comm);
    reducer_ = std::make_unique<DdpReducer>(*comm_, *sync_, comm, backward_.gradient_bytes, options_.buckets);
  }
  const std::int64_t total = planned_iterations(sources);
  const Time start = clock_.now();

  std::mutex error_mu;
  std::exception_ptr first_error;
  std::vector<std::function<void()>> bodies;
  for (int g = 0; g < options_.gpus; ++g) {
    bodies.push_back([&, g] {
      try {
        run_rank(*ranks_[g], *sources[g], total, progress);
        sync_->finish(g);
      } catch (const PeerFailed&) {
        sync_->finish(g);
        throw;
      } catch (...) {
        {
          std::lock_guard lock(error_mu);
          if (!first_error) first_error = std::current_exception();
        }
        sync_->abort();
        sync_->finish(g);
        throw;
      }
    });
  }
  try {
    clock_.run_concurrently(std::move(bodies));
  } catch (...) {
    if (first_error) std::rethrow_exception(first_error);
    throw;
  }

  // ---- everything has completed: read the final times ----
  Timeline& tl = *timeline_;
  TrainResult res;
  res.model = canonical_model_name(options_.model);
  res.gpu = spec_.id;
  res.gpus = options_.gpus;
  res.batch_size = options_.batch_size;
  res.clock = std::string(clock_.name());
  res.start = start;
  res.cost = cost_;
  res.source = sources.front()->describe();
  if (cluster_) {
    res.buckets = static_cast<int>(reducer_->buckets().size());
    for (const auto& b : reducer_->buckets()) res.all_reduce_bytes += b.bytes;
    res.all_reduces = reducer_->all_reduces();
    res.backward_split = backward_.source;
  }
  std::map<std::uint64_t, EpochResult> epochs;
  Time end = start;
  for (auto& r : ranks_) {
    GpuResult g;
    g.gpu = r->index;
    g.iterations = r->iterations;
    g.end = start;
    for (const auto& [c, d] : r->kernels) {
      const Time e = tl.end_time(c);
      g.compute_intervals.push_back({e - d, e});
      g.compute_busy += d;
    }
    for (Pending& p : r->pending) {
      BatchRecord& b = p.rec;
      b.gpu_idle_since = tl.end_time(p.prev_tail);
      b.h2d_start = std::max(p.issue, b.gpu_idle_since);
      b.h2d_end = tl.end_time(p.h2d);
      b.h2d = std::max<Duration>(0, b.h2d_end - b.h2d_start);
      b.forward_end = tl.end_time(p.forward);
      b.backward_end = tl.end_time(p.backward);
      b.step_end = tl.end_time(p.step);
      if (p.has_all_reduce) {
        b.all_reduce_end = tl.end_time(p.all_reduce);
        b.all_reduce_wait = std::max<Duration>(0, b.all_reduce_end - b.backward_end);
      }
      const Time stall_from = std::max(b.next_called, b.gpu_idle_since);
      const Time stall_to = std::min(b.delivered, b.h2d_start);
      b.data_stall = std::max<Duration>(0, stall_to - stall_from);
      const Duration work = p.read + p.decode;
      b.fetch_stall = work > 0 ? static_cast<Duration>(std::llround(static_cast<double>(b.data_stall) *
                                                                     static_cast<double>(p.read) / static_cast<double>(work)))
                               : b.data_stall;
      b.prep_stall = b.data_stall - b.fetch_stall;
      g.samples += b.samples;
      g.data_stall += b.data_stall;
      g.fetch_stall += b.fetch_stall;
      g.prep_stall += b.prep_stall;
      g.h2d += b.h2d;
      g.all_reduce_wait += b.all_reduce_wait;
      res.batches.push_back(std::move(b));
    }
    for (const EpochMark& m : r->epochs) {
      Time e_end = m.start;
      for (const Completion& c : m.tails) e_end = std::max(e_end, tl.end_time(c));
      g.end = std::max(g.end, e_end);
      auto [it, fresh] = epochs.try_emplace(m.epoch);
      EpochResult& er = it->second;
      if (fresh) {
        er.epoch = m.epoch;
        er.start = m.start;
        er.end = e_end;
      } else {
        er.start = std::min(er.start, m.start);
        er.end = std::max(er.end, e_end);
      }
      er.samples += m.samples;
    }
    const AllocatorStats a = r->device->allocator().stats();
    g.peak_allocated_bytes = a.peak_allocated_bytes;
    g.peak_reserved_bytes = a.peak_reserved_bytes;
    res.peak_allocated_bytes = std::max(res.peak_allocated_bytes, a.peak_allocated_bytes);
    res.peak_reserved_bytes = std::max(res.peak_reserved_bytes, a.peak_reserved_bytes);
    res.iterations = std::max(res.iterations, r->iterations);
    res.samples += g.samples;
    res.forward_total += r->forward_total;
    res.backward_total += r->backward_total;
    end = std::max(end, g.end);
    res.per_gpu.push_back(std::move(g));
  }
  for (auto& [e, er] : epochs) res.epochs.push_back(er);
  res.elapsed = end - start;
  const double secs = to_seconds(res.elapsed);
  res.samples_per_s = secs > 0 ? static_cast<double>(res.samples) / secs : 0;
  res.iterations_per_s = secs > 0 ? static_cast<double>(res.iterations) / secs : 0;
  const double n = static_cast<double>(res.per_gpu.size());
  for (const GpuResult& g : res.per_gpu) {
    res.gpu_util_pct += pct(g.compute_busy, res.elapsed) / n;
    res.data_stall_pct += pct(g.data_stall, res.elapsed) / n;
    res.fetch_stall_pct += pct(g.fetch_stall, res.elapsed) / n;
    res.prep_stall_pct += pct(g.prep_stall, res.elapsed) / n;
    res.h2d_pct += pct(g.h2d, res.elapsed) / n;
    res.all_reduce_pct += pct(g.all_reduce_wait, res.elapsed) / n;
  }
  return res;
}

}  // namespace gpemu::train
