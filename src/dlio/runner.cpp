// DLIO runner: the training loop of dlio_benchmark with gpemu's loader reading
// the real files and an emulated GPU per rank computing (DLIO's metrics of a
// phase: phase_figures.h).
#include "gpemu/dlio.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/host_memory.h"
#include "common/interrupt.h"
#include "dlio/free_space.h"
#include "dlio/phase_figures.h"
#include "dlio/schema.h"
#include "dlio/spec_keys.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/pipeline.h"
#include "gpemu/session.h"
#include "gpemu/spec_error.h"

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

using detail::Block;
using detail::DlioStep;
using detail::Exclusion;
using detail::PhaseFigures;
using detail::RankPhase;

struct DlioCheckpoint {
  int epoch = 0;
  std::uint64_t step = 0;
  int rank = 0;
  std::uint64_t bytes_written = 0, bytes_read = 0;
  double write_s = 0, read_s = 0;
  double emulated_s = 0;
};

pipeline::LoaderOptions loader_options(const DlioWorkload& w, bool lock_pinned, std::uint64_t shuffle_seed,
                                       std::int64_t batch, std::shared_ptr<pipeline::LoaderCache> cache) {
  const auto& r = w.reader;
  pipeline::LoaderOptions lo;
  lo.batch_size = static_cast<std::size_t>(batch);
  lo.num_workers = std::max(0, r.read_threads);
  lo.prefetch_factor = std::max(1, r.prefetch_size);
  lo.pin_memory = r.pin_memory;
  lo.pin_mode = lock_pinned ? PinMode::Lock : PinMode::AccountOnly;
  lo.persistent_workers = true;  // DLIO's PyTorch loader keeps its workers
  lo.drop_last = true;           // DLIO runs whole batches only
  lo.shuffle = r.file_shuffle != Shuffle::Off || r.sample_shuffle != Shuffle::Off;
  lo.seed = shuffle_seed;
  lo.decode_images = w.dataset.format == DataFormat::Jpeg;
  lo.direct_io = r.odirect;
  lo.cache = std::move(cache);
  lo.on_error = pipeline::OnError::Stop;
  return lo;
}

// DLIO's per-rank phases, built from the job's observer hooks as the steps
// run (blocks of steps between the checkpoints written inside an epoch) and
// handed to the phase's figures as each ends; and its progress callback.
class DlioObserver : public JobObserver {
 public:
  DlioObserver(const DlioRunOptions& o, const std::vector<int>& ranks, Exclusion train, Exclusion eval)
      : progress_(o.progress),
        ranks_(ranks),
        train_(train),
        eval_(eval),
        keep_rows_(o.record_steps),
        phases_(ranks.size()),
        ended_train_(ranks.size(), 0),
        train_figures_(ranks.size(), o, true),
        eval_figures_(ranks.size(), o, false) {}
  void on_step(const StepEvent& e) override {
    const gpemu::StepRecord& s = *e.record;
    const bool train = e.phase == RunPhase::Train;
    Open& o = phases_[static_cast<std::size_t>(e.gpu)][{train, e.epoch}];
    if (o.blocks.empty()) o.blocks.emplace_back();
    DlioStep d;
    d.index = s.index;
    d.load = s.delivered - s.next_called;
    d.compute = s.host_done - s.delivered;
    d.proc = s.host_done - s.next_called;
    d.emulated = s.compute;
    d.bytes = s.bytes;
    d.samples = static_cast<std::uint64_t>(s.samples);
    o.blocks.back().add(d, train ? train_ : eval_, keep_rows_);
    if (!progress_) return;
    DlioProgress pr;
    pr.phase = train ? DlioPhase::Train : DlioPhase::Eval;
    pr.rank = ranks_[static_cast<std::size_t>(e.gpu)];
    pr.epoch = e.epoch;
    pr.step = e.step;
    pr.steps = e.steps;
    pr.sample_indices = s.sample_indices;
    pr.bytes = s.bytes;
    progress_(pr);
  }
  // A checkpoint inside an epoch ends the epoch's block (at its start) and
  // opens the next (at its end); one after the epoch's end (the epoch has
  // been handed on) splits nothing.
  void on_checkpoint(const CheckpointRecord& c) override {
    const auto gpu = static_cast<std::size_t>(c.gpu);
    if (c.epoch > ended_train_[gpu]) {
      Open& o = phases_[gpu][{true, c.epoch}];
      if (o.blocks.empty()) o.blocks.emplace_back();
      o.blocks.back().end = c.start;
      o.blocks.emplace_back();
      o.blocks.back().start = c.end;
      o.splits.push_back({c.start, c.end});
    }
    if (!progress_) return;
    DlioProgress pr;
    pr.phase = DlioPhase::Checkpoint;
    pr.rank = ranks_[gpu];
    pr.epoch = c.epoch;
    pr.step = c.step;
    pr.bytes = c.io.bytes_written;
    progress_(pr);
  }
  // A rank's phase ended: its blocks become the rank's epoch, handed to the
  // phase's figures.
  void on_phase_end(const EpochMark& m) override {
    const auto gpu = static_cast<std::size_t>(m.gpu);
    const bool train = m.phase == RunPhase::Train;
    RankPhase rp;
    rp.rank = ranks_[gpu];
    rp.epoch = static_cast<int>(m.epoch) + 1;
    Open o;
    if (auto it = phases_[gpu].find({train, rp.epoch}); it != phases_[gpu].end()) {
      o = std::move(it->second);
      phases_[gpu].erase(it);
    }
    // A checkpoint outside the phase's span splits nothing: its blocks (after
    // the last step) are empty.
    while (!o.splits.empty() && (o.splits.back().first < m.start || o.splits.back().second > m.host_end)) {
      o.splits.pop_back();
      o.blocks.pop_back();
    }
    if (o.blocks.empty()) o.blocks.emplace_back();
    o.blocks.front().start = m.start;
    o.blocks.back().end = m.host_end;
    if (o.blocks.back().steps == 0 && o.blocks.size() > 1) o.blocks.pop_back();
    rp.blocks = std::move(o.blocks);
    if (train) ended_train_[gpu] = rp.epoch;
    std::lock_guard lock(mu_);
    (train ? train_figures_ : eval_figures_).add(gpu, std::move(rp));
  }

  // The phases' figures over the epochs every rank ended (after the run).
  DlioPhaseResult figures(const DlioWorkload& w, bool eval) {
    std::lock_guard lock(mu_);
    return (eval ? eval_figures_ : train_figures_).take_result(w);
  }

 private:
  struct Open {
    std::vector<Block> blocks;
    std::vector<std::pair<Time, Time>> splits;  // the checkpoints that ended blocks
  };
  const std::function<void(const DlioProgress&)>& progress_;
  const std::vector<int>& ranks_;
  Exclusion train_, eval_;
  bool keep_rows_;
  std::vector<std::map<std::pair<bool, int>, Open>> phases_;  // per GPU: (train, epoch) -> its blocks so far
  std::vector<int> ended_train_;                              // per GPU: the last training epoch it ended
  std::mutex mu_;
  PhaseFigures train_figures_, eval_figures_;
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

DlioGenerated generated_of(const DlioData& d) {
  DlioGenerated g;
  g.folder = d.folder.string();
  g.files = d.files.size();
  g.samples = d.samples();
  g.bytes = d.bytes();
  g.generated = d.generated;
  g.skipped = d.skipped;
  g.seconds = d.seconds;
  return g;
}

DlioLoaderSummary loader_summary(const std::vector<pipeline::LoaderStats>& per_rank) {
  DlioLoaderSummary l;
  std::set<std::string> notes;
  for (const pipeline::LoaderStats& s : per_rank) {
    l.batches += s.batches;
    l.samples += s.samples;
    l.bytes_read += s.bytes_read;
    l.cache_hits += s.cache_hits;
    l.cache_misses += s.cache_misses;
    l.out_of_order += s.out_of_order;
    l.direct_io_active = l.direct_io_active || s.direct_io_active;
    notes.insert(s.notes.begin(), s.notes.end());
  }
  l.notes.assign(notes.begin(), notes.end());
  return l;
}

// The ranks' checkpoint records, one per checkpoint (epoch, step), and the
// run's checkpoint throughput.
void add_checkpoints(const std::vector<DlioCheckpoint>& records, DlioRunRecord& top) {
  std::map<std::pair<int, std::uint64_t>, std::vector<const DlioCheckpoint*>> events;
  for (const auto& r : records) events[{r.epoch, r.step}].push_back(&r);
  std::uint64_t all_bytes = 0, all_read = 0;
  double all_write_s = 0, all_read_s = 0;
  for (const auto& [key, recs] : events) {
    std::uint64_t bytes = 0, read = 0;
    double write_s = 0, read_s = 0, emulated_s = 0;
    std::vector<int> ranks;
    for (const DlioCheckpoint* r : recs) {
      bytes += r->bytes_written;
      read += r->bytes_read;
      write_s = std::max(write_s, r->write_s);  // ranks write at the same time
      read_s = std::max(read_s, r->read_s);
      emulated_s = std::max(emulated_s, r->emulated_s);
      ranks.push_back(r->rank);
    }
    std::sort(ranks.begin(), ranks.end());
    DlioCheckpointResult e;
    e.epoch = key.first;
    e.step = key.second;
    e.ranks = std::move(ranks);
    e.bytes = bytes;
    e.write_s = write_s;
    e.write_gb_per_s = write_s > 0 ? bytes / write_s / 1e9 : 0.0;
    e.emulated_s = emulated_s;
    if (read > 0) {
      e.bytes_read = read;
      e.read_s = read_s;
      e.read_gb_per_s = read_s > 0 ? read / read_s / 1e9 : 0.0;
    }
    top.checkpoints.push_back(std::move(e));
    all_bytes += bytes;
    all_read += read;
    all_write_s += write_s;
    all_read_s += read_s;
  }
  if (!events.empty()) {
    top.checkpoint_gb_per_s = all_write_s > 0 ? all_bytes / all_write_s / 1e9 : 0.0;
    if (all_read > 0) top.checkpoint_read_gb_per_s = all_read_s > 0 ? all_read / all_read_s / 1e9 : 0.0;
  }
}

// DLIO's AU leaves out output.metric.exclude_start_steps (and _end_) of every
// block between checkpoints; when that leaves no step, AU 0 % is not a
// measurement and "fail" is not a verdict.
std::optional<std::string> no_measured_step_warning(const DlioWorkload& w, const DlioPhaseResult& train) {
  if (train.epochs == 0 || train.measured_steps > 0) return std::nullopt;
  return fmt::format(
      "no step was measured (output.metric.exclude_start_steps = {} and exclude_end_steps = {} leave "
      "none of the {} steps of each block between checkpoints): AU and throughput are undefined, "
      "not 0",
      w.output.exclude_start_steps, w.output.exclude_end_steps,
      w.checkpoint.steps_between_checkpoints > 0 && w.workflow.checkpoint
          ? std::min<std::int64_t>(w.checkpoint.steps_between_checkpoints, static_cast<std::int64_t>(train.steps))
          : static_cast<std::int64_t>(train.steps));
}

// Hands the finished epochs' result to the caller, then rethrows the reason.
[[noreturn]] void report_stopped(DlioRunRecord& result, const std::exception_ptr& stopped, const DlioRunOptions& o) {
  try {
    std::rethrow_exception(stopped);
  } catch (const std::exception& e) {
    result.stopped = e.what();
  } catch (...) {
    result.stopped = "unknown error";
  }
  if (o.on_stopped) o.on_stopped(result);
  std::rethrow_exception(stopped);
}

}  // namespace

// What a run keeps until it ends: each epoch's figures when the caller keeps
// them (keep_epochs: about 5 KB an epoch of a rank, measured, with its
// per-rank figures), and each step when its rows are kept (a trace, a report,
// record_steps: about 1 KB a step and 8 bytes a sample). Without either, a
// rank keeps only the epoch in progress. A run whose records would not fit in
// what this process can allocate is refused before it starts, naming the key,
// instead of dying of std::bad_alloc hours in.
void check_records_fit(const DlioWorkload& w, const DlioRunOptions& o, double rank_epochs, double steps) {
  constexpr double kPerEpoch = 5120;
  const bool rows = o.record_steps || o.trace || o.full_record;
  const bool epochs = o.keep_epochs || o.full_record;
  if (!rows && !epochs) return;
  const double per_step =
      rows ? 1024.0 + 8.0 * static_cast<double>(std::max<std::int64_t>(1, w.reader.batch_size)) : 0.0;
  const double per_epoch = epochs ? kPerEpoch : 0.0;
  const double need = rank_epochs * per_epoch + steps * per_step, have = allocatable_bytes();
  if (have > 0 && need > have)
    throw InputError(fmt::format(
        "{}train.epochs = {} is not valid here: the run keeps {}, {:.2f} GB in all, more than this process can "
        "allocate now ({:.2f} GB: the machine's available memory or ulimit -v); accepted: fewer epochs or steps "
        "(train.epochs, train.total_training_steps){}",
        w.source.empty() ? "" : w.source + ": ", w.train.epochs,
        epochs && rows ? fmt::format("a record of each of its ranks' {:.3g} epochs (about {:.0f} bytes) and of each of "
                                     "its {:.3g} steps with their rows (about {:.0f} bytes)",
                                     rank_epochs, kPerEpoch, steps, per_step)
        : epochs
            ? fmt::format("a record of each of its ranks' {:.3g} epochs (about {:.0f} bytes)", rank_epochs, kPerEpoch)
            : fmt::format("each of its {:.3g} steps with their rows (about {:.0f} bytes)", steps, per_step),
        need / 1e9, have / 1e9, epochs && !rows ? ", or the text output, which keeps no epoch" : ""));
}

// The world size and the ranks this process runs, checked.
std::pair<int, std::vector<int>> world_and_ranks(const DlioWorkload& w, const DlioRunOptions& o) {
  if (o.world_size < 0) {
    throw InputError(fmt::format(
        "DLIO runner: world size {} is not valid; accepted: an integer >= 1 (0: gpemu.world_size)", o.world_size));
  }
  const int ws = o.world_size > 0 ? o.world_size : w.gpemu.world_size;
  std::vector<int> ranks = o.ranks;
  if (ranks.empty()) {
    for (int r = 0; r < ws; ++r) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= ws || (i > 0 && ranks[i] == ranks[i - 1])) {
      throw InputError(
          fmt::format("DLIO runner: rank {} is not valid for world size {}; accepted: distinct ranks "
                      "from 0 to {}",
                      ranks[i], ws, ws - 1));
    }
  }
  if (o.storage_bytes_per_s && !(*o.storage_bytes_per_s > 0 && std::isfinite(*o.storage_bytes_per_s))) {
    throw InputError(fmt::format("DLIO runner: storage bandwidth {} bytes/s is not valid; accepted: a number > 0",
                                 *o.storage_bytes_per_s));
  }
  return {ws, ranks};
}

// The network that joins the run's modelled nodes (gpemu.nodes, gpemu.network),
// checked before anything is generated: the nodes' layout for the run's world
// size, the clock (modelled nodes are the virtual clock's; under the real one,
// and under mpirun or torchrun, nodes are processes), and the network's name.
NetworkSpec modelled_nodes(const DlioWorkload& w, const DlioRunOptions& o, int ws, std::size_t ranks) {
  check_nodes(w, ws);
  if (w.gpemu.nodes > 1 && (o.clock != ClockKind::Virtual || ranks != static_cast<std::size_t>(ws)))
    detail::invalid(
        w, "gpemu.nodes", std::to_string(w.gpemu.nodes),
        fmt::format("1 {}: modelled nodes need the virtual clock (--clock virtual) with every rank in this process; "
                    "real nodes are processes (mpirun or torchrun, one process per rank)",
                    o.clock != ClockKind::Virtual ? "under the real clock" : "when this process runs some ranks only"));
  try {
    return parse_network(w.gpemu.network);
  } catch (const InputError& e) {
    detail::invalid(w, "gpemu.network", "'" + w.gpemu.network + "'",
                    fmt::format("10gbe, 25gbe, 100gbe, 400gbe or a network JSON file ({})",
                                worded_message(e, yaml_key_of_spec_field)));
  }
}

// What a run reads: the training (and evaluation) files, the datasets the
// loader reads from them, the loader caches (reader.read_type memory) and the
// steps per epoch.
struct RunData {
  DlioData train_data, eval_data;
  pipeline::Dataset train_ds, eval_ds;
  std::shared_ptr<pipeline::LoaderCache> train_cache, eval_cache;
  std::uint64_t steps = 0, eval_steps = 0;
  bool synthetic = false;  // DLIO's synthetic loader or format: no files are read
  bool has_eval = false;
};

// The files a synthetic run would have (their sizes only: nothing is read).
DlioData synthetic_data(const DlioWorkload& w, const fs::path& base, DlioSplit split) {
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
}

// Opens (or, for a synthetic run, sizes) the data of a training run into `d`
// (generated files already in d.train_data / d.eval_data are kept), checks
// that it gives the steps DLIO would run, and adds DLIO's warnings.
void open_run_data(const DlioWorkload& w, const DlioFigures& fig, int ws, const fs::path& base, bool want_eval,
                   RunData& d, std::vector<std::string>& warnings) {
  if (d.synthetic) {
    d.train_data = synthetic_data(w, base, DlioSplit::Train);
  } else if (d.train_data.files.empty()) {
    d.train_data = open_dlio_data(w, DlioSplit::Train, base);
  }
  const bool jpeg = w.dataset.format == DataFormat::Jpeg;
  d.train_ds = to_dataset(d.train_data, jpeg);
  if (d.steps == 0) {
    throw InputError(
        fmt::format("DLIO runner: {} samples give no step of reader.batch_size {} on {} rank(s) (DLIO: floor(samples / "
                    "batch_size / world_size) = 0); use more files or a smaller batch",
                    fig.total_samples_train, w.reader.batch_size, ws));
  }
  const std::uint64_t per_rank = (d.train_ds.size() + static_cast<std::uint64_t>(ws) - 1) / ws;
  if (per_rank / static_cast<std::uint64_t>(w.reader.batch_size) < d.steps) {
    throw InputError(
        fmt::format("DLIO runner: '{}' holds {} samples, {} per rank: fewer than {} steps of {} "
                    "need; regenerate the dataset",
                    d.train_data.folder.string(), d.train_ds.size(), per_rank, d.steps, w.reader.batch_size));
  }
  if (w.reader.read_type == ReadType::Memory) {
    d.train_cache = std::make_shared<pipeline::LoaderCache>(d.train_ds.total_bytes());
  }
  if (w.train.total_training_steps > 0 &&
      static_cast<std::uint64_t>(w.train.total_training_steps) > fig.steps_per_epoch) {
    warnings.push_back(
        fmt::format("train.total_training_steps = {} exceeds the {} steps an epoch has; DLIO stops "
                    "with an error, gpemu runs {} steps per epoch",
                    w.train.total_training_steps, fig.steps_per_epoch, fig.steps_per_epoch));
  }
  if (want_eval && fig.eval_steps_per_epoch > 0) {
    if (d.synthetic) {
      d.eval_data = synthetic_data(w, base, DlioSplit::Eval);
    } else if (d.eval_data.files.empty()) {
      d.eval_data = open_dlio_data(w, DlioSplit::Eval, base);
    }
    d.eval_ds = to_dataset(d.eval_data, jpeg);
    d.has_eval = true;
    d.eval_steps = fig.eval_steps_per_epoch;
    if (w.reader.read_type == ReadType::Memory) {
      d.eval_cache = std::make_shared<pipeline::LoaderCache>(d.eval_ds.total_bytes());
    }
  } else if (w.workflow.evaluation) {
    warnings.push_back(
        "workflow.evaluation is set but the evaluation set gives no step (dataset.num_files_eval, "
        "reader.batch_size_eval); no evaluation was run");
  }
  const double host_bytes =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (!d.synthetic && host_bytes > 0 && static_cast<double>(d.train_data.bytes()) <= host_bytes) {
    warnings.push_back(
        fmt::format("the training set ({:.3f} GB) fits in host memory ({:.1f} GB): reads after the "
                    "first epoch may come from the page cache (DLIO warns the same)",
                    d.train_data.bytes() / 1e9, host_bytes / 1e9));
  }
  if (w.reader.file_shuffle != Shuffle::Off && w.reader.sample_shuffle == Shuffle::Off &&
      w.dataset.num_samples_per_file > 1) {
    warnings.push_back("reader.file_shuffle without sample_shuffle: gpemu's loader shuffles samples, not files");
  }
}

// The step time of `spec`: the cost model's forward and backward for the
// workload's model (with its memory through the caching allocator) when the
// workload asks for it, else DLIO's computation_time and eval_time. Returns
// the cost model the job runs with.
std::unique_ptr<CostModel> set_step_time(const DlioWorkload& w, const DlioRunOptions& o, const GpuSpec& gpu,
                                         JobSpec& spec, DlioRunRecord& result, std::vector<std::string>& warnings) {
  const StepTimeSource source = effective_step_time_source(w);
  result.step_time_source = source;
  std::unique_ptr<CostModel> cost_model;
  if (source == StepTimeSource::CostModel) {
    cost_model = make_cost_model(o.profiles_dir);
    spec.compute.step_time = StepTime::CostModel;
    spec.compute.model.name = cost_model_name(w);
    // With a model, memory is the engine's: its tensors through the caching
    // allocator, so a batch that does not fit the card fails as it would.
    spec.compute.use_allocator = true;
    const StepCost cost = cost_model->step_cost(gpu, cost_model_name(w), static_cast<int>(w.reader.batch_size));
    result.step_time_s = to_seconds(cost.forward + cost.backward);
    result.cost_model = DlioCostModelStep{cost_model_name(w), w.reader.batch_size, to_seconds(cost.forward),
                                          to_seconds(cost.backward), cost.note};
    if (w.gpemu.precision) {
      warnings.push_back(
          fmt::format("gpemu.precision = {} is not used: the cost model's step time does not depend "
                      "on a precision yet",
                      to_string(*w.gpemu.precision)));
    }
  } else {
    cost_model = make_cost_model(std::nullopt);
    spec.compute.step_time = StepTime::Fixed;
    spec.compute.fixed_train = w.train.computation_time;
    spec.compute.fixed_eval = w.evaluation.eval_time;
    spec.compute.fixed_seed = static_cast<std::uint64_t>(w.train.seed);
    result.step_time_s = w.train.computation_time.expected();
  }
  return cost_model;
}

// DLIO's checkpoint writer, called by the job on the rank's host thread; the
// bytes also cross the modelled storage link when there is one.
std::function<CheckpointIo(const CheckpointCall&)> checkpoint_writer(
    const DlioWorkload& w, const DlioRunOptions& o, const std::vector<int>& ranks, int ws, const fs::path& base,
    std::function<const Link*(Timeline&)> storage_link) {
  return [&w, &o, &ranks, ws, base, storage_link](const CheckpointCall& c) {
    CheckpointIo io;
    const int rank = ranks[static_cast<std::size_t>(c.rank)];
    if (!rank_writes_checkpoint(w, rank)) return io;
    CheckpointIoOptions cio;
    cio.rank = rank;
    cio.world_size = ws;
    cio.epoch = c.epoch;
    cio.step = c.step;
    cio.read_back = o.checkpoint_read_back;
    cio.base_dir = base;
    const CheckpointResult r = write_checkpoint(w, cio);
    if (const Link* link = storage_link(*c.timeline); link && r.bytes_written + r.bytes_read > 0) {
      OpSpec op;
      op.lower_bound = c.timeline->issue_time();
      op.link = link;
      op.bytes = static_cast<double>(r.bytes_written + r.bytes_read);
      op.trace = false;
      c.timeline->wait(c.timeline->issue(op, {}), c.sleep_until);
    }
    io.written = true;
    io.bytes_written = r.bytes_written;
    io.bytes_read = r.bytes_read;
    io.write_s = r.write_seconds;
    io.read_s = r.read_seconds;
    return io;
  };
}

DlioRunRecord run_dlio_workload(const DlioWorkload& w, const DlioRunOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  // Named variables, not a structured binding: the lambdas below capture
  // them, which clang before 16 refuses for bindings.
  const std::pair<int, std::vector<int>> world = world_and_ranks(w, o);
  const int ws = world.first;
  const std::vector<int>& ranks = world.second;
  const NetworkSpec network = modelled_nodes(w, o, ws, ranks.size());
  const GpuSpec& gpu = find_gpu(w.gpemu.gpu.empty() ? o.default_gpu : w.gpemu.gpu);
  const bool train = w.workflow.train;
  // Before anything is generated or read.
  if (train)
    check_records_fit(w, o, static_cast<double>(w.train.epochs) * static_cast<double>(ranks.size()),
                      static_cast<double>(dlio_figures(w, ws).total_train_steps) * static_cast<double>(ranks.size()));
  const bool leader = ranks.front() == 0;
  const fs::path base = o.base_dir.empty() ? fs::current_path() : o.base_dir;
  // One checkpoint of this process's writing ranks must fit, before epoch 1
  // trains (it was found out after it, H4); each checkpoint checks again.
  if (w.workflow.checkpoint && !checkpoint_schedule(w, ws).empty()) {
    std::uint64_t one = 0;
    for (const int r : ranks)
      if (rank_writes_checkpoint(w, r)) one += checkpoint_bytes_per_rank(w, r, ws);
    detail::require_free_space(resolve_checkpoint_folder(w, base), one, "checkpoint (model.model_size_bytes)");
  }

  DlioRunRecord result;
  result.workload = w.source;
  result.model = w.model.name;
  result.clock = std::string(to_string(o.clock));
  result.gpus = ws;
  result.nodes = w.gpemu.nodes;
  if (w.gpemu.nodes > 1) result.network = network.name;
  result.ranks = ranks;
  result.gpu = gpu.id;
  std::vector<std::string> warnings = w.warnings;

  // --- data ---------------------------------------------------------------------
  RunData d;  // what the run reads
  const bool want_eval = train && w.workflow.evaluation && w.dataset.num_files_eval > 0;
  // DLIO's synthetic loader (or format) reads no files: batches come from memory.
  const bool synthetic = w.reader.data_loader == DataLoaderKind::Synthetic || w.dataset.format == DataFormat::Synthetic;
  result.synthetic_data = synthetic;
  if (w.workflow.generate_data && w.dataset.format == DataFormat::Synthetic) {
    warnings.push_back("dataset.format synthetic: there are no files to generate");
  } else if (w.workflow.generate_data && leader) {
    d.train_data = generate_dlio_data(w, DlioSplit::Train, base, o.progress);
    result.generated_train = generated_of(d.train_data);
    if (!d.train_data.manifest_problem.empty()) warnings.push_back(d.train_data.manifest_problem);
    if (w.dataset.num_files_eval > 0) {
      d.eval_data = generate_dlio_data(w, DlioSplit::Eval, base, o.progress);
      result.generated_eval = generated_of(d.eval_data);
      if (!d.eval_data.manifest_problem.empty()) warnings.push_back(d.eval_data.manifest_problem);
    }
  }
  if (o.after_generation) o.after_generation();
  if (!train && !w.workflow.checkpoint) {
    result.generation_only = true;
    result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    result.warnings = std::move(warnings);
    result.not_emulated = w.not_emulated;
    return result;
  }

  const DlioFigures fig = dlio_figures(w, ws);
  d.synthetic = synthetic;
  d.steps = fig.steps_per_epoch_run;
  if (train) open_run_data(w, fig, ws, base, want_eval, d, warnings);

  // The job: DLIO's step program (its computation_time, or the cost model's
  // forward and backward when the workload asks for it), each rank's source,
  // the checkpoints and the evaluation, on the run's clock.
  JobSpec spec;
  spec.cluster.gpu = &gpu;
  spec.cluster.gpus = static_cast<int>(ranks.size());
  // As gpemu train's --nodes and --network. DLIO's step moves no bytes (its
  // computation_time, measured on real systems, holds any all-reduce), so the
  // ranks' devices are independent and the network carries nothing.
  spec.cluster.nodes = w.gpemu.nodes;
  spec.cluster.network = network;
  spec.cluster.node.first_device_index = ranks.front();
  spec.cluster.device.index = ranks.front();
  spec.batch_size = static_cast<int>(std::max<std::int64_t>(1, w.reader.batch_size));
  spec.trace = o.trace;
  spec.compute.copy_batch = false;  // DLIO only sleeps: no H2D in AU
  spec.compute.use_allocator = false;
  spec.compute.all_reduce = false;
  spec.compute.sync = SyncMode::EveryIteration;
  spec.compute.variation.cv = 0;
  spec.compute.variation.warmup_factor = 1;
  std::unique_ptr<CostModel> cost_model = set_step_time(w, o, gpu, spec, result, warnings);

  // Modelled loading, shuffling seed.
  const bool preprocess =
      !(TimeSampler(w.reader.preprocess_time, 0).constant() && w.reader.preprocess_time.expected() == 0);
  const bool modelled_loading = preprocess || o.storage_bytes_per_s.has_value();
  const bool random_shuffle = w.reader.file_shuffle == Shuffle::Random || w.reader.sample_shuffle == Shuffle::Random;
  const std::uint64_t shuffle_seed = random_shuffle ? std::random_device{}() : static_cast<std::uint64_t>(w.train.seed);
  // The storage link lives on the job's timeline; made by the first source or checkpoint that needs it.
  const Link* storage = nullptr;
  std::mutex storage_mu;
  auto storage_link = [&](Timeline& tl) -> const Link* {
    if (!o.storage_bytes_per_s) return nullptr;
    std::lock_guard lock(storage_mu);
    if (!storage) storage = &tl.add_link("storage", *o.storage_bytes_per_s, true);
    return storage;
  };
  const auto record = static_cast<std::uint64_t>(std::llround(w.dataset.record_length_bytes));
  auto source_for = [&](const pipeline::Dataset* ds, std::int64_t batch, std::shared_ptr<pipeline::LoaderCache> cache,
                        std::uint64_t steps) {
    return [&, ds, batch, cache, steps](int g, Clock& clk, Timeline& tl) -> std::unique_ptr<pipeline::BatchSource> {
      const int rank = ranks[static_cast<std::size_t>(g)];
      pipeline::LoaderOptions lo = loader_options(w, o.lock_pinned_memory, shuffle_seed, batch, cache);
      lo.rank = rank;
      lo.world_size = ws;
      std::unique_ptr<pipeline::BatchSource> src;
      const HostMemoryKind mem = lo.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
      if (d.synthetic) {
        const pipeline::SamplerOptions so = pipeline::sampler_options(lo);
        src = std::make_unique<pipeline::SyntheticSource>(clk, pipeline::Sampler(ds->size(), so),
                                                          static_cast<int>(batch), record, mem);
      } else {
        pipeline::PipelineSourceOptions so;
        so.rank = rank;
        so.untimed = true;  // DLIO: reads take what they take on the real clock, nothing on the virtual one
        src = std::make_unique<pipeline::PipelineSource>(clk, *ds, lo, so);
      }
      if (!modelled_loading) return src;
      // The modelled loader times the source's batches: DLIO's per-sample
      // preprocess_time and the storage link, no read or decode cost of its
      // own; batches dealt to read_threads lanes, prefetch_size each ahead.
      pipeline::LoaderModelOptions m;
      m.read_per_sample = 0;
      m.read_bytes_per_s = 0;
      m.decode_per_sample = 0;
      m.decode_ns_per_byte = 0;
      m.preprocess = w.reader.preprocess_time;
      m.preprocess_seed = derive_seed(static_cast<std::uint64_t>(w.train.seed), rank, 3);
      m.storage_link = storage_link(tl);
      m.link_bytes_per_sample = d.synthetic ? record : 0;
      m.batches_per_epoch = static_cast<std::size_t>(steps);
      const std::shared_ptr<const pipeline::Dataset> shared(std::shared_ptr<const pipeline::Dataset>{}, ds);
      return std::make_unique<pipeline::ModelledLoader>(clk, shared, lo, m, &tl, std::move(src));
    };
  };
  spec.schedule.train = train;
  spec.schedule.keep_partial = true;  // finished epochs are reported even when a later one fails
  spec.schedule.epochs = train ? w.train.epochs : 0;
  spec.schedule.steps_per_epoch = d.steps;
  spec.schedule.reshuffle_each_epoch = w.train.seed_change_epoch;
  if (train) {
    spec.data.source = DataSource::Custom;
    spec.data.custom = source_for(&d.train_ds, w.reader.batch_size, d.train_cache, d.steps);
    if (d.has_eval && d.eval_steps > 0) {
      spec.schedule.eval.first_epoch = std::max(1, w.evaluation.eval_after_epoch);
      spec.schedule.eval.every = std::max(1, w.evaluation.epochs_between_evals);
      spec.schedule.eval.steps = d.eval_steps;
      spec.schedule.eval.data.source = DataSource::Custom;
      spec.schedule.eval.data.loader.batch_size = static_cast<std::size_t>(w.reader.batch_size_eval);
      spec.schedule.eval.data.custom = source_for(&d.eval_ds, w.reader.batch_size_eval, d.eval_cache, d.eval_steps);
    }
  }
  if (w.workflow.checkpoint) {
    for (const CheckpointEvent& e : checkpoint_schedule(w, ws)) {
      if (train && !e.end_of_epoch && (e.epoch < 1 || e.epoch > w.train.epochs)) continue;
      spec.schedule.checkpoints.push_back({e.epoch, e.step, train && e.end_of_epoch});
    }
  }
  spec.schedule.checkpoint = checkpoint_writer(w, o, ranks, ws, base, storage_link);

  // --- ranks --------------------------------------------------------------------
  RealClockOptions clock_options;
  clock_options.spin_window = o.spin_window;
  auto clock = make_clock(o.clock, clock_options);
  result.clock = std::string(clock->name());
  // The record keeps each step only for what reads them all: the trace's
  // data waits, the caller's full record (a report) and the step rows.
  spec.record.steps = spec.record.kernels = o.trace || o.full_record || o.record_steps;
  spec.record.epochs = o.full_record;  // the observer keeps what DLIO's figures need
  DlioObserver observer(o, ranks, {d.steps, w.output.exclude_start_steps, w.output.exclude_end_steps},
                        {d.eval_steps, w.output.exclude_start_steps, w.output.exclude_end_steps});
  // The one-job case of a session, as gpemu train runs: the ranks on GPUs of their own.
  // The engine's errors name the spec's fields: said again with the workload's YAML keys.
  std::optional<Session> session;
  Time t0{};
  try {
    session.emplace(*clock, *cost_model, session_for(spec));
    session->add_job({.name = "dlio", .job = std::move(spec), .observer = &observer});
    t0 = clock->now();
    session->run();
  } catch (const SpecError& e) {
    throw e.renamed(yaml_key_of_spec_field);
  }
  RunRecord rec = record_of(session->outcome(0), /*keep_partial=*/true);
  const Time t1 = clock->now();
  Timeline& timeline = session->timeline();
  if (timeline.tracing())
    for (const gpemu::StepRecord& st : rec.steps)
      if (st.delivered > st.next_called)
        timeline.add_host_span(HostSpan{"data wait", "stall", "host", ranks[static_cast<std::size_t>(st.gpu)],
                                        st.next_called, st.delivered});

  // --- results ------------------------------------------------------------------
  if (train) {
    DlioDataset ds;
    ds.folder = d.train_data.folder.string();
    ds.format = w.dataset.format;
    ds.files = d.train_data.files.size();
    ds.samples = d.train_data.samples();
    ds.bytes = d.train_data.bytes();
    result.dataset = std::move(ds);
    result.steps_per_epoch = d.steps;
    result.train = observer.figures(w, false);
    if (auto note = no_measured_step_warning(w, *result.train)) warnings.push_back(*note);
    DlioLoaderSummary loader = loader_summary(rec.loader_stats);
    loader.read_threads = w.reader.read_threads;
    loader.prefetch_batches_per_worker = std::max(1, w.reader.prefetch_size);
    loader.preprocess = preprocess;
    loader.storage_bytes_per_s = o.storage_bytes_per_s;
    result.loader = std::move(loader);
    if (d.has_eval) {
      result.eval = observer.figures(w, true);
      result.eval->steps_per_epoch = d.eval_steps;
    }
  }
  std::vector<DlioCheckpoint> checkpoints;
  for (const CheckpointRecord& c : rec.checkpoints) {
    DlioCheckpoint d;
    d.epoch = c.epoch;
    d.step = c.step;
    d.rank = ranks[static_cast<std::size_t>(c.gpu)];
    d.bytes_written = c.io.bytes_written;
    d.bytes_read = c.io.bytes_read;
    d.write_s = c.io.write_s;
    d.read_s = c.io.read_s;
    d.emulated_s = to_seconds(c.end - c.start);
    checkpoints.push_back(d);
  }
  add_checkpoints(checkpoints, result);
  result.emulated_s = to_seconds(t1 - t0);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  result.warnings = std::move(warnings);
  result.not_emulated = w.not_emulated;
  const std::exception_ptr stopped = rec.stopped;
  result.job = std::move(rec);

  if (stopped) report_stopped(result, stopped, o);
  if (o.on_timeline) {
    std::vector<TraceDeviceName> names;
    for (int r : ranks) names.push_back({r, trace_gpu_name(r, gpu.id)});
    o.on_timeline(timeline, names);
  }
  return result;
}

DlioRunRecord run_dlio_config(const fs::path& file, const std::vector<std::string>& overrides,
                              const DlioRunOptions& options) {
  return run_dlio_workload(parse_dlio_config(file, overrides), options);
}

}  // namespace gpemu::dlio
