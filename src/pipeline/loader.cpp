#include "gpemu/pipeline.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "gpemu/error.h"
#include "pipeline/io_uring_reader.h"
#include "pipeline/mapped_files.h"
#include "pipeline/sample_decode.h"

namespace gpemu::pipeline {

std::span<const float> Batch::images() const {
  if (layout != BatchLayout::Images || buffer_.data() == nullptr) return {};
  return {reinterpret_cast<const float*>(buffer_.data()), buffer_.size() / sizeof(float)};
}

std::span<const std::byte> Batch::bytes() const { return {buffer_.data(), buffer_.size()}; }

namespace {

struct Task {
  std::uint64_t generation = 0;
  std::uint64_t epoch = 0;
  std::size_t index = 0;
  std::vector<std::size_t> indices;
  std::uint64_t begun = 0;  // the epochs begun before this one (the distributed cache's epoch)
  // Superbatch: the first of a worker's k batches carries the later ones, to read with it.
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> ahead;
};

// A later batch's bytes, read with an earlier one of its superbatch.
struct Stored {
  std::uint64_t generation = 0;
  std::vector<std::vector<std::byte>> bytes;  // per position in the batch
  std::vector<std::string> errors;
  std::vector<char> from;  // where each came from: kRead, kCached or kRemote (counted when it is used)
};

constexpr char kRead = 0, kCached = 1, kRemote = 2;

struct Result {
  Batch batch;
  std::exception_ptr error;
  bool cancelled = false;
};

// A sample's bytes read ahead of its decode (io_uring): a span into the
// reader's buffer or the loader cache, or why it could not be read.
struct Fetched {
  std::span<const std::byte> bytes;
  std::string error;
};

struct WorkerContext {
  WorkerContext(int id, const LoaderOptions& o, const FileReader::NoteFn& note) : id(id), reader(o.direct_io, note) {
    // The ring holds a whole batch, so all of its reads can be in flight at once.
    if (o.read_method == ReadMethod::IoUring)
      uring = std::make_unique<IoUringReader>(
          static_cast<unsigned>(std::min<std::size_t>(o.batch_size * std::max<std::size_t>(o.superbatch, 1), 4096)),
          o.direct_io, note);
  }
  int id;
  FileReader reader;
  JpegDecoder decoder;
  std::unique_ptr<IoUringReader> uring;        // read_method == IoUring
  std::vector<ReadRequest> requests;           // the batch's cache misses
  std::vector<std::size_t> request_slot;       // their positions in the batch
  std::vector<Fetched> fetched;                // per position in the batch
  std::map<std::size_t, Stored> stored;        // superbatch: later batches' bytes, by batch index
  Stored stored_in_use;                        // the batch being built from kept bytes
  std::vector<std::vector<std::byte>> remote;  // io_uring: per position in the batch, bytes from another node's cache
  std::vector<std::byte> remote_one;           // pread: the sample's bytes from another node's cache
};

void validate(const LoaderOptions& o, const Dataset& ds) {
  auto bad = [](const std::string& what) { throw InputError("data loader: " + what); };
  if (o.batch_size < 1) bad("batch_size must be >= 1");
  if (o.num_workers < 0) bad("num_workers " + std::to_string(o.num_workers) + " must be >= 0");
  if (o.prefetch_factor < 1) bad("prefetch_factor " + std::to_string(o.prefetch_factor) + " must be >= 1");
  const auto& t = o.transform;
  if (t.height < 1 || t.width < 1 || t.height > 16384 || t.width > 16384) {
    bad("output image size " + std::to_string(t.height) + "x" + std::to_string(t.width) + " must be within 1..16384");
  }
  if (!(t.scale_min > 0 && t.scale_min <= t.scale_max && t.scale_max <= 1.0)) {
    bad("crop scale range must satisfy 0 < min <= max <= 1");
  }
  if (!(t.ratio_min > 0 && t.ratio_min <= t.ratio_max)) bad("crop ratio range must satisfy 0 < min <= max");
  for (float s : t.std) {
    if (!(s > 0)) bad("normalisation std values must be > 0");
  }
  if (ds.samples.empty()) bad("dataset '" + ds.root + "' has no samples");
  if (o.read_method == ReadMethod::IoUring && !io_uring_support().available) bad(io_uring_support().message());
  if (o.superbatch < 1 || o.superbatch > 4096) bad("superbatch " + std::to_string(o.superbatch) + " must be 1 to 4096");
  if (o.superbatch > 1 && o.read_method != ReadMethod::IoUring)
    bad("a superbatch of " + std::to_string(o.superbatch) +
        " submits several batches' reads at once, which needs io_uring reads (read method 'io_uring')");
  const bool from_memory = o.read_method == ReadMethod::Mmap || o.read_method == ReadMethod::ProcessCache;
  if (from_memory && ds.page_size == 0)
    bad("read method '" + std::string(to_string(o.read_method)) +
        "' reads an FFCV-style file ('gpemu dataset ffcv'); '" + ds.root + "' is not one: use 'pread' or 'io_uring'");
  if (o.decode_images) {
    bool jpeg = false, bytes = false;
    for (const auto& s : ds.samples) (is_image(s.format) ? jpeg : bytes) = true;
    if (jpeg && bytes) {
      bad("dataset '" + ds.root +
          "' mixes JPEG images and byte records; a batch holds one kind "
          "(set decode_images=false to read everything as bytes)");
    }
  }
}

// An FFCV-style file's raw RGB sample as a crop region: the whole image,
// already pixels, and the augmentation's box in it.
DecodedCrop raw_crop(std::span<const std::byte> bytes, const Sample& s, const Augmentation& aug) {
  if (bytes.size() != std::uint64_t{s.width} * s.height * 3)
    throw InputError("raw RGB sample of " + std::to_string(bytes.size()) + " bytes is not " + std::to_string(s.width) +
                     "x" + std::to_string(s.height) + "x3");
  DecodedCrop c;
  c.rgb = reinterpret_cast<const std::uint8_t*>(bytes.data());
  c.stride = static_cast<int>(s.width) * 3;
  c.region_width = c.info.width = static_cast<int>(s.width);
  c.region_height = c.info.height = static_cast<int>(s.height);
  c.info.components = 3;
  c.box_x = aug.box.x;
  c.box_y = aug.box.y;
  c.box_width = aug.box.width;
  c.box_height = aug.box.height;
  return c;
}

}  // namespace

struct DataLoader::Impl {
  Impl(Dataset ds, LoaderOptions o)
      : dataset(std::move(ds)),
        opt(std::move(o)),
        sampler(dataset.size(), sampler_options(opt)),
        origin(std::chrono::steady_clock::now()) {
    images = opt.decode_images && is_image(dataset.samples.front().format);
    if (opt.distributed_cache && !opt.cache)
      throw std::logic_error("data loader: a distributed cache needs the node's loader cache (LoaderOptions::cache)");
    cache = opt.cache
                ? opt.cache
                : (opt.cache_bytes > 0
                       ? std::make_shared<LoaderCache>(cache_admission(dataset, opt.cache_bytes, opt.cache_policy))
                       : nullptr);
    const std::size_t in_flight = static_cast<std::size_t>(opt.prefetch_factor) * std::max(opt.num_workers, 1);
    pool = StagingPool::create(opt.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable, opt.pin_mode,
                               in_flight + 2);
    const auto workers = static_cast<std::size_t>(std::max(opt.num_workers, 0));
    queues.resize(workers);
    worker_cv = std::make_unique<std::condition_variable[]>(std::max<std::size_t>(workers, 1));
    stats.direct_io_active = opt.direct_io;
    if (opt.read_method == ReadMethod::Mmap || opt.read_method == ReadMethod::ProcessCache)
      mapped = std::make_unique<MappedFiles>(opt.read_method == ReadMethod::ProcessCache, dataset.page_size);
  }

  Dataset dataset;
  LoaderOptions opt;
  Sampler sampler;
  std::chrono::steady_clock::time_point origin;
  bool images = true;
  std::shared_ptr<LoaderCache> cache;
  std::shared_ptr<StagingPool> pool;
  std::unique_ptr<MappedFiles> mapped;  // FFCV-style files: mmap or the process cache

  // Shared with workers, guarded by mu.
  std::mutex mu;
  std::condition_variable result_cv;
  std::unique_ptr<std::condition_variable[]> worker_cv;
  std::vector<std::deque<Task>> queues;
  std::map<std::size_t, Result> results;
  bool stopping = false;
  std::atomic<bool> stop_flag{false};
  std::atomic<std::uint64_t> generation{0};
  std::vector<std::thread> threads;

  // Consumer thread only.
  std::uint64_t epochs_begun = 0;
  bool any_epoch = false;
  bool epoch_active = false;
  std::uint64_t epoch = 0;
  std::vector<std::vector<std::size_t>> plan;
  std::size_t next_dispatch = 0;
  std::size_t next_deliver = 0;
  std::unique_ptr<WorkerContext> inline_ctx;

  mutable std::mutex stats_mu;
  LoaderStats stats;
  bool fallback_reported = false;

  Time now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin).count();
  }

  void note(const std::string& text) {
    std::lock_guard lock(stats_mu);
    stats.direct_io_active = false;
    if (!fallback_reported) {
      fallback_reported = true;
      stats.notes.push_back(text);
      std::cerr << "gpemu data loader: " << text << "\n";
    }
  }

  FileReader::NoteFn note_fn() {
    return [this](const std::string& text) { note(text); };
  }

  bool cancelled(const Task& t) const { return stop_flag.load() || generation.load() != t.generation; }

  // The loader cache's side of one sample: its bytes when cached (counting the
  // hit or the miss), and admitting what was read on a miss.
  std::optional<std::span<const std::byte>> cached(const Sample& s, Batch& b) {
    if (!cache) return std::nullopt;
    if (auto c = cache->lookup(s.path, s.offset)) {
      ++b.cache_hits;
      return *c;
    }
    ++b.cache_misses;
    return std::nullopt;
  }
  void count_read(std::size_t idx, std::span<const std::byte> bytes, Batch& b) {
    const Sample& s = dataset.samples[idx];
    b.bytes_read += s.length;
    ++b.storage_reads;
    if (cache && cache->admit(s.path, s.offset, bytes) && opt.distributed_cache) opt.distributed_cache->admitted(idx);
  }
  // A sample this node's cache missed: from the other node whose cache holds
  // it (the distributed cache across real nodes) into `into`, counted as a
  // remote hit; false when no other node holds it, or the one asked answers
  // that it does not.
  bool remote(std::size_t idx, std::uint64_t begun, std::vector<std::byte>& into, Batch& b) {
    RealDistributedCache* dc = opt.distributed_cache.get();
    if (!dc) return false;
    const int node = dc->remote_holder(idx, begun);
    if (node < 0 || !dc->fetch(node, idx, into)) return false;
    ++b.remote_hits;
    b.network_bytes += into.size();
    return true;
  }

  // io_uring: looks every sample of the batch up in the cache and reads all
  // misses at once, before the first decode. Failures stay per sample. Byte
  // records (staging != null) are read straight into their place in the
  // batch, which holds them back to back.
  void read_ahead(WorkerContext& ctx, const Task& task, Batch& b, std::byte* staging) {
    const Time t0 = now();
    ctx.fetched.assign(task.indices.size(), Fetched{});
    ctx.requests.clear();
    ctx.request_slot.clear();
    // Read with an earlier batch of its superbatch: take the kept bytes
    // (what was kept for an abandoned epoch goes).
    if (!ctx.stored.empty() && ctx.stored.begin()->second.generation != task.generation) ctx.stored.clear();
    if (auto it = ctx.stored.find(task.index); it != ctx.stored.end()) {
      Stored& st = it->second;
      if (st.generation == task.generation) {
        for (std::size_t k = 0; k < task.indices.size(); ++k) {
          ctx.fetched[k].bytes = st.bytes[k];
          ctx.fetched[k].error = st.errors[k];
          if (st.from[k] == kCached) {
            ++b.cache_hits;
          } else if (st.from[k] == kRemote) {
            ++b.cache_misses;
            ++b.remote_hits;
            b.network_bytes += st.bytes[k].size();
          } else if (st.errors[k].empty()) {
            if (cache) ++b.cache_misses;
            count_read(task.indices[k], st.bytes[k], b);
          }
        }
        b.timing.read_ns += now() - t0;
        // Freed with the next read_ahead; the spans stay valid through this batch's build.
        ctx.stored_in_use = std::move(st);
        ctx.stored.erase(it);
        return;
      }
      ctx.stored.erase(it);
    }
    std::size_t place = 0;
    if (opt.distributed_cache) ctx.remote.resize(std::max(ctx.remote.size(), task.indices.size()));
    for (std::size_t k = 0; k < task.indices.size(); ++k) {
      const Sample& s = dataset.samples[task.indices[k]];
      std::byte* destination = staging ? staging + place : nullptr;
      place += s.length;
      if (auto c = cached(s, b)) {
        ctx.fetched[k].bytes = *c;
        continue;
      }
      if (opt.distributed_cache && remote(task.indices[k], task.begun, ctx.remote[k], b)) {
        ctx.fetched[k].bytes = ctx.remote[k];
        continue;
      }
      ctx.requests.push_back(ReadRequest{s.path, s.offset, s.length, destination});
      ctx.request_slot.push_back(k);
    }
    // The later batches of a superbatch: their misses join the same submission.
    const std::size_t own = ctx.requests.size();
    std::vector<std::pair<std::size_t, std::size_t>> later_slot;  // (ahead batch, position) per extra request
    std::vector<Stored> later(task.ahead.size());
    for (std::size_t a = 0; a < task.ahead.size(); ++a) {
      const std::vector<std::size_t>& indices = task.ahead[a].second;
      later[a].generation = task.generation;
      later[a].bytes.resize(indices.size());
      later[a].errors.resize(indices.size());
      later[a].from.assign(indices.size(), kRead);
      for (std::size_t k = 0; k < indices.size(); ++k) {
        const Sample& s = dataset.samples[indices[k]];
        if (cache) {
          if (auto c = cache->lookup(s.path, s.offset)) {
            later[a].bytes[k].assign(c->begin(), c->end());
            later[a].from[k] = kCached;
            continue;
          }
        }
        if (RealDistributedCache* dc = opt.distributed_cache.get()) {  // counted when its batch is built
          const int node = dc->remote_holder(indices[k], task.begun);
          if (node >= 0 && dc->fetch(node, indices[k], later[a].bytes[k])) {
            later[a].from[k] = kRemote;
            continue;
          }
        }
        ctx.requests.push_back(ReadRequest{s.path, s.offset, s.length, nullptr});
        later_slot.emplace_back(a, k);
      }
    }
    const auto results = ctx.uring->read_batch(ctx.requests);
    for (std::size_t j = own; j < results.size(); ++j) {
      const auto [a, k] = later_slot[j - own];
      if (!results[j].ok()) {
        later[a].errors[k] = results[j].error;
        continue;
      }
      later[a].bytes[k].assign(results[j].bytes.begin(), results[j].bytes.end());
    }
    for (std::size_t a = 0; a < task.ahead.size(); ++a) ctx.stored[task.ahead[a].first] = std::move(later[a]);
    for (std::size_t j = 0; j < own; ++j) {
      Fetched& f = ctx.fetched[ctx.request_slot[j]];
      if (!results[j].ok()) {
        f.error = results[j].error;
        continue;
      }
      f.bytes = results[j].bytes;
      count_read(task.indices[ctx.request_slot[j]], f.bytes, b);
    }
    b.timing.read_ns += now() - t0;
  }

  // GPU decode's host part of one sample (pipeline.h, "GPU decode"): its
  // header parsed, and entropy-decoded without a JPEG engine; its pixels
  // counted for the GPU's share. Timed as decoding.
  void host_part_of_gpu_decode(WorkerContext& ctx, const Sample& s, std::span<const std::byte> bytes, Batch& b) {
    const Time t0 = now();
    const double out = static_cast<double>(opt.transform.height) * static_cast<double>(opt.transform.width);
    double px = static_cast<double>(s.width) * static_cast<double>(s.height);
    if (s.format == SampleFormat::Jpeg) {
      const JpegInfo info = ctx.decoder.host_part(bytes, !opt.gpu_decode->engine);
      px = static_cast<double>(info.width) * static_cast<double>(info.height);
      b.gpu_jpeg_pixels += px;
    }
    b.gpu_crop_pixels += std::min(px, out);
    b.timing.decode_ns += now() - t0;
  }

  Result build_batch(WorkerContext& ctx, const Task& task) {
    Result r;
    Batch& b = r.batch;
    b.epoch = task.epoch;
    b.index = task.index;
    b.worker = ctx.id;
    // GPU decode: the workers parse and deliver the files' bytes; the GPU decodes (emulated).
    const bool gpu = images && opt.gpu_decode.has_value();
    const bool decode_here = images && !gpu;
    b.layout = decode_here ? BatchLayout::Images : BatchLayout::Bytes;
    b.timing.started_at = now();
    try {
      const auto& t = opt.transform;
      const std::size_t slot = static_cast<std::size_t>(3) * t.height * t.width * sizeof(float);
      std::size_t total = 0;
      if (decode_here) {
        total = slot * task.indices.size();
      } else {
        for (auto idx : task.indices) total += dataset.samples[idx].length;
      }
      Time c0 = now();
      b.buffer_ = pool->acquire(total);
      b.timing.collate_ns += now() - c0;

      std::size_t used = 0;
      b.byte_offsets.clear();
      if (!decode_here) b.byte_offsets.push_back(0);
      if (ctx.uring) {
        if (cancelled(task)) {
          r.cancelled = true;
          return r;
        }
        read_ahead(ctx, task, b, decode_here ? nullptr : b.buffer_.data());
      }
      for (std::size_t k = 0; k < task.indices.size(); ++k) {
        const std::size_t idx = task.indices[k];
        if (cancelled(task)) {
          r.cancelled = true;
          return r;
        }
        const Sample& s = dataset.samples[idx];
        try {
          const Time t0 = now();
          std::span<const std::byte> bytes;
          if (ctx.uring) {  // read (or found in the cache) by read_ahead
            if (!ctx.fetched[k].error.empty()) throw InputError(ctx.fetched[k].error);
            bytes = ctx.fetched[k].bytes;
          } else if (auto c = cached(s, b)) {
            bytes = *c;
          } else if (opt.distributed_cache && remote(idx, task.begun, ctx.remote_one, b)) {
            bytes = ctx.remote_one;
          } else if (mapped) {
            bytes = mapped->read(s.path, s.offset, s.length);
            count_read(idx, bytes, b);
          } else {
            bytes = ctx.reader.read(s.path, s.offset, s.length);
            count_read(idx, bytes, b);
          }
          const Time t1 = now();
          b.timing.read_ns += t1 - t0;
          if (decode_here) {
            const std::uint64_t seed = sample_seed(opt.seed, task.epoch, idx);
            auto* out = reinterpret_cast<float*>(b.buffer_.data() + used);
            if (s.format == SampleFormat::RawRgb) {
              const Augmentation aug =
                  draw_augmentation(static_cast<int>(s.width), static_cast<int>(s.height), t, seed);
              resize_normalize(raw_crop(bytes, s, aug), aug.flip, t, out);
            } else {
              decode_jpeg_sample(ctx.decoder, bytes, seed, t, opt.jpeg_validation, out);
            }
            used += slot;
            b.timing.decode_ns += now() - t1;
          } else {
            if (gpu) host_part_of_gpu_decode(ctx, s, bytes, b);
            const Time t2 = now();
            // io_uring reads land in place; after a skipped sample they move up.
            std::byte* place = b.buffer_.data() + used;
            if (!bytes.empty() && bytes.data() != place) std::memmove(place, bytes.data(), bytes.size());
            used += bytes.size();
            b.byte_offsets.push_back(used);
            b.timing.read_ns += now() - t2;
          }
          b.sample_indices.push_back(idx);
          b.labels.push_back(s.label);
        } catch (const PeerCacheError&) {
          r.error = std::current_exception();  // the run's error, not the sample's
          return r;
        } catch (const std::exception& e) {
          if (opt.on_error == OnError::Stop) {
            // No hint at LoaderOptions::on_error: neither `gpemu train` nor a
            // DLIO workload lets a user set it.
            r.error = std::make_exception_ptr(
                InputError("data loader: sample " + std::to_string(idx) + " '" + s.path + "': " + e.what()));
            return r;
          }
          b.skipped.push_back(SampleError{idx, s.path, e.what()});
        }
      }
      c0 = now();
      b.buffer_.set_size(used);
      const auto n = static_cast<std::int64_t>(b.sample_indices.size());
      if (decode_here) {
        b.shape = {n, 3, t.height, t.width};
      } else {
        bool uniform = n > 0;
        for (std::size_t i = 1; i + 1 < b.byte_offsets.size() && uniform; ++i) {
          uniform = b.byte_offsets[i + 1] - b.byte_offsets[i] == b.byte_offsets[1] - b.byte_offsets[0];
        }
        b.shape = uniform ? std::vector<std::int64_t>{n, static_cast<std::int64_t>(b.byte_offsets[1])}
                          : std::vector<std::int64_t>{static_cast<std::int64_t>(used)};
      }
      b.timing.collate_ns += now() - c0;
    } catch (...) {
      r.error = std::current_exception();  // not a sample's fault: out of memory, pinned memory refused
    }
    b.timing.finished_at = now();
    return r;
  }

  void worker_main(int id) {
    std::unique_ptr<WorkerContext> ctx;
    std::exception_ptr start_error;  // e.g. an io_uring ring refused: every batch of this worker reports it
    try {
      ctx = std::make_unique<WorkerContext>(id, opt, note_fn());
    } catch (const InputError& e) {
      start_error = std::make_exception_ptr(
          InputError("data loader: worker " + std::to_string(id) + " could not start: " + e.what()));
    } catch (...) {
      start_error = std::current_exception();
    }
    for (;;) {
      Task task;
      {
        std::unique_lock lock(mu);
        worker_cv[id].wait(lock, [&] { return stopping || !queues[id].empty(); });
        if (stopping) return;
        task = std::move(queues[id].front());
        queues[id].pop_front();
      }
      Result r;
      if (ctx) {
        r = build_batch(*ctx, task);
      } else {
        r.error =
            start_error
                ? start_error
                : std::make_exception_ptr(Error("data loader: worker " + std::to_string(id) + " could not start"));
      }
      {
        std::lock_guard lock(mu);
        if (!r.cancelled && task.generation == generation.load()) {
          std::size_t first_unfinished = next_deliver_shared;
          while (results.count(first_unfinished) != 0) ++first_unfinished;
          if (task.index > first_unfinished) ++out_of_order;
          results.emplace(task.index, std::move(r));
        }
      }
      result_cv.notify_all();
    }
  }
  std::size_t next_deliver_shared = 0;  // copy of next_deliver under mu, for workers
  std::uint64_t out_of_order = 0;       // guarded by mu

  void start_workers() {
    if (!threads.empty() || opt.num_workers == 0) return;
    {
      std::lock_guard lock(mu);
      stopping = false;
      stop_flag = false;
    }
    for (int i = 0; i < opt.num_workers; ++i) threads.emplace_back([this, i] { worker_main(i); });
  }

  void join_workers() {
    {
      std::lock_guard lock(mu);
      stopping = true;
      stop_flag = true;
      for (auto& q : queues) q.clear();
    }
    for (int i = 0; i < opt.num_workers; ++i) worker_cv[i].notify_all();
    for (auto& t : threads) t.join();
    threads.clear();
    std::lock_guard lock(mu);
    stopping = false;
    stop_flag = false;
  }

  // Drops what is queued or finished of the current epoch.
  void cancel_epoch() {
    std::map<std::size_t, Result> dropped;
    {
      std::lock_guard lock(mu);
      generation.fetch_add(1);
      for (auto& q : queues) q.clear();
      dropped.swap(results);
    }
    epoch_active = false;
    if (!opt.persistent_workers) join_workers();
  }

  void dispatch() {
    if (opt.num_workers == 0) return;
    const std::size_t limit = static_cast<std::size_t>(opt.prefetch_factor) * opt.num_workers;
    std::lock_guard lock(mu);
    next_deliver_shared = next_deliver;
    while (next_dispatch < plan.size() && next_dispatch - next_deliver < limit) {
      const auto w = next_dispatch % static_cast<std::size_t>(opt.num_workers);
      Task task{generation.load(), epoch, next_dispatch, plan[next_dispatch], epochs_begun - 1, {}};
      // The first of each k of this worker's batches reads the next k - 1 with it.
      const std::size_t workers = static_cast<std::size_t>(opt.num_workers);
      if (opt.superbatch > 1 && (next_dispatch / workers) % opt.superbatch == 0)
        for (std::size_t m = 1; m < opt.superbatch && next_dispatch + m * workers < plan.size(); ++m)
          task.ahead.emplace_back(next_dispatch + m * workers, plan[next_dispatch + m * workers]);
      queues[w].push_back(std::move(task));
      worker_cv[w].notify_one();
      ++next_dispatch;
    }
  }

  void begin_epoch(std::uint64_t e) {
    cancel_epoch();
    RealDistributedCache* dc = opt.distributed_cache.get();
    if (dc) {
      dc->begin_epoch(epochs_begun);  // waits for the directory of what the nodes cached before
      std::lock_guard lock(stats_mu);
      stats.epochs.push_back(LoaderStats::Epoch{.epoch = e});
    }
    ++epochs_begun;
    any_epoch = true;
    epoch_active = true;
    epoch = e;
    plan.clear();
    const auto order = dc && dc->kind() == DistributedCacheKind::LocalityAware ? locality_aware_order(sampler, e)
                                                                               : epoch_order(sampler, dataset, opt, e);
    for (std::size_t i = 0; i < order.size(); i += opt.batch_size) {
      const std::size_t end = std::min(order.size(), i + opt.batch_size);
      if (end - i < opt.batch_size && opt.drop_last) break;
      plan.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                        order.begin() + static_cast<std::ptrdiff_t>(end));
    }
    next_dispatch = 0;
    next_deliver = 0;
    start_workers();
    dispatch();
  }

  void finish_epoch() {
    epoch_active = false;
    if (!opt.persistent_workers) join_workers();
  }

  std::optional<Batch> next() {
    if (!any_epoch) begin_epoch(0);
    Duration waited = 0;
    for (;;) {
      if (!epoch_active) return std::nullopt;
      if (next_deliver >= plan.size()) {
        finish_epoch();
        return std::nullopt;
      }
      Result r;
      const Time w0 = now();
      if (opt.num_workers == 0) {
        if (!inline_ctx) {
          try {
            inline_ctx = std::make_unique<WorkerContext>(-1, opt, note_fn());
          } catch (...) {
            cancel_epoch();
            throw;
          }
        }
        r = build_batch(*inline_ctx,
                        Task{generation.load(), epoch, next_deliver, plan[next_deliver], epochs_begun - 1, {}});
        ++next_deliver;
      } else {
        {
          std::unique_lock lock(mu);
          result_cv.wait(lock, [&] { return results.count(next_deliver) != 0; });
          auto it = results.find(next_deliver);
          r = std::move(it->second);
          results.erase(it);
        }
        ++next_deliver;
        dispatch();
      }
      waited += now() - w0;
      {
        std::lock_guard lock(stats_mu);
        stats.skipped += r.batch.skipped.size();
      }
      if (r.error) {
        cancel_epoch();
        std::rethrow_exception(r.error);
      }
      if (r.batch.size() == 0) continue;  // every sample skipped
      Batch b = std::move(r.batch);
      b.timing.wait_ns = waited;
      b.timing.delivered_at = now();
      {
        std::lock_guard lock(stats_mu);
        ++stats.batches;
        stats.samples += b.size();
        stats.bytes_read += b.bytes_read;
        stats.cache_hits += b.cache_hits;
        stats.cache_misses += b.cache_misses;
        stats.remote_hits += b.remote_hits;
        stats.network_bytes += b.network_bytes;
        if (opt.distributed_cache && !stats.epochs.empty()) {
          LoaderStats::Epoch& s = stats.epochs.back();
          s.cache_hits += b.cache_hits;
          s.remote_hits += b.remote_hits;
          s.storage_requests += b.storage_reads;
          s.storage_bytes += b.bytes_read;
          s.network_bytes += b.network_bytes;
        }
      }
      if (next_deliver >= plan.size() && !opt.persistent_workers) join_workers();
      return b;
    }
  }
};

DataLoader::DataLoader(Dataset dataset, LoaderOptions options) {
  validate(options, dataset);
  impl_ = std::make_unique<Impl>(std::move(dataset), std::move(options));
}

DataLoader::~DataLoader() {
  if (impl_) impl_->join_workers();
}

void DataLoader::begin_epoch(std::uint64_t epoch) { impl_->begin_epoch(epoch); }
std::optional<Batch> DataLoader::next() { return impl_->next(); }

std::size_t DataLoader::batches_per_epoch() const {
  const std::size_t n = impl_->sampler.size(), bs = impl_->opt.batch_size;
  return impl_->opt.drop_last ? n / bs : (n + bs - 1) / bs;
}

const Dataset& DataLoader::dataset() const { return impl_->dataset; }
const Sampler& DataLoader::sampler() const { return impl_->sampler; }
const LoaderOptions& DataLoader::options() const { return impl_->opt; }
std::shared_ptr<LoaderCache> DataLoader::cache() const { return impl_->cache; }
std::chrono::steady_clock::time_point DataLoader::origin() const { return impl_->origin; }

LoaderStats DataLoader::stats() const {
  LoaderStats s;
  {
    std::lock_guard lock(impl_->stats_mu);
    s = impl_->stats;
  }
  {
    std::lock_guard lock(impl_->mu);
    s.out_of_order = impl_->out_of_order;
    if (impl_->cache) s.cache_resident_bytes = impl_->cache->used_bytes();
  }
  s.staging_allocations = impl_->pool->allocations();
  s.staging_reuses = impl_->pool->reuses();
  return s;
}

}  // namespace gpemu::pipeline
