// DLIO runner: the training loop of dlio_benchmark with gpemu's loader reading
// the real files and an emulated GPU per rank computing; DLIO's metrics.
#include "gpemu/dlio/runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/common/interrupt.h"
#include "gpemu/dlio/checkpoint.h"
#include "gpemu/dlio/figures.h"
#include "gpemu/error.h"
#include "gpemu/pipeline/loader.h"

namespace gpemu::dlio {

namespace fs = std::filesystem;

std::string_view to_string(DlioPhase p) {
  switch (p) {
    case DlioPhase::Generate: return "generate";
    case DlioPhase::Train: return "train";
    case DlioPhase::Eval: return "eval";
    case DlioPhase::Checkpoint: return "checkpoint";
  }
  return "?";
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;  // DLIO's "MB"

std::uint64_t seed_for(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// --- Records ------------------------------------------------------------------

struct StepRecord {
  std::uint64_t index = 0;  // 0-based within the epoch
  Duration load = 0;        // start of loading -> batch in hand (DLIO's batch_loaded)
  Duration compute = 0;     // start of compute -> synchronize returned (DLIO's compute)
  Duration proc = 0;        // start of loading -> end of compute (DLIO's batch_processed)
  Duration emulated = 0;    // the kernels' emulated durations
  std::uint64_t bytes = 0;  // sample bytes of the batch
  std::uint64_t samples = 0;
};

struct Block {
  Time start = 0, end = 0;
  std::vector<StepRecord> steps;
};

struct RankPhase {
  int rank = 0;
  int epoch = 0;
  std::vector<Block> blocks;
};

struct CheckpointRecord {
  int epoch = 0;
  std::uint64_t step = 0;
  int rank = 0;
  std::uint64_t bytes_written = 0, bytes_read = 0;
  double write_s = 0, read_s = 0;
  double emulated_s = 0;
};

struct Figures {
  std::uint64_t steps = 0, measured = 0, samples = 0;
  double au_pct = 0, samples_per_s = 0, bytes_per_s = 0;
  double compute_s = 0, total_s = 0, emulated_s = 0, load_wait_s = 0;
};

// DLIO's compute_metrics_train for one block: the first exclude_start steps of
// the block and the steps among the last exclude_end of the epoch are left out;
// total = block wall time - their proc times.
Figures block_figures(const Block& b, std::uint64_t epoch_steps, int exclude_start, int exclude_end) {
  Figures f;
  f.steps = b.steps.size();
  Duration excluded = 0, compute = 0, emulated = 0, load = 0;
  std::uint64_t bytes = 0;
  for (std::size_t k = 0; k < b.steps.size(); ++k) {
    const StepRecord& s = b.steps[k];
    const bool out = k < static_cast<std::size_t>(exclude_start) ||
                     s.index + static_cast<std::uint64_t>(exclude_end) >= epoch_steps;
    if (out) {
      excluded += s.proc;
      continue;
    }
    ++f.measured;
    f.samples += s.samples;
    compute += s.compute;
    emulated += s.emulated;
    load += s.load;
    bytes += s.bytes;
  }
  const Duration total = (b.end - b.start) - excluded;
  f.total_s = total > 0 ? to_seconds(total) : 0;
  f.compute_s = to_seconds(compute);
  f.emulated_s = to_seconds(emulated);
  f.load_wait_s = to_seconds(load);
  if (f.total_s > 0) {
    f.au_pct = compute > 0 ? 100.0 * to_seconds(compute) / f.total_s : 0;
    f.samples_per_s = static_cast<double>(f.samples) / f.total_s;
    f.bytes_per_s = static_cast<double>(bytes) / f.total_s;
  }
  return f;
}

// One rank's epoch: blocks weighted by their steps (DLIO's end_train).
Figures rank_figures(const RankPhase& p, std::uint64_t epoch_steps, int exclude_start, int exclude_end) {
  Figures f;
  double weight = 0;
  for (const Block& b : p.blocks) {
    const Figures bf = block_figures(b, epoch_steps, exclude_start, exclude_end);
    const auto n = static_cast<double>(bf.steps);
    f.steps += bf.steps;
    f.measured += bf.measured;
    f.samples += bf.samples;
    f.au_pct += bf.au_pct * n;
    f.samples_per_s += bf.samples_per_s * n;
    f.bytes_per_s += bf.bytes_per_s * n;
    f.compute_s += bf.compute_s;
    f.total_s += bf.total_s;
    f.emulated_s += bf.emulated_s;
    f.load_wait_s += bf.load_wait_s;
    weight += n;
  }
  if (weight > 0) {
    f.au_pct /= weight;
    f.samples_per_s /= weight;
    f.bytes_per_s /= weight;
  }
  return f;
}

nlohmann::json figures_json(const Figures& f) {
  return {{"steps", f.steps},
          {"measured_steps", f.measured},
          {"au_pct", f.au_pct},
          {"samples_per_s", f.samples_per_s},
          {"mb_per_s", f.bytes_per_s / kMiB},
          {"compute_s", f.compute_s},
          {"total_s", f.total_s},
          {"emulated_compute_s", f.emulated_s},
          {"load_wait_s", f.load_wait_s}};
}

// --- Modelled loading ------------------------------------------------------------

// The loader's work that gpemu models on the emulated timeline rather than
// doing for real: DLIO's per-sample preprocess_time and, when given, the
// transfer of the batch's bytes over a modelled storage link. Batches are
// dealt round-robin to `workers` lanes (one batch at a time each) and at most
// workers x prefetch are outstanding, as in PyTorch's DataLoader: batch i is
// issued when batch i - workers x prefetch is consumed. workers = 0 loads
// each batch when it is asked for.
class ModelledLoader {
 public:
  ModelledLoader(Timeline& tl, const Link* storage, int workers, int prefetch, TimeSampler& preprocess)
      : tl_(tl), storage_(storage), workers_(workers), depth_(static_cast<std::size_t>(workers) * prefetch),
        preprocess_(preprocess), lanes_(static_cast<std::size_t>(std::max(1, workers))) {}

  void begin(std::vector<std::uint64_t> batch_bytes, std::vector<std::uint64_t> batch_samples) {
    bytes_ = std::move(batch_bytes);
    samples_ = std::move(batch_samples);
    issued_.assign(bytes_.size(), Completion{});
    is_issued_.assign(bytes_.size(), false);
    for (auto& l : lanes_) l = Completion{};
    for (std::size_t i = 0; i < std::min(depth_, bytes_.size()); ++i) issue(i);
  }

  Completion ready(std::size_t i) {
    if (i >= bytes_.size()) return Completion{};
    if (!is_issued_[i]) issue(i);
    return issued_[i];
  }

  void consumed(std::size_t i) {
    if (workers_ > 0 && i + depth_ < bytes_.size()) issue(i + depth_);
  }

 private:
  void issue(std::size_t i) {
    Duration d = 0;
    for (std::uint64_t k = 0; k < samples_[i]; ++k) d += from_seconds(preprocess_.next_seconds());
    OpSpec spec;
    spec.lower_bound = tl_.issue_time();
    spec.duration = d;
    if (storage_ != nullptr && bytes_[i] > 0) {
      spec.link = storage_;
      spec.bytes = static_cast<double>(bytes_[i]);
    }
    spec.trace = false;
    Completion& lane = lanes_[i % lanes_.size()];
    const Completion deps[1] = {lane};
    issued_[i] = tl_.issue(spec, deps);
    is_issued_[i] = true;
    lane = issued_[i];
  }

  Timeline& tl_;
  const Link* storage_;
  int workers_;
  std::size_t depth_;
  TimeSampler& preprocess_;
  std::vector<Completion> lanes_;
  std::vector<std::uint64_t> bytes_, samples_;
  std::vector<Completion> issued_;
  std::vector<bool> is_issued_;
};

// --- The run ------------------------------------------------------------------

struct Shared {
  Shared(const DlioWorkload& w, const DlioRunOptions& o, Clock& clock, Timeline& tl, const GpuSpec& gpu)
      : w(w), o(o), clock(clock), tl(tl), gpu(gpu) {}
  const DlioWorkload& w;
  const DlioRunOptions& o;
  Clock& clock;
  Timeline& tl;
  const GpuSpec& gpu;
  int world_size = 1;
  std::uint64_t steps = 0;       // train steps per epoch
  std::uint64_t eval_steps = 0;  // eval steps per epoch
  const pipeline::Dataset* train_ds = nullptr;
  const pipeline::Dataset* eval_ds = nullptr;
  std::shared_ptr<pipeline::LoaderCache> train_cache, eval_cache;
  bool cost_model = false;
  Duration forward = 0, backward = 0;
  const Link* storage = nullptr;
  std::uint64_t shuffle_seed = 0;
  bool modelled_loading = false;
  bool synthetic = false;  // batches from memory, no file reads
  fs::path base_dir;

  std::mutex mu;  // guards checkpoints (held briefly, never across a wait)
  std::vector<CheckpointRecord> checkpoints;
  std::atomic<bool> stop{false};  // a rank failed: the others stop at their next step
};

struct RankResult {
  int rank = 0;
  std::vector<RankPhase> train, eval;
  pipeline::LoaderStats train_stats, eval_stats;
  std::exception_ptr stopped;  // why this rank stopped early
};

pipeline::LoaderOptions loader_options(const Shared& sh, int rank, std::int64_t batch,
                                       std::shared_ptr<pipeline::LoaderCache> cache) {
  const auto& r = sh.w.reader;
  pipeline::LoaderOptions lo;
  lo.batch_size = static_cast<std::size_t>(batch);
  lo.num_workers = std::max(0, r.read_threads);
  lo.prefetch_factor = std::max(1, r.prefetch_size);
  lo.pin_memory = r.pin_memory;
  lo.pin_mode = sh.o.lock_pinned_memory ? PinMode::Lock : PinMode::AccountOnly;
  lo.persistent_workers = true;  // DLIO's PyTorch loader keeps its workers
  lo.drop_last = true;           // DLIO runs whole batches only
  lo.shuffle = r.file_shuffle != Shuffle::Off || r.sample_shuffle != Shuffle::Off;
  lo.seed = sh.shuffle_seed;
  lo.rank = rank;
  lo.world_size = sh.world_size;
  lo.decode_images = sh.w.dataset.format == DataFormat::Jpeg;
  lo.direct_io = r.odirect;
  lo.cache = std::move(cache);
  lo.on_error = pipeline::OnError::Stop;
  return lo;
}

// Where a rank's batches come from: gpemu's DataLoader reading the files, or
// DLIO's synthetic loader (reader.data_loader: synthetic), which reads nothing
// and hands out the sampler's indices over one in-memory batch.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void begin_epoch(std::uint64_t epoch) = 0;
  // False when the epoch has no more batches.
  virtual bool next() = 0;
  virtual std::span<const std::size_t> indices() const = 0;
  virtual void release() {}
  virtual const pipeline::Sampler& sampler() const = 0;
  virtual std::size_t batch_size() const = 0;
  virtual std::uint64_t sample_bytes(std::size_t index) const = 0;
  virtual pipeline::LoaderStats stats() const = 0;
};

class LoaderSource : public BatchSource {
 public:
  LoaderSource(const pipeline::Dataset& ds, pipeline::LoaderOptions o) : loader_(ds, std::move(o)) {}
  void begin_epoch(std::uint64_t epoch) override { loader_.begin_epoch(epoch); }
  bool next() override {
    batch_ = loader_.next();
    return batch_.has_value();
  }
  std::span<const std::size_t> indices() const override { return batch_->sample_indices; }
  // The staging buffer goes back to the pool before the next wait.
  void release() override { batch_.reset(); }
  const pipeline::Sampler& sampler() const override { return loader_.sampler(); }
  std::size_t batch_size() const override { return loader_.options().batch_size; }
  std::uint64_t sample_bytes(std::size_t index) const override { return loader_.dataset().samples[index].length; }
  pipeline::LoaderStats stats() const override { return loader_.stats(); }

 private:
  pipeline::DataLoader loader_;
  std::optional<pipeline::Batch> batch_;
};

class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(std::size_t samples, std::uint64_t record_bytes, const pipeline::LoaderOptions& o)
      : sampler_(samples, pipeline::SamplerOptions{o.shuffle, o.seed, o.rank, o.world_size, o.drop_uneven_shards}),
        batch_(o.batch_size),
        record_bytes_(record_bytes) {}
  void begin_epoch(std::uint64_t epoch) override {
    order_ = sampler_.indices(epoch);
    pos_ = 0;
  }
  bool next() override {
    if (pos_ + batch_ > order_.size()) return false;
    current_ = {order_.data() + pos_, batch_};
    pos_ += batch_;
    ++stats_.batches;
    stats_.samples += batch_;
    return true;
  }
  std::span<const std::size_t> indices() const override { return current_; }
  const pipeline::Sampler& sampler() const override { return sampler_; }
  std::size_t batch_size() const override { return batch_; }
  std::uint64_t sample_bytes(std::size_t) const override { return record_bytes_; }
  pipeline::LoaderStats stats() const override { return stats_; }

 private:
  pipeline::Sampler sampler_;
  std::size_t batch_;
  std::uint64_t record_bytes_;
  std::vector<std::size_t> order_;
  std::size_t pos_ = 0;
  std::span<const std::size_t> current_;
  pipeline::LoaderStats stats_;
};

DeviceOptions device_options(int rank) {
  DeviceOptions d;
  d.index = rank;
  return d;
}

class RankRunner {
 public:
  RankRunner(Shared& sh, int rank, RankResult& out)
      : sh_(sh), w_(sh.w), rank_(rank), out_(out),
        device_(sh.tl, sh.gpu, device_options(rank)),
        stream_(device_.default_stream()),
        compute_draw_(w_.train.computation_time, seed_for(static_cast<std::uint64_t>(w_.train.seed), rank, 1)),
        eval_draw_(w_.evaluation.eval_time, seed_for(static_cast<std::uint64_t>(w_.train.seed), rank, 2)),
        preprocess_draw_(w_.reader.preprocess_time, seed_for(static_cast<std::uint64_t>(w_.train.seed), rank, 3)) {}

  void run() {
    out_.rank = rank_;
    if (!w_.workflow.train) {  // checkpoint-only mode
      for (const CheckpointEvent& e : checkpoint_schedule(w_, sh_.world_size)) checkpoint(e.epoch, e.step);
      return;
    }
    auto train = source(*sh_.train_ds, w_.reader.batch_size, sh_.train_cache);
    std::unique_ptr<BatchSource> eval;
    if (sh_.eval_ds != nullptr && sh_.eval_steps > 0) {
      eval = source(*sh_.eval_ds, w_.reader.batch_size_eval, sh_.eval_cache);
    }
    try {  // an epoch cut short is dropped; finished ones are kept for the report
      for (int epoch = 1; epoch <= w_.train.epochs; ++epoch) {
        out_.train.push_back(phase(DlioPhase::Train, epoch, *train, sh_.steps));
        if (checkpoint_after_epoch(w_, epoch)) checkpoint(epoch, sh_.steps);
        if (eval && eval_due(epoch)) out_.eval.push_back(phase(DlioPhase::Eval, epoch, *eval, sh_.eval_steps));
      }
    } catch (...) {
      out_.stopped = std::current_exception();
      sh_.stop = true;
    }
    out_.train_stats = train->stats();
    if (eval) out_.eval_stats = eval->stats();
  }

 private:
  std::unique_ptr<BatchSource> source(const pipeline::Dataset& ds, std::int64_t batch,
                                      std::shared_ptr<pipeline::LoaderCache> cache) {
    pipeline::LoaderOptions lo = loader_options(sh_, rank_, batch, std::move(cache));
    if (sh_.synthetic) {
      const auto record = static_cast<std::uint64_t>(std::llround(w_.dataset.record_length_bytes));
      return std::make_unique<SyntheticSource>(ds.size(), record, lo);
    }
    return std::make_unique<LoaderSource>(ds, std::move(lo));
  }

  bool eval_due(int epoch) const {
    const int first = w_.evaluation.eval_after_epoch;
    return epoch >= first && (epoch - first) % std::max(1, w_.evaluation.epochs_between_evals) == 0;
  }

  Duration launch_compute(DlioPhase p) {
    if (sh_.cost_model) {
      stream_.launch_kernel(sh_.forward, "forward");
      if (p == DlioPhase::Eval) return sh_.forward;
      stream_.launch_kernel(sh_.backward, "backward");
      return sh_.forward + sh_.backward;
    }
    TimeSampler& draw = p == DlioPhase::Train ? compute_draw_ : eval_draw_;
    const Duration d = from_seconds(draw.next_seconds());
    stream_.launch_kernel(d, p == DlioPhase::Train ? "compute" : "eval");
    return d;
  }

  RankPhase phase(DlioPhase p, int epoch, BatchSource& loader, std::uint64_t steps) {
    const std::uint64_t epoch_arg = w_.train.seed_change_epoch ? static_cast<std::uint64_t>(epoch - 1) : 0;
    RankPhase rp;
    rp.rank = rank_;
    rp.epoch = epoch;
    rp.blocks.emplace_back();
    rp.blocks.back().start = sh_.clock.now();
    loader.begin_epoch(epoch_arg);

    std::optional<ModelledLoader> model;
    if (sh_.modelled_loading) {
      model.emplace(sh_.tl, sh_.storage, w_.reader.read_threads, std::max(1, w_.reader.prefetch_size),
                    preprocess_draw_);
      const auto order = loader.sampler().indices(epoch_arg);
      const std::size_t b = loader.batch_size();
      std::vector<std::uint64_t> bytes(steps, 0), samples(steps, 0);
      for (std::uint64_t i = 0; i < steps && (i + 1) * b <= order.size(); ++i) {
        for (std::size_t k = i * b; k < (i + 1) * b; ++k) bytes[i] += loader.sample_bytes(order[k]);
        samples[i] = b;
      }
      model->begin(std::move(bytes), std::move(samples));
    }

    Time load_start = rp.blocks.back().start;
    for (std::uint64_t s = 0; s < steps; ++s) {
      throw_if_interrupted();
      if (sh_.stop) throw Error("stopped: another rank failed");
      if (!loader.next()) {
        throw Error(fmt::format("DLIO runner: rank {} ran out of {} batches at step {} of {} in epoch {}", rank_,
                                to_string(p), s + 1, steps, epoch));
      }
      if (model) {
        sh_.tl.wait(model->ready(s));
        model->consumed(s);
      }
      const Time loaded = sh_.clock.now();
      const Duration emulated = launch_compute(p);
      stream_.synchronize();
      const Time done = sh_.clock.now();

      StepRecord r;
      r.index = s;
      r.load = loaded - load_start;
      r.compute = done - loaded;
      r.proc = done - load_start;
      r.emulated = emulated;
      const std::span<const std::size_t> indices = loader.indices();
      r.samples = indices.size();
      for (std::size_t idx : indices) r.bytes += loader.sample_bytes(idx);
      rp.blocks.back().steps.push_back(r);
      if (sh_.tl.tracing() && loaded > load_start) {
        sh_.tl.add_host_span(HostSpan{"data wait", "stall", "host", rank_, load_start, loaded});
      }
      if (sh_.o.progress) {
        DlioProgress pr;
        pr.phase = p;
        pr.rank = rank_;
        pr.epoch = epoch;
        pr.step = s + 1;
        pr.steps = steps;
        pr.sample_indices = indices;
        pr.bytes = r.bytes;
        sh_.o.progress(pr);
      }
      loader.release();
      if (p == DlioPhase::Train && checkpoint_after_step(w_, epoch, s + 1)) {
        rp.blocks.back().end = sh_.clock.now();
        checkpoint(epoch, s + 1);
        rp.blocks.emplace_back();
        rp.blocks.back().start = sh_.clock.now();
      }
      load_start = sh_.clock.now();
    }
    rp.blocks.back().end = sh_.clock.now();
    if (rp.blocks.back().steps.empty() && rp.blocks.size() > 1) rp.blocks.pop_back();
    return rp;
  }

  void checkpoint(int epoch, std::uint64_t step) {
    if (!rank_writes_checkpoint(w_, rank_)) return;
    const Time c0 = sh_.clock.now();
    CheckpointIoOptions io;
    io.rank = rank_;
    io.world_size = sh_.world_size;
    io.epoch = epoch;
    io.step = step;
    io.read_back = sh_.o.checkpoint_read_back;
    io.base_dir = sh_.base_dir;
    const CheckpointResult r = write_checkpoint(w_, io);
    if (sh_.storage != nullptr && r.bytes_written + r.bytes_read > 0) {
      OpSpec spec;
      spec.lower_bound = sh_.tl.issue_time();
      spec.link = sh_.storage;
      spec.bytes = static_cast<double>(r.bytes_written + r.bytes_read);
      spec.trace = false;
      sh_.tl.wait(sh_.tl.issue(spec, {}));
    }
    const Time c1 = sh_.clock.now();
    if (sh_.tl.tracing()) sh_.tl.add_host_span(HostSpan{"checkpoint", "checkpoint", "host", rank_, c0, c1});
    CheckpointRecord rec;
    rec.epoch = epoch;
    rec.step = step;
    rec.rank = rank_;
    rec.bytes_written = r.bytes_written;
    rec.bytes_read = r.bytes_read;
    rec.write_s = r.write_seconds;
    rec.read_s = r.read_seconds;
    rec.emulated_s = to_seconds(c1 - c0);
    {
      std::lock_guard lock(sh_.mu);
      sh_.checkpoints.push_back(rec);
    }
    if (sh_.o.progress) {
      DlioProgress pr;
      pr.phase = DlioPhase::Checkpoint;
      pr.rank = rank_;
      pr.epoch = epoch;
      pr.step = step;
      pr.bytes = r.bytes_written;
      sh_.o.progress(pr);
    }
  }

  Shared& sh_;
  const DlioWorkload& w_;
  int rank_;
  RankResult& out_;
  Device device_;
  Stream& stream_;
  TimeSampler compute_draw_, eval_draw_, preprocess_draw_;
};

pipeline::Dataset to_dataset(const DlioData& d, bool jpeg) {
  pipeline::Dataset ds;
  ds.root = d.folder.string();
  for (const DlioDataFile& f : d.files) {
    for (std::uint64_t k = 0; k < f.samples; ++k) {
      pipeline::Sample s;
      s.path = f.path.string();
      s.offset = f.first_offset + k * f.record_length;
      s.length = f.record_length;
      s.format = jpeg ? pipeline::SampleFormat::Jpeg : pipeline::SampleFormat::Bytes;
      ds.samples.push_back(std::move(s));
    }
  }
  return ds;
}

nlohmann::json data_json(const DlioData& d) {
  return {{"folder", d.folder.string()}, {"files", d.files.size()}, {"samples", d.samples()},
          {"bytes", d.bytes()}, {"generated", d.generated}, {"skipped", d.skipped}, {"seconds", d.seconds}};
}

nlohmann::json loader_stats_json(const std::vector<RankResult>& results, bool eval) {
  std::uint64_t batches = 0, samples = 0, bytes = 0, hits = 0, misses = 0, ooo = 0;
  bool direct = false;
  std::set<std::string> notes;
  for (const auto& r : results) {
    const auto& s = eval ? r.eval_stats : r.train_stats;
    batches += s.batches;
    samples += s.samples;
    bytes += s.bytes_read;
    hits += s.cache_hits;
    misses += s.cache_misses;
    ooo += s.out_of_order;
    direct = direct || s.direct_io_active;
    notes.insert(s.notes.begin(), s.notes.end());
  }
  return {{"batches", batches},     {"samples", samples},      {"bytes_read", bytes},
          {"cache_hits", hits},     {"cache_misses", misses},  {"out_of_order", ooo},
          {"direct_io_active", direct}, {"notes", std::vector<std::string>(notes.begin(), notes.end())}};
}

// Per-epoch figures over ranks (AU: mean over ranks, DLIO's allreduce / size;
// samples/s and MB/s: summed over ranks) and the overall means over epochs.
nlohmann::json phase_json(const std::vector<RankResult>& results, bool eval, std::uint64_t epoch_steps,
                          const DlioWorkload& w, bool record_steps) {
  std::map<int, std::vector<std::pair<int, Figures>>> by_epoch;  // epoch -> (rank, figures)
  std::map<int, std::vector<const RankPhase*>> phases;
  for (const RankResult& r : results) {
    for (const RankPhase& p : eval ? r.eval : r.train) {
      by_epoch[p.epoch].emplace_back(
          r.rank, rank_figures(p, epoch_steps, w.output.exclude_start_steps, w.output.exclude_end_steps));
      phases[p.epoch].push_back(&p);
    }
  }
  nlohmann::json per_epoch = nlohmann::json::array();
  Figures overall;
  std::uint64_t steps_per_rank = 0;
  for (const auto& [epoch, list] : by_epoch) {
    Figures e;
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& [rank, f] : list) {
      e.au_pct += f.au_pct;
      e.samples_per_s += f.samples_per_s;
      e.bytes_per_s += f.bytes_per_s;
      e.compute_s += f.compute_s;
      e.total_s += f.total_s;
      e.emulated_s += f.emulated_s;
      e.load_wait_s += f.load_wait_s;
      e.steps = std::max(e.steps, f.steps);
      e.measured = std::max(e.measured, f.measured);
      e.samples += f.samples;
      nlohmann::json rj = figures_json(f);
      rj["rank"] = rank;
      ranks.push_back(std::move(rj));
    }
    const auto n = static_cast<double>(list.size());
    e.au_pct /= n;
    e.compute_s /= n;
    e.total_s /= n;
    e.emulated_s /= n;
    e.load_wait_s /= n;
    nlohmann::json ej = figures_json(e);
    ej["epoch"] = epoch;
    ej["ranks"] = std::move(ranks);
    if (record_steps) {
      nlohmann::json steps = nlohmann::json::array();
      for (const RankPhase* p : phases[epoch]) {
        for (std::size_t b = 0; b < p->blocks.size(); ++b) {
          for (const StepRecord& s : p->blocks[b].steps) {
            steps.push_back({{"rank", p->rank}, {"block", b}, {"step", s.index + 1}, {"load_s", to_seconds(s.load)},
                             {"compute_s", to_seconds(s.compute)}, {"proc_s", to_seconds(s.proc)},
                             {"emulated_s", to_seconds(s.emulated)}, {"bytes", s.bytes}});
          }
        }
      }
      ej["step_records"] = std::move(steps);
    }
    per_epoch.push_back(std::move(ej));
    overall.au_pct += e.au_pct;
    overall.samples_per_s += e.samples_per_s;
    overall.bytes_per_s += e.bytes_per_s;
    overall.compute_s += e.compute_s;
    overall.total_s += e.total_s;
    overall.emulated_s += e.emulated_s;
    overall.load_wait_s += e.load_wait_s;
    overall.measured += e.measured;
    overall.samples += e.samples;
    steps_per_rank += e.steps;
  }
  const auto epochs = static_cast<double>(by_epoch.size());
  nlohmann::json j;
  j["epochs"] = by_epoch.size();
  j["steps"] = steps_per_rank;
  j["au_pct"] = epochs > 0 ? overall.au_pct / epochs : 0.0;
  const double au_stdev = [&] {
    if (per_epoch.size() < 2) return 0.0;
    const double mean = overall.au_pct / epochs;
    double ss = 0;
    for (const auto& e : per_epoch) ss += std::pow(e["au_pct"].get<double>() - mean, 2);
    return std::sqrt(ss / epochs);
  }();
  j["au_stdev_pct"] = au_stdev;
  j["au_threshold_pct"] = 100.0 * w.metric.au;
  j["au_pass"] = epochs > 0 && meets_au_threshold(overall.au_pct / epochs, 100.0 * w.metric.au);
  j["samples_per_s"] = epochs > 0 ? overall.samples_per_s / epochs : 0.0;
  j["mb_per_s"] = epochs > 0 ? overall.bytes_per_s / epochs / kMiB : 0.0;
  j["mb_per_s_dlio"] = epochs > 0 ? overall.samples_per_s / epochs * w.dataset.record_length_bytes / kMiB : 0.0;
  j["compute_s"] = overall.compute_s;
  j["total_s"] = overall.total_s;
  j["emulated_compute_s"] = overall.emulated_s;
  j["load_wait_s"] = overall.load_wait_s;
  j["measured_steps"] = overall.measured;
  j["per_epoch"] = std::move(per_epoch);
  return j;
}

nlohmann::json checkpoints_json(const std::vector<CheckpointRecord>& records, nlohmann::json& top) {
  std::map<std::pair<int, std::uint64_t>, std::vector<const CheckpointRecord*>> events;
  for (const auto& r : records) events[{r.epoch, r.step}].push_back(&r);
  nlohmann::json list = nlohmann::json::array();
  std::uint64_t all_bytes = 0, all_read = 0;
  double all_write_s = 0, all_read_s = 0;
  for (const auto& [key, recs] : events) {
    std::uint64_t bytes = 0, read = 0;
    double write_s = 0, read_s = 0, emulated_s = 0;
    std::vector<int> ranks;
    for (const CheckpointRecord* r : recs) {
      bytes += r->bytes_written;
      read += r->bytes_read;
      write_s = std::max(write_s, r->write_s);  // ranks write at the same time
      read_s = std::max(read_s, r->read_s);
      emulated_s = std::max(emulated_s, r->emulated_s);
      ranks.push_back(r->rank);
    }
    std::sort(ranks.begin(), ranks.end());
    nlohmann::json e = {{"epoch", key.first}, {"step", key.second}, {"ranks", ranks}, {"bytes", bytes},
                        {"write_s", write_s}, {"write_gb_per_s", write_s > 0 ? bytes / write_s / 1e9 : 0.0},
                        {"emulated_s", emulated_s}};
    if (read > 0) {
      e["bytes_read"] = read;
      e["read_s"] = read_s;
      e["read_gb_per_s"] = read_s > 0 ? read / read_s / 1e9 : 0.0;
    }
    list.push_back(std::move(e));
    all_bytes += bytes;
    all_read += read;
    all_write_s += write_s;
    all_read_s += read_s;
  }
  if (!events.empty()) {
    top["checkpoint_gb_per_s"] = all_write_s > 0 ? all_bytes / all_write_s / 1e9 : 0.0;
    if (all_read > 0) top["checkpoint_read_gb_per_s"] = all_read_s > 0 ? all_read / all_read_s / 1e9 : 0.0;
  }
  return list;
}

// DLIO's AU leaves out output.metric.exclude_start_steps (and _end_) of every
// block between checkpoints; when that leaves no step, AU 0 % is not a
// measurement and "fail" is not a verdict.
std::optional<std::string> no_measured_step_warning(const DlioWorkload& w, const nlohmann::json& train) {
  if (train.value("epochs", 0) == 0 || train.value("measured_steps", 0) > 0) return std::nullopt;
  return fmt::format("no step was measured (output.metric.exclude_start_steps = {} and exclude_end_steps = {} leave "
                     "none of the {} steps of each block between checkpoints): AU and throughput are undefined, "
                     "not 0",
                     w.output.exclude_start_steps, w.output.exclude_end_steps,
                     w.checkpoint.steps_between_checkpoints > 0 && w.workflow.checkpoint
                         ? std::min<std::int64_t>(w.checkpoint.steps_between_checkpoints, train.value("steps", 0))
                         : train.value("steps", 0));
}

// After an early stop: the first rank's reason (a failure before a mere
// "another rank failed"), and every rank cut to the epochs all ranks finished,
// so per-epoch figures average over the same ranks.
std::exception_ptr keep_finished_epochs(std::vector<RankResult>& results) {
  std::exception_ptr first, fallback;
  std::size_t epochs = SIZE_MAX;
  for (const RankResult& r : results) {
    epochs = std::min(epochs, r.train.size());
    if (!r.stopped) continue;
    if (!fallback) fallback = r.stopped;
    try {
      std::rethrow_exception(r.stopped);
    } catch (const Interrupted&) {
      if (!first) first = r.stopped;
    } catch (const std::exception& e) {
      if (!first && std::string_view(e.what()) != "stopped: another rank failed") first = r.stopped;
    } catch (...) {
    }
  }
  if (!fallback) return nullptr;
  for (RankResult& r : results) {
    r.train.resize(std::min(r.train.size(), epochs));
    while (!r.eval.empty() && r.eval.back().epoch > static_cast<int>(epochs)) r.eval.pop_back();
  }
  return first ? first : fallback;
}

// Hands the finished epochs' result to the caller, then rethrows the reason.
[[noreturn]] void report_stopped(nlohmann::json& result, const std::exception_ptr& stopped, const DlioRunOptions& o) {
  try {
    std::rethrow_exception(stopped);
  } catch (const std::exception& e) {
    result["stopped"] = e.what();
  }
  if (o.on_stopped) o.on_stopped(result);
  std::rethrow_exception(stopped);
}

std::unique_ptr<Clock> make_run_clock(const DlioRunOptions& o) {
  if (o.clock == "real") {
    RealClockOptions co;
    co.spin_window = o.spin_window;
    return make_real_clock(co);
  }
  if (o.clock == "virtual") return make_virtual_clock();
  throw InputError(fmt::format("DLIO runner: clock '{}' is not valid; accepted: real, virtual", o.clock));
}

}  // namespace

nlohmann::json run_dlio_workload(const DlioWorkload& w, const DlioRunOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  // World size and ranks.
  if (o.world_size < 0) {
    throw InputError(fmt::format("DLIO runner: world size {} is not valid; accepted: an integer >= 1 (0: gpemu.world_size)",
                                 o.world_size));
  }
  const int ws = o.world_size > 0 ? o.world_size : w.gpemu.world_size;
  std::vector<int> ranks = o.ranks;
  if (ranks.empty()) {
    for (int r = 0; r < ws; ++r) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= ws || (i > 0 && ranks[i] == ranks[i - 1])) {
      throw InputError(fmt::format("DLIO runner: rank {} is not valid for world size {}; accepted: distinct ranks "
                                   "from 0 to {}",
                                   ranks[i], ws, ws - 1));
    }
  }
  if (o.storage_bytes_per_s && !(*o.storage_bytes_per_s > 0 && std::isfinite(*o.storage_bytes_per_s))) {
    throw InputError(fmt::format("DLIO runner: storage bandwidth {} bytes/s is not valid; accepted: a number > 0",
                                 *o.storage_bytes_per_s));
  }
  auto clock = make_run_clock(o);
  const GpuSpec& gpu = find_gpu(w.gpemu.gpu.empty() ? o.default_gpu : w.gpemu.gpu);
  const bool train = w.workflow.train;
  const bool leader = ranks.front() == 0;
  const fs::path base = o.base_dir.empty() ? fs::current_path() : o.base_dir;

  nlohmann::json result;
  result["workload"] = w.source;
  result["model"] = w.model.name;
  result["clock"] = std::string(clock->name());
  result["world_size"] = ws;
  result["ranks"] = ranks;
  result["gpu"] = gpu.id;
  std::vector<std::string> warnings = w.warnings;

  // --- data ---------------------------------------------------------------------
  DlioData train_data, eval_data;
  const bool want_eval = train && w.workflow.evaluation && w.dataset.num_files_eval > 0;
  nlohmann::json generation = nlohmann::json::object();
  // DLIO's synthetic loader (or format) reads no files: batches come from memory.
  const bool synthetic =
      w.reader.data_loader == DataLoaderKind::Synthetic || w.dataset.format == DataFormat::Synthetic;
  result["synthetic_data"] = synthetic;
  if (w.workflow.generate_data && w.dataset.format == DataFormat::Synthetic) {
    warnings.push_back("dataset.format synthetic: there are no files to generate");
  } else if (w.workflow.generate_data && leader) {
    train_data = generate_dlio_data(w, DlioSplit::Train, base, o.progress);
    generation["train"] = data_json(train_data);
    if (w.dataset.num_files_eval > 0) {
      eval_data = generate_dlio_data(w, DlioSplit::Eval, base, o.progress);
      generation["eval"] = data_json(eval_data);
    }
  }
  result["generation"] = generation;
  if (!train && !w.workflow.checkpoint) {
    result["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    result["warnings"] = warnings;
    result["not_emulated"] = w.not_emulated;
    return result;  // generate-only
  }

  const DlioFigures fig = dlio_figures(w, ws);
  Timeline timeline(*clock);
  if (o.trace) timeline.enable_trace(true);
  Shared shared(w, o, *clock, timeline, gpu);
  shared.world_size = ws;
  shared.steps = fig.steps_per_epoch_run;
  shared.base_dir = base;

  pipeline::Dataset train_ds, eval_ds;
  auto synthetic_data = [&](DlioSplit split) {
    DlioData d;
    d.folder = resolve_data_folder(w, base) / (split == DlioSplit::Train ? "train" : "valid");
    const std::int64_t n = split == DlioSplit::Train ? w.dataset.num_files_train : w.dataset.num_files_eval;
    const auto record = static_cast<std::uint64_t>(std::llround(w.dataset.record_length_bytes));
    for (std::int64_t i = 0; i < n; ++i) {
      DlioDataFile f;
      f.samples = static_cast<std::uint64_t>(w.dataset.num_samples_per_file);
      f.record_length = record;
      f.bytes = f.samples * record;
      d.files.push_back(std::move(f));
    }
    return d;
  };
  shared.synthetic = synthetic;
  if (train) {
    if (synthetic) {
      train_data = synthetic_data(DlioSplit::Train);
    } else if (train_data.files.empty()) {
      train_data = open_dlio_data(w, DlioSplit::Train, base);
    }
    const bool jpeg = w.dataset.format == DataFormat::Jpeg;
    train_ds = to_dataset(train_data, jpeg);
    if (shared.steps == 0) {
      throw InputError(fmt::format(
          "DLIO runner: {} samples give no step of reader.batch_size {} on {} rank(s) (DLIO: floor(samples / "
          "batch_size / world_size) = 0); use more files or a smaller batch",
          fig.total_samples_train, w.reader.batch_size, ws));
    }
    const std::uint64_t per_rank = (train_ds.size() + static_cast<std::uint64_t>(ws) - 1) / ws;
    if (per_rank / static_cast<std::uint64_t>(w.reader.batch_size) < shared.steps) {
      throw InputError(fmt::format("DLIO runner: '{}' holds {} samples, {} per rank: fewer than {} steps of {} "
                                   "need; regenerate the dataset",
                                   train_data.folder.string(), train_ds.size(), per_rank, shared.steps,
                                   w.reader.batch_size));
    }
    shared.train_ds = &train_ds;
    if (w.reader.read_type == ReadType::Memory) {
      shared.train_cache = std::make_shared<pipeline::LoaderCache>(train_ds.total_bytes());
    }
    if (w.train.total_training_steps > 0 && static_cast<std::uint64_t>(w.train.total_training_steps) > fig.steps_per_epoch) {
      warnings.push_back(fmt::format("train.total_training_steps = {} exceeds the {} steps an epoch has; DLIO stops "
                                     "with an error, gpemu runs {} steps per epoch",
                                     w.train.total_training_steps, fig.steps_per_epoch, fig.steps_per_epoch));
    }
    if (want_eval && fig.eval_steps_per_epoch > 0) {
      if (synthetic) {
        eval_data = synthetic_data(DlioSplit::Eval);
      } else if (eval_data.files.empty()) {
        eval_data = open_dlio_data(w, DlioSplit::Eval, base);
      }
      eval_ds = to_dataset(eval_data, jpeg);
      shared.eval_ds = &eval_ds;
      shared.eval_steps = fig.eval_steps_per_epoch;
      if (w.reader.read_type == ReadType::Memory) {
        shared.eval_cache = std::make_shared<pipeline::LoaderCache>(eval_ds.total_bytes());
      }
    } else if (w.workflow.evaluation) {
      warnings.push_back("workflow.evaluation is set but the evaluation set gives no step (dataset.num_files_eval, "
                         "reader.batch_size_eval); no evaluation was run");
    }
    const double host_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (!synthetic && host_bytes > 0 && static_cast<double>(train_data.bytes()) <= host_bytes) {
      warnings.push_back(fmt::format("the training set ({:.3f} GB) fits in host memory ({:.1f} GB): reads after the "
                                     "first epoch may come from the page cache (DLIO warns the same)",
                                     train_data.bytes() / 1e9, host_bytes / 1e9));
    }
    if (w.reader.file_shuffle != Shuffle::Off && w.reader.sample_shuffle == Shuffle::Off &&
        w.dataset.num_samples_per_file > 1) {
      warnings.push_back("reader.file_shuffle without sample_shuffle: gpemu's loader shuffles samples, not files");
    }
  }

  // Step time.
  const StepTimeSource source = effective_step_time_source(w);
  result["step_time_source"] = std::string(to_string(source));
  if (source == StepTimeSource::CostModel) {
    const auto model = make_cost_model(o.profiles_dir);
    const StepCost cost = model->step_cost(gpu, cost_model_name(w), static_cast<int>(w.reader.batch_size));
    shared.cost_model = true;
    shared.forward = cost.forward;
    shared.backward = cost.backward;
    result["step_time_s"] = to_seconds(cost.forward + cost.backward);
    result["cost_model"] = {{"model", cost_model_name(w)},
                            {"batch_size", w.reader.batch_size},
                            {"forward_s", to_seconds(cost.forward)},
                            {"backward_s", to_seconds(cost.backward)},
                            {"note", cost.note}};
    if (w.gpemu.precision) {
      warnings.push_back(fmt::format("gpemu.precision = {} is not used: the cost model's step time does not depend "
                                     "on a precision yet",
                                     to_string(*w.gpemu.precision)));
    }
  } else {
    result["step_time_s"] = w.train.computation_time.expected();
  }

  // Modelled loading, shuffling seed.
  const bool preprocess = !(TimeSampler(w.reader.preprocess_time, 0).constant() &&
                            w.reader.preprocess_time.expected() == 0);
  if (o.storage_bytes_per_s) {
    shared.storage = &timeline.add_link("storage", *o.storage_bytes_per_s, true);
  }
  shared.modelled_loading = preprocess || shared.storage != nullptr;
  const bool random_shuffle = w.reader.file_shuffle == Shuffle::Random || w.reader.sample_shuffle == Shuffle::Random;
  shared.shuffle_seed = random_shuffle ? std::random_device{}() : static_cast<std::uint64_t>(w.train.seed);

  // --- ranks --------------------------------------------------------------------
  std::vector<RankResult> results(ranks.size());
  std::vector<std::function<void()>> bodies;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    bodies.emplace_back([&shared, &results, &ranks, i] {
      RankRunner runner(shared, ranks[i], results[i]);
      runner.run();
    });
  }
  const Time t0 = clock->now();
  clock->run_concurrently(std::move(bodies));
  const Time t1 = clock->now();
  const std::exception_ptr stopped = keep_finished_epochs(results);

  // --- results ------------------------------------------------------------------
  nlohmann::json dataset;
  if (train) {
    dataset = {{"folder", train_data.folder.string()}, {"format", std::string(to_string(w.dataset.format))},
               {"files", train_data.files.size()},       {"samples", train_data.samples()},
               {"bytes", train_data.bytes()}};
  }
  result["dataset"] = dataset;
  result["steps_per_epoch"] = train ? shared.steps : 0;
  if (train) {
    nlohmann::json t = phase_json(results, false, shared.steps, w, o.record_steps);
    for (auto it = t.begin(); it != t.end(); ++it) result[it.key()] = it.value();
    if (auto note = no_measured_step_warning(w, t)) warnings.push_back(*note);
    result["loader"] = loader_stats_json(results, false);
    result["loader"]["read_threads"] = w.reader.read_threads;
    result["loader"]["prefetch_batches_per_worker"] = std::max(1, w.reader.prefetch_size);
    result["loader"]["modelled"] = {
        {"preprocess", preprocess},
        {"storage_bytes_per_s", o.storage_bytes_per_s ? nlohmann::json(*o.storage_bytes_per_s) : nlohmann::json()}};
    if (shared.eval_ds != nullptr) {
      nlohmann::json e = phase_json(results, true, shared.eval_steps, w, o.record_steps);
      e["steps_per_epoch"] = shared.eval_steps;
      e.erase("au_threshold_pct");
      e.erase("au_pass");
      result["eval"] = std::move(e);
    }
  } else {
    result["epochs"] = 0;
    result["steps"] = 0;
  }
  result["checkpoints"] = checkpoints_json(shared.checkpoints, result);
  result["emulated_s"] = to_seconds(t1 - t0);
  result["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  result["warnings"] = warnings;
  result["not_emulated"] = w.not_emulated;

  if (stopped) report_stopped(result, stopped, o);
  if (o.on_timeline) {
    std::vector<TraceDeviceName> names;
    for (int r : ranks) names.push_back({r, fmt::format("GPU {} ({})", r, gpu.id)});
    o.on_timeline(timeline, names);
  }
  return result;
}

nlohmann::json run_dlio_config(const fs::path& file, const std::vector<std::string>& overrides,
                               const DlioRunOptions& options) {
  return run_dlio_workload(parse_dlio_config(file, overrides), options);
}

}  // namespace gpemu::dlio
