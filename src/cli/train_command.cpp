#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/dlio_train.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/prep_args.h"
#include "cli/real_nodes.h"
#include "cli/train_args.h"
#include "common/interrupt.h"
#include "dist/launch_env.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/loader_choice.h"
#include "gpemu/pipeline.h"
#include "gpemu/report.h"
#include "gpemu/session.h"
#include "gpemu/timeline.h"
#include "gpemu/train.h"
#include "report/configuration_rows.h"

namespace gpemu::cli {
namespace {

constexpr int kDefaultSyntheticIterations = 300;

// Progress bar on a TTY (made once the job is built), fed from GPU 0's host thread.
class ProgressObserver : public JobObserver {
 public:
  explicit ProgressObserver(std::optional<ProgressBar>& bar) : bar_(bar) {}
  void on_step(const StepEvent& e) override {
    if (e.gpu == 0 && e.phase == RunPhase::Train && bar_) bar_->update(e.done);
  }

 private:
  std::optional<ProgressBar>& bar_;
};

// Flags that mean nothing for a DLIO workload (its YAML says it): refused by name.
void reject_for_dlio(CLI::App* cmd) {
  static const char* const kMeaningless[] = {"--model",
                                             "--batch-size",
                                             "--data",
                                             "--synthetic",
                                             "--global-batch-size",
                                             "--gpemu-gpus",
                                             "--virtual-dataset",
                                             "--iterations",
                                             "--epochs",
                                             "--workers",
                                             "--prefetch-factor",
                                             "--pin-memory",
                                             "--no-pin-memory",
                                             "--host-memory",
                                             "--pin-mode",
                                             "--cache-bytes",
                                             "--cache-policy",
                                             "--storage",
                                             "--page-cache-bytes",
                                             "--group-size",
                                             "--cold",
                                             "--read-method",
                                             "--superbatch",
                                             "--cores",
                                             "--decode-us",
                                             "--decode-ns-per-byte",
                                             "--bucket-cap-mb",
                                             "--sync",
                                             "--cv",
                                             "--warmup",
                                             "--precision",
                                             "--optimizer",
                                             "--zero-grad",
                                             "--seq-len",
                                             "--gpus-per-node",
                                             "--storage-shared",
                                             "--distributed-cache",
                                             "--remote-fetch-us",
                                             "--remote-fetch-slots",
                                             "--io-depth",
                                             "--task",
                                             "--matmul-precision",
                                             "--cudnn-tf32",
                                             "--amp",
                                             "--memory-format",
                                             "--attention",
                                             "--fused",
                                             "--micro-steps",
                                             "--prep-workers",
                                             "--prep-worker-cpus",
                                             "--prep-offload",
                                             "--prep-local-share",
                                             "--prep-network",
                                             "--prep-worker-buffer",
                                             "--image-size"};
  std::vector<std::string> given;
  for (const char* name : kMeaningless) {
    const CLI::Option* o = cmd->get_option_no_throw(name);
    if (o && o->count() > 0) given.emplace_back(name);
  }
  if (given.empty()) return;
  std::string list;
  for (const auto& g : given) list += (list.empty() ? "" : ", ") + g;
  throw InputError(fmt::format(
      "{} {} not apply to --dlio-config runs: the workload's YAML sets them (use ++workload.<section>.<key>=<value> "
      "overrides); with --dlio-config gpemu train accepts --gpus (world size), --nodes, --network, --gpu, --clock, "
      "--seed, --profiles, --json, --trace and --report",
      list, given.size() == 1 ? "does" : "do"));
}

void train_dlio(const TrainArgs& a, CLI::App* cmd) {
  const JobArgs& j = a.job;
  reject_for_dlio(cmd);
  DlioTrainArgs d;
  d.config = a.dlio_config;
  d.overrides = a.dlio_overrides;
  d.dist_timeout = std::chrono::milliseconds(static_cast<long long>(a.dist_timeout_s * 1000));
  d.clock = parse_clock_kind(j.clock);
  if (cmd->get_option("--gpu")->count() > 0) d.gpu = j.model.gpu;
  if (cmd->get_option("--gpus")->count() > 0) d.world_size = j.gpus;
  if (cmd->get_option("--nodes")->count() > 0) d.nodes = j.nodes;
  if (cmd->get_option("--network")->count() > 0) d.network = j.network;
  if (cmd->get_option("--seed")->count() > 0) d.seed = j.seed;
  d.profiles = j.model.profiles;
  d.trace = a.trace;
  d.report = a.report;
  d.json = j.json;
  run_dlio_train(d);
}

// The flags' own checks, the job's spec from the shared job flags, and which
// data feeds the GPUs: a folder, in-memory batches, or the default dataset
// (-n without --data keeps the workload-only runs of earlier versions).
TrainData check_train_flags(const TrainArgs& a, CLI::App* cmd, JobSpec& spec) {
  const JobArgs& j = a.job;
  if (!a.dlio_overrides.empty())
    throw InputError(
        fmt::format("'{}' is an override of a DLIO workload: give the workload with --dlio-config FILE.yaml",
                    a.dlio_overrides.front()));
  if (a.epochs < 1) throw InputError(fmt::format("--epochs {} is impossible: it must be at least 1", a.epochs));
  if (a.iterations < -1)
    throw InputError(fmt::format("--iterations {} is impossible: it must be 0 or more", a.iterations));
  if (!j.data.empty() && a.synthetic)
    throw InputError("--data and --synthetic exclude each other: train on a folder, or on in-memory batches");
  TrainData d;
  d.clock = parse_clock_kind(j.clock);
  d.virtual_data = !j.virtual_dataset.empty();
  if (d.virtual_data && a.synthetic)
    throw InputError(
        "--virtual-dataset excludes --synthetic: train on sizes without files, a folder, or in-memory batches");
  check_virtual_dataset(j);
  spec = job_spec(j);
  d.cache_bytes = gpemu::parse_byte_size(a.cache_bytes, "--cache-bytes");
  d.cache_policy = pipeline::parse_cache_policy(a.cache_policy);
  if (d.cache_bytes == 0 && cmd->get_option("--cache-policy")->count() > 0)
    throw InputError(fmt::format("--cache-policy {} needs a loader cache: give --cache-bytes too", a.cache_policy));
  if (!a.page_cache_bytes.empty() && a.storage.empty())
    throw InputError(
        "--page-cache-bytes is the page cache in front of a modelled storage device: give --storage too (without "
        "it every read is a memory read)");
  d.synthetic = !d.virtual_data && (a.synthetic || (j.data.empty() && a.iterations >= 0));
  if (!a.storage.empty() && d.clock != ClockKind::Virtual)
    throw InputError(fmt::format(
        "--storage {} models a device for the modelled loader (--clock virtual); the real loader reads the storage "
        "the data is on",
        a.storage));
  if (a.storage_shared && d.clock != ClockKind::Virtual)
    throw InputError("--storage-shared is modelled: give --clock virtual (the modelled loader)");
  d.distributed_cache = pipeline::parse_distributed_cache(a.distributed_cache);  // a bad name fails here
  const pipeline::DistributedCacheKind dcache = d.distributed_cache;
  if (dcache != pipeline::DistributedCacheKind::None && d.clock != ClockKind::Virtual) {
    // Real nodes share their loader caches; one process is one node, with nothing to share.
    if (!dist::read_launch_env())
      throw InputError(fmt::format(
          "--distributed-cache {} under the real clock shares the loader caches of the nodes of a job of several "
          "processes (torchrun or mpirun, one per node); this process is the only node: run it under a launcher, "
          "or give --clock virtual --nodes N for modelled nodes",
          a.distributed_cache));
    if (d.cache_bytes == 0)
      throw InputError(
          fmt::format("--distributed-cache {} is made of the nodes' loader caches: give each node's (--cache-bytes)",
                      a.distributed_cache));
    if (a.remote_fetch_us >= 0 || a.remote_fetch_slots > 0)
      throw InputError(fmt::format("{} models remote reads (--clock virtual); between real nodes the network is real",
                                   a.remote_fetch_us >= 0 ? "--remote-fetch-us" : "--remote-fetch-slots"));
  }
  if (dcache != pipeline::DistributedCacheKind::None && d.synthetic)
    throw InputError(fmt::format(
        "--distributed-cache {} caches a dataset's samples: give one (--virtual-dataset), not in-memory batches",
        a.distributed_cache));
  if (a.io_depth > 0 && a.storage.empty())
    throw InputError(
        fmt::format("--io-depth {} limits a modelled storage device's requests: give --storage too", a.io_depth));
  if ((a.remote_fetch_us >= 0 || a.remote_fetch_slots > 0) && dcache == pipeline::DistributedCacheKind::None)
    throw InputError(fmt::format("{} is about a distributed cache's remote reads: give --distributed-cache too",
                                 a.remote_fetch_us >= 0 ? "--remote-fetch-us" : "--remote-fetch-slots"));
  if (a.storage_shared && a.storage.empty())
    throw InputError("--storage-shared makes the --storage device one server for every node: give --storage too");
  if (!a.storage.empty() && d.synthetic)
    throw InputError(fmt::format(
        "--storage {} has nothing to read with in-memory batches: give a dataset (--virtual-dataset or --data)",
        a.storage));
  if (j.decode == "gpu" && d.synthetic)
    throw InputError(
        "--decode gpu decodes a dataset's JPEGs, and in-memory batches are tensors already: give a dataset "
        "(--virtual-dataset or --data)");
  return d;
}

// The job's data: in-memory batches, or the dataset through the loader the
// clock implies (loader_choice.h), with the flags' cache, storage and pinning.
void fill_data(const TrainArgs& a, TrainData& d, JobSpec& spec, std::vector<std::string>& notes) {
  const JobArgs& j = a.job;
  d.read_method = spec.data.loader.read_method;
  if (d.synthetic) {
    d.loader_kind = "synthetic";
    spec.data.source = DataSource::Synthetic;
    spec.data.synthetic_batches = a.iterations >= 0 ? a.iterations : kDefaultSyntheticIterations;
    return;
  }
  if (a.iterations >= 0) spec.schedule.max_iterations = a.iterations;
  spec.data.dataset =
      d.virtual_data ? pipeline::virtual_dataset(j.virtual_dataset, j.seed) : pipeline::open_dataset_folder(d.dir);
  if (a.group_size > 1) {
    if (!d.virtual_data)
      throw InputError(fmt::format(
          "--group-size {} packs a dataset described by sizes (--virtual-dataset); files are packed by 'gpemu "
          "dataset group --size {}', whose folder --data then reads by groups",
          a.group_size, a.group_size));
    spec.data.dataset = pipeline::grouped(spec.data.dataset, static_cast<std::size_t>(a.group_size));
  }
  spec.data.loader.group_size = spec.data.dataset.group_size;
  d.images = spec.data.dataset.size();
  d.bytes = spec.data.dataset.total_bytes();
  spec.data.source = dataset_source(d.clock);
  if (spec.data.source == DataSource::Modelled) {
    d.loader_kind = "modelled";
    pipeline::LoaderModelOptions& m = spec.data.model;
    m.cache_bytes = d.cache_bytes;
    m.cache_policy = d.cache_policy;
    if (!a.storage.empty()) {
      m.storage = pipeline::parse_storage(a.storage);
      if (!a.page_cache_bytes.empty())
        m.page_cache_bytes = gpemu::parse_byte_size(a.page_cache_bytes, "--page-cache-bytes");
      m.page_cache_cold = a.cold;
    } else if (a.cold) {
      notes.push_back("--cold has no effect on the modelled loader without --storage (every read is a memory read)");
    }
    spec.data.shared_storage = a.storage_shared;
    spec.data.distributed_cache = pipeline::parse_distributed_cache(a.distributed_cache);
    if (a.remote_fetch_us >= 0)
      spec.data.remote_fetch_latency = ns_from_double(a.remote_fetch_us * 1e3, a.remote_fetch_us, "us");
    spec.data.remote_fetch_slots = a.remote_fetch_slots;
    spec.data.io_depth = a.io_depth;
    if (d.read_method != pipeline::ReadMethod::Pread && a.storage.empty())
      notes.push_back(
          "--read-method and --superbatch have no effect on the modelled loader without --storage (every read is a "
          "memory read)");
    return;
  }
  if (d.cache_bytes > 0)  // one per machine
    spec.data.loader.cache = std::make_shared<pipeline::LoaderCache>(
        pipeline::cache_admission(spec.data.dataset, d.cache_bytes, d.cache_policy));
  d.loader_kind = "real";
  if (spec.data.model.scaling)
    notes.push_back("--loader-scaling has no effect on the real loader (its workers run on this machine's cores)");
  spec.data.cold = a.cold;
  if (spec.data.pin_memory) {
    if (j.pin_mode == "auto")
      if (auto note = lock_pinned_if_allowed(spec.data, j.gpus)) notes.push_back(std::move(*note));
    d.pin_mode_used = spec.data.loader.pin_mode == PinMode::Lock ? "lock" : "account";
  }
}

void train(const TrainArgs& a, CLI::App* cmd) {
  const JobArgs& j = a.job;
  check_run_outputs(a.trace, a.report);
  if (!a.dlio_config.empty()) return train_dlio(a, cmd);
  JobSpec spec;
  TrainData d = check_train_flags(a, cmd, spec);
  // A loader error (a data file gone mid-epoch) or SIGINT/SIGTERM, on one GPU
  // or several: the job returns what finished, which is printed before the
  // error, and the command still fails.
  spec.schedule.keep_partial = true;
  std::vector<std::string> notes;
  if (!d.synthetic && !d.virtual_data) d.dir = training_data_dir(j.data, j.json, &notes);
  auto costs = job_cost_model(j.model, &notes);
  spec.schedule.epochs = a.epochs;
  spec.trace = !a.trace.empty();
  // Each step and kernel is kept only for what draws them (the trace's host
  // spans, the report's per-batch stalls and utilisation); the printed
  // figures come from the totals, so a long run's memory stays flat.
  spec.record.steps = spec.record.kernels = spec.trace || !a.report.empty();
  fill_data(a, d, spec, notes);
  if (!d.synthetic) {  // an FFCV-style file (or its virtual layout) is read by the FFCV-style loader
    pipeline::use_ffcv_loader(spec.data.dataset, static_cast<std::size_t>(spec.batch_size), spec.data.loader,
                              spec.data.source == DataSource::Modelled ? &spec.data.model : nullptr);
    d.read_method = spec.data.loader.read_method;
  }
  d.fastflow = apply_prep_args(a.prep, j.network, *costs, spec, notes);

  // One node of several processes (torchrun, mpirun): joins the others first.
  const auto real_nodes = join_real_nodes(spec, d.clock, *costs, a.dist_timeout_s, d.distributed_cache);

  // The one-job case of a session: the job alone on GPUs of its own.
  auto clock = make_clock(d.clock);
  Session session(*clock, *costs, session_for(spec));
  auto wall_start = std::chrono::steady_clock::now();
  std::optional<ProgressBar> bar;
  ProgressObserver progress(bar);
  session.add_job({.name = "train", .job = spec, .observer = &progress, .on_start = [&](Job& job) {
                     wall_start = std::chrono::steady_clock::now();
                     bar.emplace(fmt::format("training {} on {}x {}", canonical_model_name(j.model.model), j.gpus,
                                             spec.cluster.gpu->id),
                                 job.planned_iterations());
                   }});
  session.run();
  if (bar) bar->finish();
  const JobOutcome& outcome = session.outcome(0);
  const RunRecord& rec = record_of(outcome);
  add_prep_service_notes(a.prep, rec, notes);
  // An error before any step (out of memory at the first batch) has nothing to report.
  const bool no_step =
      std::all_of(rec.ranks.begin(), rec.ranks.end(), [](const RankRecord& r) { return r.train.steps == 0; });
  if (rec.stopped && no_step && !interrupt_signal()) std::rethrow_exception(rec.stopped);
  if (const int sig = interrupt_signal()) {
    notes.push_back(interrupted_note(sig));
  } else if (rec.stopped) {
    notes.push_back(
        "stopped by the error below: the figures cover the iterations finished before it (the last "
        "epoch is cut short)");
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (real_nodes) notes.push_back(real_nodes_note(*real_nodes));
  if (!a.trace.empty()) {
    train::add_stall_spans(rec, session.timeline());
    write_chrome_trace_file(session.timeline().trace_records(), session.timeline().host_spans(), outcome.devices,
                            a.trace);
  }
  if (!a.report.empty()) {
    RunReport rep = train::make_run_report(rec, configuration_rows(run_config(a, d, spec, rec)));
    for (const std::string& n : notes) rep.notes.push_back(n);
    write_html_report_file(rep, a.report);
  }
  if (j.json) {
    nlohmann::json out = train_json(a, d, spec, rec, wall_s, notes);
    if (real_nodes) out["real_nodes"] = real_nodes_json(*real_nodes);
    std::cout << out.dump(2) << '\n';
  } else {
    print_train(a, d, spec, rec, wall_s, notes);
  }
  if (rec.stopped) std::rethrow_exception(rec.stopped);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train on emulated GPUs fed by a real data pipeline (with no arguments: one epoch of a synthetic "
      "ImageNet-like dataset, generated once in the cache folder, on one emulated V100)");
  add_job_options(cmd, a->job);
  add_prep_options(cmd, a->prep);
  cmd->add_flag("--synthetic", a->synthetic, "No files: in-memory batches that are always ready");
  cmd->add_option("--iterations,-n", a->iterations,
                  "With --data: stop after this many iterations per GPU. Without --data: run this many iterations "
                  "of in-memory batches (as --synthetic; default 300)")
      ->check(whole_number_in(1, std::numeric_limits<int>::max()));
  cmd->add_option("--epochs", a->epochs, "Epochs")->capture_default_str()->check(whole_number_in(1, 1000000));
  cmd->add_option("--dist-timeout", a->dist_timeout_s,
                  "Under torchrun or mpirun (one process per node): seconds a rank waits for the others in the "
                  "rendezvous and each step's network all-reduce before it stops with an error")
      ->capture_default_str()
      ->check(finite_number_in(1, 3600));
  cmd->add_option("--cache-bytes", a->cache_bytes,
                  "Loader cache (MinIO policy) shared by the GPUs' loaders, e.g. 512M; 0: none")
      ->capture_default_str()
      ->check(byte_size());
  cmd->add_option("--cache-policy", a->cache_policy,
                  "What the loader cache admits: minio (until full) or sff (small files first: only files no larger "
                  "than the largest size whose smaller files all fit)")
      ->capture_default_str();
  cmd->add_option("--storage", a->storage,
                  "Modelled loader (--clock virtual): read from a modelled device, hdd, ssd, nvme, nfs or a JSON file "
                  "(default: every read from memory)");
  cmd->add_option("--group-size", a->group_size,
                  "With --virtual-dataset: pack the samples N to a file, shuffle and shard whole files, and read a "
                  "file's samples with one request (GPEmu's file grouping)")
      ->capture_default_str()
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--page-cache-bytes", a->page_cache_bytes,
                  "With --storage: the page cache in front of it (LRU), e.g. 4G; 0: none (default: unlimited)")
      ->check(byte_size());
  cmd->add_flag("--cold", a->cold,
                "Evict the dataset's files from the page cache before each epoch (with --storage: empty the "
                "modelled page cache)");
  cmd->add_flag("--storage-shared", a->storage_shared,
                "With --storage and --nodes: the device is one server (an NFS server) that every node's loaders "
                "read, each with its share; default: each node has its own device");
  cmd->add_option("--distributed-cache", a->distributed_cache,
                  "With --nodes and --cache-bytes (each node's): partitioned (CoorDL's partitioned cache, LADCache's "
                  "regular mode: other nodes' cached samples read over the network) or locality-aware (LADCache's: "
                  "each node the same partition every epoch); none")
      ->capture_default_str();
  cmd->add_option("--remote-fetch-us", a->remote_fetch_us,
                  "With --distributed-cache: time of one remote read's request and answer, before its bytes cross "
                  "the NIC (default: the network's latency twice)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--remote-fetch-slots", a->remote_fetch_slots,
                  "With --distributed-cache: remote reads a node's cache server answers at once (default: as many as "
                  "the node's loader workers send)")
      ->check(whole_number_in(1, 65536));
  cmd->add_option("--io-depth", a->io_depth,
                  "With --storage: a node's storage requests in flight at most (LADCache's --loader-bottleneck); "
                  "default: the device's slots")
      ->check(whole_number_in(1, 65536));
  cmd->add_option("--trace", a->trace,
                  "Write a Chrome/Perfetto trace (GPU tracks, loader workers, stalls) to this file");
  cmd->add_option("--report", a->report, "Write an HTML report with charts to this file");
  cmd->add_option("--dlio-config", a->dlio_config,
                  "Run a DLIO / MLPerf Storage workload (YAML) on emulated accelerators (docs/dlio.md)");
  cmd->add_option("overrides", a->dlio_overrides,
                  "DLIO overrides after --dlio-config: ++workload.<section>.<key>=<value>");
  cmd->callback([a, cmd] { train(*a, cmd); });
}

}  // namespace gpemu::cli
