// The modelled loader (loader_model.h): a sample's modelled cost, the
// loader's construction and CPU share, its epochs, when each batch is ready
// (the timeline path, the closed-form one with a preprocessing service, GPU
// decode), its batches, figures and description. The simulated path's sample
// reads through the caches and the storage device are loader_model_reads.cpp.
#include "gpemu/pipeline.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "pipeline/prep_service_model.h"

namespace gpemu::pipeline {
namespace {

void validate(const LoaderOptions& o, const LoaderModelOptions& m) {
  if (o.batch_size == 0) throw InputError("batch size 0 is impossible: it must be at least 1");
  if (o.num_workers < 0) throw InputError(fmt::format("{} workers is impossible: use 0 or more", o.num_workers));
  if (o.prefetch_factor < 1)
    throw InputError(fmt::format("prefetch factor {} is impossible: it must be at least 1", o.prefetch_factor));
  if (m.read_per_sample < 0 || m.decode_per_sample < 0 || m.collate_per_batch < 0 || !(m.read_bytes_per_s >= 0) ||
      !(m.decode_ns_per_byte >= 0) || !std::isfinite(m.read_bytes_per_s) || !std::isfinite(m.decode_ns_per_byte))
    throw InputError("loader model: costs must be finite and not negative");
  if (m.cores < 0 || m.loader_threads < 0)
    throw InputError("loader model: cores and loader threads must not be negative");
}

}  // namespace

SampleCost model_sample_cost(const Sample& sample, bool decode_images, const LoaderModelOptions& m) {
  SampleCost c;
  const double bytes = static_cast<double>(sample.length);
  // ns_from_double refuses a read time past the clock's range (a bandwidth near
  // 0) instead of wrapping it into a short or negative one.
  c.read =
      m.read_per_sample +
      (m.read_bytes_per_s > 0 ? ns_from_double(bytes * 1e9 / m.read_bytes_per_s, bytes / m.read_bytes_per_s, "s") : 0);
  if (decode_images && m.gpu_decode) {
    // The GPU decodes (gpu_decode.cpp); without a JPEG engine the host threads entropy-decode first.
    if (sample.format == SampleFormat::Jpeg && !m.gpu_decode->engine)
      c.decode = ns_from_double(bytes * m.decode_ns_per_byte, bytes * m.decode_ns_per_byte * 1e-9, "s");
  } else if (decode_images && sample.format == SampleFormat::Jpeg)
    c.decode =
        m.decode_per_sample + ns_from_double(bytes * m.decode_ns_per_byte, bytes * m.decode_ns_per_byte * 1e-9, "s");
  else if (decode_images && sample.format == SampleFormat::RawRgb)
    c.decode = m.decode_per_sample;  // pixels already: the crop, resize and normalisation only
  return c;
}

ModelledLoader::ModelledLoader(Clock& clock, Dataset dataset, LoaderOptions options, LoaderModelOptions model,
                               Timeline* trace)
    : ModelledLoader(clock, std::make_shared<const Dataset>(std::move(dataset)), std::move(options), std::move(model),
                     trace) {}

// A null dataset is the caller's bug, refused in the initializer: the reference below is bound to it.
ModelledLoader::ModelledLoader(Clock& clock, std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                               LoaderModelOptions model, Timeline* trace, std::unique_ptr<BatchSource> inner)
    : clock_(clock),
      data_(dataset ? std::move(dataset) : throw std::invalid_argument("ModelledLoader: null dataset")),
      dataset_(*data_),
      options_(std::move(options)),
      model_(model),
      trace_(trace),
      sampler_(dataset_.size(), sampler_options(options_)),
      inner_(std::move(inner)) {
  validate(options_, model_);
  if (options_.gpu_decode) model_.gpu_decode = options_.gpu_decode;
  if (dataset_.size() == 0) throw InputError(fmt::format("dataset '{}' has no samples", dataset_.root));
  if (on_timeline() && !trace_)
    throw std::logic_error("ModelledLoader: modelled preprocessing or a storage link needs the loader's timeline");
  if (model_.preprocess) preprocess_.emplace(*model_.preprocess, model_.preprocess_seed);
  const int cores = model_.cores > 0 ? model_.cores : std::max(1u, std::thread::hardware_concurrency());
  const int threads = model_.loader_threads > 0 ? model_.loader_threads : std::max(1, options_.num_workers);
  share_ = std::max(1.0, static_cast<double>(threads) / cores);
  busy_ = std::min(threads, cores);
  output_bytes_per_image_ = 3ull * static_cast<std::uint64_t>(options_.transform.height) *
                            static_cast<std::uint64_t>(options_.transform.width) * sizeof(float);
  const int ranks = std::max(1, model_.ranks_sharing);
  if (model_.storage) {
    if (model_.storage_tenancy) storage_tenants_ = model_.storage_tenancy->tenants();
    storage_ = std::make_unique<StorageServer>(storage_device(storage_tenants_));
    page_cache_ = std::make_unique<PageCacheModel>(model_.page_cache_bytes / static_cast<std::uint64_t>(ranks));
  }
  if (model_.cache_bytes > 0) {
    admission_ = cache_admission(dataset_, model_.cache_bytes / static_cast<std::uint64_t>(ranks), model_.cache_policy);
    cached_.assign(dataset_.size(), false);
  }
  if (const auto& dc = model_.distributed_cache) {
    if (model_.node < 0 || model_.node >= dc->nodes())
      throw InputError(
          fmt::format("loader model: node {} of a distributed cache over {} nodes", model_.node, dc->nodes()));
    fetch_ = std::make_unique<StorageServer>(shared_by(dc->fetch(), ranks));
  }
  if (const auto& p = model_.prep_service; p && p->workers > 0 && p->offload != PrepOffload::None) {
    if (storage_ || admission_.capacity > 0 || fetch_ || model_.gpu_decode || on_timeline() || inner_)
      throw InputError(
          "a preprocessing service's workers read from memory: it does not combine with a storage device, a loader "
          "cache, a distributed cache, GPU decode or DLIO's modelled loading");
    prep_ = std::make_unique<PrepServiceModel>(*p);
  }
  if (model_.cpu_pool) model_.cpu_pool->threads += std::max(1, options_.num_workers);  // last: nothing throws after
}

ModelledLoader::~ModelledLoader() {
  if (model_.cpu_pool) model_.cpu_pool->threads -= std::max(1, options_.num_workers);
}

double ModelledLoader::efficiency() const {
  if (!model_.scaling) return 1.0;
  const int busy =
      model_.cpu_pool ? std::min(model_.cpu_pool->threads.load(), std::max(1, model_.cpu_pool->cores)) : busy_;
  return model_.scaling->efficiency(busy);
}

Duration ModelledLoader::scaled(Duration d) const {
  const double factor = share() / efficiency();
  return factor == 1.0 ? d : static_cast<Duration>(std::llround(static_cast<double>(d) * factor));
}

LoaderStats::Epoch ModelledLoader::cumulative() const {
  LoaderStats::Epoch e;
  e.epoch = epoch_;
  e.cache_hits = stats_.cache_hits;
  e.remote_hits = stats_.remote_hits;
  e.network_bytes = stats_.network_bytes;
  if (storage_) {
    e.storage_requests = storage_->requests();
    e.storage_bytes = storage_->bytes();
  }
  return e;
}

LoaderStats::Epoch ModelledLoader::open_epoch() const {
  LoaderStats::Epoch e = cumulative();
  e.cache_hits -= epoch_base_.cache_hits;
  e.remote_hits -= epoch_base_.remote_hits;
  e.network_bytes -= epoch_base_.network_bytes;
  e.storage_requests -= epoch_base_.storage_requests;
  e.storage_bytes -= epoch_base_.storage_bytes;
  return e;
}

LoaderStats ModelledLoader::stats() const {
  if (inner_) return inner_->stats();
  LoaderStats s = stats_;
  if (begun_) s.epochs.push_back(open_epoch());
  s.cache_resident_bytes = cache_used_;
  if (storage_) {  // the device counts what it served
    s.storage_requests = storage_->requests();
    s.storage_bytes = storage_->bytes();
    s.page_cache_resident_bytes = page_cache_->resident_bytes();
  }
  return s;
}

void ModelledLoader::begin_epoch(std::uint64_t epoch) {
  if (inner_) inner_->begin_epoch(epoch);
  if (begun_) stats_.epochs.push_back(open_epoch());
  epoch_ = epoch;
  begun_ = true;
  epoch_base_ = cumulative();
  epoch_start_ = clock_.now();
  const auto& dc = model_.distributed_cache;
  const std::vector<std::size_t> order = dc && dc->kind() == DistributedCacheKind::LocalityAware
                                             ? locality_aware_order(sampler_, epoch)
                                             : epoch_order(sampler_, dataset_, options_, epoch);
  batches_.clear();
  for (std::size_t i = 0; i < order.size(); i += options_.batch_size) {
    const std::size_t n = std::min(options_.batch_size, order.size() - i);
    if (n < options_.batch_size && options_.drop_last) break;
    batches_.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                          order.begin() + static_cast<std::ptrdiff_t>(i + n));
  }
  if (model_.batches_per_epoch > 0 && batches_.size() > model_.batches_per_epoch)
    batches_.resize(model_.batches_per_epoch);
  finish_.assign(batches_.size(), -1);
  delivered_.assign(batches_.size(), -1);
  read_.assign(batches_.size(), 0);
  decode_.assign(batches_.size(), 0);
  worker_free_.assign(static_cast<std::size_t>(std::max(1, options_.num_workers)), epoch_start_);
  next_ = 0;
  gpu_free_ = epoch_start_;
  if (prep_) prep_->begin_epoch(epoch_start_, batches_.size());
  workers_.assign(worker_free_.size(), WorkerState{});
  for (std::size_t w = 0; w < workers_.size(); ++w) workers_[w].next_batch = w;
  if (page_cache_ && model_.page_cache_cold) page_cache_->clear();
  if (on_timeline()) {
    issued_.assign(batches_.size(), Completion{});
    is_issued_.assign(batches_.size(), false);
    lanes_.assign(worker_free_.size(), Completion{});
    const std::size_t in_flight =
        static_cast<std::size_t>(options_.prefetch_factor) * static_cast<std::size_t>(options_.num_workers);
    for (std::size_t i = 0; i < std::min(in_flight, batches_.size()); ++i) issue(i);
  }
}

// The timeline path: batch i's preprocessing and its bytes over the storage
// link, on its worker's lane, from now (its dispatch).
void ModelledLoader::issue(std::size_t i) {
  Duration d = 0;
  std::uint64_t bytes = 0;
  for (const std::size_t idx : batches_[i]) {
    if (preprocess_) d += from_seconds(preprocess_->next_seconds());
    bytes += model_.link_bytes_per_sample > 0 ? model_.link_bytes_per_sample : dataset_.samples[idx].length;
  }
  Duration own = model_.collate_per_batch;
  for (const std::size_t idx : batches_[i]) {
    const SampleCost c = model_sample_cost(dataset_.samples[idx], options_.decode_images, model_);
    own += c.read + c.decode;
  }
  OpSpec spec;
  spec.lower_bound = trace_->issue_time();
  spec.duration = d + scaled(own);
  if (model_.storage_link && bytes > 0) {
    spec.link = model_.storage_link;
    spec.bytes = static_cast<double>(bytes);
  }
  spec.trace = false;
  Completion& lane = lanes_[i % lanes_.size()];
  const Completion deps[1] = {lane};
  issued_[i] = trace_->issue(spec, deps);
  is_issued_[i] = true;
  lane = issued_[i];
}

Time ModelledLoader::finish_of(std::size_t i) {
  if (finish_[i] >= 0) return finish_[i];
  if (simulated()) return simulate_until_finished(i);
  Duration read = 0, decode = 0;
  for (std::size_t idx : batches_[i]) {
    const SampleCost c = model_sample_cost(dataset_.samples[idx], options_.decode_images, model_);
    read += c.read;
    decode += c.decode;
  }
  Duration collate = model_.collate_per_batch;
  const int workers = options_.num_workers;
  const std::size_t in_flight = static_cast<std::size_t>(options_.prefetch_factor) * std::max(workers, 1);
  const Time dispatched = workers == 0 ? clock_.now() : i < in_flight ? epoch_start_ : delivered_[i - in_flight];
  // Round robin; with a preprocessing service, the worker free first (the client takes batches as they come).
  std::size_t w = workers == 0 ? 0 : i % static_cast<std::size_t>(workers);
  if (prep_ && workers > 0)
    w = static_cast<std::size_t>(std::min_element(worker_free_.begin(), worker_free_.end()) - worker_free_.begin());
  Time arrived = -1;  // made by the service: when its part is in the client's memory
  if (prep_) {
    const PrepOffload off = prep_->options().offload;
    std::uint64_t bytes = 0;
    for (std::size_t idx : batches_[i]) {
      const Sample& s = dataset_.samples[idx];
      bytes +=
          off != PrepOffload::Read && options_.decode_images && is_image(s.format) ? output_bytes_per_image_ : s.length;
    }
    const Duration prefix = read + (off == PrepOffload::Read ? 0 : decode) + (off == PrepOffload::All ? collate : 0);
    // What the client is left with: taking the bytes in (its read), and the suffix.
    const Duration r_read = prep_->receive_cpu(bytes), r_decode = off == PrepOffload::Read ? decode : 0,
                   r_collate = off == PrepOffload::All ? 0 : collate;
    // Decoded samples or whole batches from the service need no loader worker: the service client's threads
    // take them in (and batch them); after `read` the client's own map decodes them on its workers.
    const bool whole = off != PrepOffload::Read;
    const Time lane = std::max(dispatched, workers == 0 ? clock_.now() : worker_free_[w]);
    const Time local_ready = lane + scaled(read) + scaled(decode) + scaled(collate);
    const Time remote_ready = prep_->remote_left() ? std::max(whole ? dispatched : lane,
                                                              prep_->arrival(i, prefix, bytes, delivered_, false)) +
                                                         scaled(r_read) + scaled(r_decode) + scaled(r_collate)
                                                   : -1;
    if (prep_->remote_left() && (!prep_->local_left() || remote_ready < local_ready)) {
      arrived = prep_->arrival(i, prefix, bytes, delivered_, true);
      stats_.network_bytes += bytes;
      read = r_read;
      decode = r_decode;
      collate = r_collate;
      if (whole) {
        read_[i] = scaled(read);
        decode_[i] = 0;
        return finish_[i] = remote_ready;
      }
    } else {
      prep_->take_local();
    }
  }
  read_[i] = scaled(read);
  decode_[i] = scaled(decode);
  const Duration cost = read_[i] + decode_[i] + scaled(collate);

  Time start;
  int track;
  if (workers == 0) {
    start = std::max(clock_.now(), arrived);  // loaded in the consumer's thread, inside next()
    track = -1;
  } else {
    start = std::max({dispatched, worker_free_[w], arrived});
    worker_free_[w] = start + cost;
    track = static_cast<int>(w);
  }
  finish_[i] = start + cost;
  if (trace_ && trace_->tracing()) {
    const std::string process = loader_trace_process(options_.rank, track);
    const int thread = std::max(track, 0);
    trace_->add_host_span({fmt::format("batch {}", i), "loader", process, thread, start, finish_[i]});
    trace_->add_host_span({"read", "loader", process, thread, start, start + read_[i]});
    if (decode_[i] > 0)
      trace_->add_host_span({"decode", "loader", process, thread, start + read_[i], start + read_[i] + decode_[i]});
  }
  return finish_[i];
}

std::optional<LoadedBatch> ModelledLoader::next(const SleepFn& sleep_until) {
  if (!begun_) begin_epoch(0);
  std::optional<LoadedBatch> given;  // the inner source's batch: its data, timed here
  if (inner_ && !(given = inner_->next(sleep_until))) return std::nullopt;
  if (next_ >= batches_.size()) {
    if (!given) return std::nullopt;
    ++next_;  // beyond the modelled batches: as the inner source gives it
    given->ready = clock_.now();
    return given;
  }
  const std::size_t i = next_;
  const bool images = options_.decode_images && is_image(dataset_.samples[batches_[i].front()].format);
  Time ready;
  GpuDecodeCost gpu;
  if (on_timeline()) {
    if (!is_issued_[i]) issue(i);
    ready = sleep_until ? trace_->wait(issued_[i], sleep_until) : trace_->wait(issued_[i]);
    // Its slot in the prefetch queue goes to the batch prefetch_factor x workers after it.
    const std::size_t in_flight =
        static_cast<std::size_t>(options_.prefetch_factor) * static_cast<std::size_t>(options_.num_workers);
    if (options_.num_workers > 0 && i + in_flight < batches_.size()) issue(i + in_flight);
  } else {
    if (options_.num_workers == 0) consumer_dispatch_ = clock_.now();
    // Batches are computed in order; a batch's dispatch depends only on
    // earlier deliveries, so everything it needs is known now.
    ready = finish_of(i);
    if (model_.gpu_decode && images) {
      // The GPU stage takes batches in order, once their host part is done and
      // one of its queue_depth output buffers is free (the batch that many
      // before was delivered).
      gpu = gpu_decode_cost(*model_.gpu_decode, dataset_, batches_[i], options_.transform);
      const auto depth = static_cast<std::size_t>(std::max(1, model_.gpu_decode->queue_depth));
      const Time start = std::max({ready, gpu_free_, i >= depth ? delivered_[i - depth] : epoch_start_});
      gpu_free_ = ready = start + gpu.engine + gpu.sm;
    }
    if (ready > clock_.now()) {
      if (sleep_until)
        sleep_until(ready);
      else
        clock_.sleep_until(ready);
    }
  }
  delivered_[i] = clock_.now();
  ++next_;
  if (given) {
    given->ready = clock_.now();
    return given;
  }

  LoadedBatch b;
  b.epoch = epoch_;
  b.index = i;
  b.samples = static_cast<std::int64_t>(batches_[i].size());
  b.sample_indices = batches_[i];
  if (model_.gpu_decode && images) {
    // The host copies the files' bytes; the decoded batch is already on the device.
    for (std::size_t idx : batches_[i]) b.bytes += dataset_.samples[idx].length;
    b.gpu_decode = gpu.sm;
    b.pipeline_device_bytes = gpu.device_bytes;
  } else if (images) {
    b.bytes = output_bytes_per_image_ * batches_[i].size();
  } else {
    for (std::size_t idx : batches_[i]) b.bytes += dataset_.samples[idx].length;
  }
  b.memory = options_.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
  b.ready = ready;
  b.read = read_[i];
  b.decode = decode_[i];
  ++stats_.batches;
  stats_.samples += batches_[i].size();
  return b;
}

std::size_t ModelledLoader::batches_per_epoch() const {
  if (inner_) return inner_->batches_per_epoch();
  const std::size_t n = sampler_.size();
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

std::size_t ModelledLoader::samples_per_epoch() const {
  if (inner_) return inner_->samples_per_epoch();
  return options_.drop_last ? batches_per_epoch() * options_.batch_size : sampler_.size();
}

std::string ModelledLoader::describe() const {
  if (inner_) return inner_->describe() + ", modelled preprocessing/storage";
  return fmt::format(
             "modelled loader: {} worker{}, prefetch factor {}, {}; per sample {} us read + {} ns/byte"
             "{}, CPU share x{}",
             options_.num_workers, options_.num_workers == 1 ? "" : "s", options_.prefetch_factor,
             options_.pin_memory ? "pinned" : "pageable", to_us(model_.read_per_sample),
             model_.read_bytes_per_s > 0 ? fmt::format("{:.3g}", 1e9 / model_.read_bytes_per_s) : std::string("0"),
             options_.decode_images ? fmt::format(", decode {} us + {} ns/byte", to_us(model_.decode_per_sample),
                                                  model_.decode_ns_per_byte)
                                    : std::string(),
             fmt::format("{:.2f}", share())) +
         (model_.scaling ? fmt::format(", per-worker efficiency {:.3f} ({})", efficiency(), model_.scaling->source)
                         : std::string()) +
         (storage_ ? fmt::format("; storage {}, page cache {}{}", storage_->device().name,
                                 model_.page_cache_bytes == UINT64_MAX
                                     ? std::string("unlimited")
                                     : fmt::format("{:.1f} MiB", page_cache_->capacity_bytes() / 1048576.0),
                                 model_.page_cache_cold ? " (dropped each epoch)" : "")
                   : std::string()) +
         (admission_.capacity > 0 ? fmt::format("; loader cache {:.1f} MiB ({})", admission_.capacity / 1048576.0,
                                                to_string(admission_.policy))
                                  : std::string()) +
         (model_.distributed_cache
              ? fmt::format("; {} distributed cache over {} nodes (this loader on node {}), remote reads {}",
                            to_string(model_.distributed_cache->kind()), model_.distributed_cache->nodes(), model_.node,
                            fetch_->device().name)
              : std::string()) +
         (dataset_.page_size > 0 ? fmt::format("; FFCV-style file: {} reads, quasi-random order, raw samples not "
                                               "entropy-decoded, {:.3f} ms a batch after decoding",
                                               to_string(options_.read_method), to_ms(model_.collate_per_batch))
                                 : std::string()) +
         (model_.gpu_decode ? "; " + pipeline::describe(*model_.gpu_decode) : std::string()) +
         (prep_ ? "; " + pipeline::describe(prep_->options()) : std::string());
}

}  // namespace gpemu::pipeline
