// The modelled loader's simulated path (loader_model.h): every worker's next
// sample read in time order, through the loader's cache, a distributed
// cache, the page cache and the storage device's queue (its requests: a run
// of a file's samples as one, or a batch's reads submitted at once). The
// loader itself, its epochs, the other paths and its figures are
// loader_model.cpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/loader_model.h"

namespace gpemu::pipeline {
namespace {

// The run of samples a device request starting at batch[pos] reads: the ones
// after it in the batch that continue it in the same file (a group's samples,
// sequential records) and that the page cache does not hold.
struct Run {
  std::size_t end = 0;  // one past its last position in the batch
  std::uint64_t bytes = 0;
};
Run run_from(const Dataset& d, const std::vector<std::size_t>& batch, std::size_t pos, const PageCacheModel& pc) {
  Run r{pos + 1, d.samples[batch[pos]].length};
  for (; r.end < batch.size(); ++r.end) {
    const Sample& prev = d.samples[batch[r.end - 1]];
    const Sample& next = d.samples[batch[r.end]];
    if (next.path != prev.path || next.offset != prev.offset + prev.length || pc.contains(batch[r.end])) break;
    r.bytes += next.length;
  }
  return r;
}

}  // namespace

StorageDevice ModelledLoader::storage_device(int tenants) const {
  const int ranks = model_.storage_ranks_sharing > 0 ? model_.storage_ranks_sharing : std::max(1, model_.ranks_sharing);
  StorageDevice device = shared_by(*model_.storage, ranks * tenants);
  if (model_.storage_slots > 0) device.parallelism = std::min(device.parallelism, model_.storage_slots);
  return device;
}

Time ModelledLoader::serve_storage(Time arrival, std::uint64_t bytes) {
  if (model_.storage_tenancy) {
    const int tenants = model_.storage_tenancy->tenants();
    if (tenants != storage_tenants_) {
      storage_tenants_ = tenants;
      storage_->reshare(storage_device(tenants));
    }
  }
  return storage_->serve(arrival, bytes);
}

// The worker's next sample: its read and decode, starting at t; t moves to
// its end. Returns the time spent reading (the rest decoded). A read from the
// device takes the run of samples that follow it in the batch and in the file
// (a group's samples, one seek); those then read from memory.
Duration ModelledLoader::sample_step(WorkerState& ws, Time& t) {
  const std::vector<std::size_t>& batch = batches_[ws.batch];
  const std::size_t idx = batch[ws.pos];
  const Sample& s = dataset_.samples[idx];
  const Time t0 = t;
  const auto submitted = ws.ready.find(ws.batch);
  const Time ready = submitted != ws.ready.end() ? submitted->second[ws.pos] : -1;
  const int holder = holder_of(idx);
  if ((admission_.capacity > 0 && cached_[idx]) || holder == model_.node) {
    ++stats_.cache_hits;
    // A copy from the loader's memory: the page-cache read without its per-sample syscalls.
    t += scaled(model_sample_cost(s, false, model_).read - model_.read_per_sample);
  } else if (holder >= 0) {  // another node's cache holds it: a request over the network
    ++stats_.remote_hits;
    stats_.network_bytes += s.length;
    t = fetch_->serve(t + scaled(model_.read_per_sample), s.length);
  } else {
    if (admission_.capacity > 0) ++stats_.cache_misses;
    const bool fetched = ws.pos < ws.fetched_until;
    if (ready >= 0) {  // submitted with its batch: wait for it
      ++stats_.page_cache_misses;
      t = std::max(t, ready);
    } else if (storage_ && !page_cache_->access(idx, s.length) && !fetched) {
      ++stats_.page_cache_misses;
      const Run run = run_from(dataset_, batch, ws.pos, *page_cache_);
      ws.fetched_until = run.end;
      t = serve_storage(t + scaled(model_.read_per_sample), run.bytes);
    } else {
      if (storage_) ++stats_.page_cache_hits;
      t += scaled(model_sample_cost(s, false, model_).read);
    }
    stats_.bytes_read += s.length;
    if (admission_.capacity > 0 && admission_.admits(cache_used_, s.length)) {
      cached_[idx] = true;
      cache_used_ += s.length;
      if (model_.distributed_cache) model_.distributed_cache->admit(idx, model_.node, stats_.epochs.size());
    }
  }
  const Duration read = t - t0;
  t += scaled(model_sample_cost(s, options_.decode_images, model_).decode);
  return read;
}

// io_uring reads: a worker starting a batch submits, in one call, the reads of
// every sample of it that no cache holds (a run of a file's samples as one
// request), and with superbatches those of its next k - 1 batches too; the
// device queues them all at once. The samples are then decoded in order, each
// once its bytes are in.
void ModelledLoader::submit_reads(WorkerState& ws, Time t) {
  const std::size_t workers = workers_.size();
  const std::size_t k = options_.superbatch;
  std::vector<std::size_t> batches = {ws.batch};
  if (k > 1 && (ws.batch / workers) % k == 0)
    for (std::size_t m = 1; m < k && ws.batch + m * workers < batches_.size(); ++m)
      batches.push_back(ws.batch + m * workers);
  const Time arrival = t + scaled(model_.read_per_sample);
  for (const std::size_t b : batches) {
    const std::vector<std::size_t>& batch = batches_[b];
    std::vector<Time>& ready = ws.ready[b];
    ready.assign(batch.size(), -1);
    for (std::size_t pos = 0; pos < batch.size();) {
      const std::size_t idx = batch[pos];
      if ((admission_.capacity > 0 && cached_[idx]) || holder_of(idx) >= 0 || page_cache_->contains(idx)) {
        ++pos;
        continue;
      }
      const Run run = run_from(dataset_, batch, pos, *page_cache_);
      const Time done = serve_storage(arrival, run.bytes);
      for (; pos < run.end; ++pos) {
        ready[pos] = done;
        page_cache_->access(batch[pos], dataset_.samples[batch[pos]].length);
      }
    }
  }
}

// The simulated path: every worker's next sample read happens in time order,
// so the storage queue and the caches see requests as they arrive. A batch's
// dispatch is known once the batch prefetch_factor * workers before it was
// delivered; batch i's is known when next() asks for it, and any batch
// dispatched later starts after batch i is delivered, so the steps taken
// here (all no later than batch i's last) are final.
Time ModelledLoader::simulate_until_finished(std::size_t i) {
  const std::size_t workers = workers_.size();
  const std::size_t in_flight = static_cast<std::size_t>(options_.prefetch_factor) * workers;
  auto dispatch = [&](std::size_t b) -> Time {
    if (options_.num_workers == 0) return b == next_ ? consumer_dispatch_ : -1;
    if (b < in_flight) return epoch_start_;
    return delivered_[b - in_flight];
  };
  while (finish_[i] < 0) {
    std::size_t best = workers;
    Time best_t = 0;
    for (std::size_t w = 0; w < workers; ++w) {
      const WorkerState& ws = workers_[w];
      Time t;
      if (ws.batch != SIZE_MAX) {
        t = ws.t;
      } else {
        if (ws.next_batch >= batches_.size()) continue;
        const Time d = dispatch(ws.next_batch);
        if (d < 0) continue;
        t = std::max(d, worker_free_[w]);
      }
      if (best == workers || t < best_t) {
        best = w;
        best_t = t;
      }
    }
    if (best == workers) throw std::logic_error("modelled loader: no worker can take the batch asked for");
    WorkerState& ws = workers_[best];
    if (ws.batch == SIZE_MAX) {
      ws.batch = ws.next_batch;
      ws.next_batch += workers;
      ws.pos = ws.fetched_until = 0;
      ws.t = ws.started = best_t;
      ws.read = ws.decode = 0;
      if (submits_batches() && ws.ready.count(ws.batch) == 0) submit_reads(ws, ws.t);
    }
    const std::vector<std::size_t>& batch = batches_[ws.batch];
    const Time before = ws.t;
    const Duration read = sample_step(ws, ws.t);
    ws.read += read;
    ws.decode += ws.t - before - read;
    if (++ws.pos < batch.size()) continue;
    const std::size_t b = ws.batch;
    finish_[b] = ws.t + scaled(model_.collate_per_batch);
    read_[b] = ws.read;
    decode_[b] = ws.decode;
    worker_free_[best] = finish_[b];
    ws.ready.erase(b);
    ws.batch = SIZE_MAX;
    if (trace_ && trace_->tracing()) {
      const int track = options_.num_workers == 0 ? -1 : static_cast<int>(best);
      trace_->add_host_span({fmt::format("batch {}", b), "loader", loader_trace_process(options_.rank, track),
                             std::max(track, 0), ws.started, finish_[b]});
    }
  }
  return finish_[i];
}

int ModelledLoader::holder_of(std::size_t idx) const {
  // The directory's epochs count the epochs this loader began (0-based).
  return fetch_ ? model_.distributed_cache->holder(idx, stats_.epochs.size()) : -1;
}

}  // namespace gpemu::pipeline
