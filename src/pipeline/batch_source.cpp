#include "gpemu/pipeline.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::pipeline {

BatchSource::~BatchSource() = default;

std::uint64_t staging_bytes(const Dataset& dataset, const LoaderOptions& o, int ranks) {
  std::uint64_t per_sample = 0;
  const std::uint64_t image = 3ull * static_cast<std::uint64_t>(o.transform.height) *
                              static_cast<std::uint64_t>(o.transform.width) * sizeof(float);
  for (const Sample& s : dataset.samples)
    per_sample = std::max(per_sample, is_image(s.format) && o.decode_images ? image : s.length);
  const std::uint64_t batch = per_sample * o.batch_size;
  const std::uint64_t buffer = (batch + (1u << 20) - 1) / (1u << 20) * (1u << 20);
  const auto per_loader =
      static_cast<std::uint64_t>(o.prefetch_factor) * static_cast<std::uint64_t>(std::max(1, o.num_workers)) + 2;
  return static_cast<std::uint64_t>(std::max(1, ranks)) * per_loader * buffer;
}

std::string loader_trace_process(int rank, int worker) {
  return worker < 0 ? fmt::format("GPU {} loader main thread", rank) : fmt::format("GPU {} loader worker", rank);
}

// ---- SyntheticSource ----------------------------------------------------------

SyntheticSource::SyntheticSource(Clock& clock, std::int64_t batches, int batch_size, std::uint64_t bytes_per_sample,
                                 HostMemoryKind memory)
    : clock_(clock), batches_(batches), batch_size_(batch_size), bytes_per_sample_(bytes_per_sample), memory_(memory) {
  if (batches < 0) throw InputError(fmt::format("iterations {} is impossible: it must be 0 or more", batches));
  if (batch_size < 1) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", batch_size));
}

SyntheticSource::SyntheticSource(Clock& clock, Sampler sampler, int batch_size, std::uint64_t bytes_per_sample,
                                 HostMemoryKind memory)
    : clock_(clock),
      batches_(0),
      batch_size_(batch_size),
      bytes_per_sample_(bytes_per_sample),
      memory_(memory),
      sampler_(std::move(sampler)) {
  if (batch_size < 1) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", batch_size));
  batches_ = static_cast<std::int64_t>(sampler_->size() / static_cast<std::size_t>(batch_size));
}

void SyntheticSource::begin_epoch(std::uint64_t epoch) {
  epoch_ = epoch;
  next_ = 0;
  if (sampler_) order_ = sampler_->indices(epoch);
}

std::optional<LoadedBatch> SyntheticSource::next(const SleepFn&) {
  if (next_ >= batches_) return std::nullopt;
  LoadedBatch b;
  b.epoch = epoch_;
  b.index = static_cast<std::size_t>(next_++);
  b.samples = batch_size_;
  b.bytes = bytes_per_sample_ * static_cast<std::uint64_t>(batch_size_);
  b.memory = memory_;
  b.ready = clock_.now();
  ++stats_.batches;
  stats_.samples += static_cast<std::uint64_t>(batch_size_);
  if (sampler_) {
    const auto first = order_.begin() + static_cast<std::ptrdiff_t>(b.index) * batch_size_;
    b.sample_indices.assign(first, first + batch_size_);
  }
  return b;
}

std::string SyntheticSource::describe() const {
  return fmt::format("in-memory batches ({} host memory, always ready)", to_string(memory_));
}

// ---- PipelineSource -----------------------------------------------------------

PipelineSource::PipelineSource(Clock& clock, Dataset dataset, LoaderOptions options, PipelineSourceOptions source)
    : clock_(clock), source_(source) {
  const std::optional<std::int64_t> epoch = clock.monotonic_epoch_ns();
  if (!epoch && !source.untimed)
    throw InputError(
        "the real data loader runs in wall time and cannot feed a virtual-clock run: use the modelled loader "
        "(ModelledLoader; `gpemu train --clock virtual` does)");
  loader_ = std::make_unique<DataLoader>(std::move(dataset), std::move(options));
  // Loader times are steady-clock (CLOCK_MONOTONIC) ns from origin(): on a
  // clock that follows wall time they map exactly; an untimed source on a
  // simulated clock only places them from now().
  if (epoch) {
    offset_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(loader_->origin().time_since_epoch()).count() - *epoch;
  } else {
    const auto since_origin =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - loader_->origin())
            .count();
    offset_ = clock_.now() - since_origin;
  }
}

PipelineSource::~PipelineSource() = default;

Time PipelineSource::to_clock(Time loader_ns) const { return loader_ns + offset_; }

void PipelineSource::begin_epoch(std::uint64_t epoch) {
  if (source_.cold) {
    // The files this rank reads this epoch.
    std::set<std::string> seen;
    std::vector<std::string> files;
    const auto& samples = loader_->dataset().samples;
    for (std::size_t i : loader_->sampler().indices(epoch))
      if (seen.insert(samples[i].path).second) files.push_back(samples[i].path);
    evict_from_page_cache(files);
  }
  loader_->begin_epoch(epoch);
}

std::optional<LoadedBatch> PipelineSource::next(const SleepFn& sleep_until) {
  std::optional<Batch> b = loader_->next();
  if (!b) return std::nullopt;
  LoadedBatch out;
  out.epoch = b->epoch;
  out.index = b->index;
  out.samples = static_cast<std::int64_t>(b->size());
  out.bytes = b->data_bytes();
  out.memory = b->pinned() ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
  out.sample_indices = b->sample_indices;
  if (source_.untimed) {
    out.ready = clock_.now();
  } else {
    out.ready = to_clock(b->timing.finished_at);
    out.read = b->timing.read_ns;
    out.decode = b->timing.decode_ns;
  }
  if (const auto& gpu = loader_->options().gpu_decode; gpu && !b->sample_indices.empty() && b->gpu_crop_pixels > 0) {
    const GpuDecodeCost c =
        gpu_decode_cost(*gpu, b->gpu_jpeg_pixels, b->gpu_crop_pixels, b->size(), loader_->options().transform);
    out.gpu_decode = c.sm;
    out.pipeline_device_bytes = c.device_bytes;
    // The JPEG engine decodes batches in order, each once the workers have parsed it.
    if (c.engine > 0) {
      const Time parsed = source_.untimed ? clock_.now() : to_clock(b->timing.finished_at);
      engine_free_ = std::max(engine_free_, parsed) + c.engine;
      if (engine_free_ > clock_.now()) sleep_until ? sleep_until(engine_free_) : clock_.sleep_until(engine_free_);
      out.ready = std::max(out.ready, engine_free_);
    }
  }
  if (!source_.untimed && source_.trace && source_.trace->tracing()) {
    const std::string process = loader_trace_process(source_.rank, b->worker);
    const int thread = std::max(b->worker, 0);
    const Time start = to_clock(b->timing.started_at);
    const Time end = to_clock(b->timing.finished_at);
    // read and decode alternate sample by sample inside the batch; the trace
    // shows the batch with its summed read time, then its summed decode time.
    source_.trace->add_host_span({fmt::format("batch {}", b->index), "loader", process, thread, start, end});
    const Time read_end = std::min(end, start + b->timing.read_ns);
    source_.trace->add_host_span({"read", "loader", process, thread, start, read_end});
    source_.trace->add_host_span(
        {"decode", "loader", process, thread, read_end, std::min(end, read_end + b->timing.decode_ns)});
  }
  out.keep_alive = std::make_shared<Batch>(std::move(*b));
  return out;
}

std::size_t PipelineSource::batches_per_epoch() const { return loader_->batches_per_epoch(); }
std::size_t PipelineSource::samples_per_epoch() const { return loader_->sampler().size(); }

std::string PipelineSource::describe() const {
  const auto& o = loader_->options();
  return fmt::format(
      "real loader: {} worker{}, prefetch factor {}, {}{}{}{}{}{}", o.num_workers, o.num_workers == 1 ? "" : "s",
      o.prefetch_factor,
      o.pin_memory ? (o.pin_mode == PinMode::Lock ? "pinned (locked)" : "pinned (accounted, not locked)") : "pageable",
      o.cache || o.cache_bytes
          ? fmt::format(", loader cache {} MiB ({})", (o.cache ? o.cache->capacity_bytes() : o.cache_bytes) >> 20,
                        to_string(o.cache ? o.cache->admission().policy : o.cache_policy))
          : "",
      o.distributed_cache ? fmt::format(", {} distributed cache over {} real nodes",
                                        to_string(o.distributed_cache->kind()), o.distributed_cache->nodes())
                          : "",
      source_.cold ? ", cold page cache each epoch" : "",
      o.read_method == ReadMethod::IoUring ? ", io_uring reads" : "",
      o.gpu_decode ? ", " + pipeline::describe(*o.gpu_decode) : "");
}

}  // namespace gpemu::pipeline
