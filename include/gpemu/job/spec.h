// What a job runs: JobSpec, a plain struct of structs with documented defaults
// (compute, data, cluster, schedule, what the record keeps), and validate().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/program_variant.h"
#include "gpemu/device/device.h"
#include "gpemu/host.h"
#include "gpemu/interconnect/cluster.h"
#include "gpemu/interconnect/gradient_buckets.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/distributed_cache.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/loader_model.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"
#include "gpemu/zoo.h"

namespace gpemu {

// When the host waits for the GPU.
enum class SyncMode {
  EveryIteration,  // loss.item() each iteration
  AtEnd,           // only torch.cuda.synchronize() at the end
};
// "iteration" or "end"; InputError otherwise.
SyncMode parse_sync_mode(std::string_view s);
std::string_view to_string(SyncMode m);

// The model and the program variant the GPU runs (as PyTorch users name them).
struct ModelSpec {
  std::string name = std::string(kDefaultModel);
  zoo::Precision precision = zoo::Precision::FP32;
  zoo::Optimizer optimizer = zoo::Optimizer::SGD;
  // optimizer.zero_grad() keeps the .grad tensors (set_to_none=False, PyTorch
  // < 2.0's default and how GPEmu measured); false: set_to_none=True.
  bool keep_grads = true;
  // The training loop holds the model's output until the step ends (as
  // imagenet's main.py does); false: only the loss (zoo::ReplayOptions).
  bool keep_output = true;
  std::int64_t seq_len = 0;  // sequence models; 0: the model's default
  // The program variant (matmul precision, AMP flavour, memory format,
  // attention, fused ops, micro-steps); nullopt: variant_from_precision
  // (precision). When set, precision is zoo_precision(*variant): set both
  // with set_program_variant.
  std::optional<ProgramVariant> variant;
  // The host that issues the steps (host.h); nullopt: the launch factors of
  // the GPU family's calibration (the hosts GPEmu's profiles were measured in).
  std::optional<HostProfile> host;
  // How host and GPU meet within a step (cost_model.h): Phases as GPEmu timed
  // them, Pipelined as a PyTorch 2 loop issues steps back to back.
  StepSync sync = StepSync::Phases;
};
// The variant the model runs: its own, or the one its precision names.
ProgramVariant program_variant(const ModelSpec& m);
// Sets the variant and the zoo precision it is traced in (pure half: the half trace).
void set_program_variant(ModelSpec& m, const ProgramVariant& v);
// ProgramVariantNames at PyTorch's defaults, attention and foreach left to a TorchPreset.
inline ProgramVariantNames torch_default_names() {
  ProgramVariantNames n;
  n.attention.clear();
  n.foreach.clear();
  return n;
}
// The program PyTorch `preset.major` runs for m's model at m's precision: the
// variant from `names` with the preset's defaults where attention or foreach
// is empty (with_torch_defaults; the graph may change: vit_b_16 ->
// vit_b_16_sdpa), zero_grad, how steps are issued, and the default host for
// PyTorch 2. The default names: every other option at PyTorch's default.
// keywords: errors name the options as keywords (Python), not as flags.
void apply_torch_preset(ModelSpec& m, const TorchPreset& preset, ProgramVariantNames names = torch_default_names(),
                        bool keywords = false);
// A zero_grad choice over the preset's: "zero" (grads kept, PyTorch < 2.0's
// zero_grad()), "none" (set_to_none=True, PyTorch >= 2.0's default), empty:
// the preset's. InputError naming --zero-grad (keywords: zero_grad) otherwise.
void apply_zero_grad(ModelSpec& m, std::string_view value, bool keywords = false);

// Where a step's GPU time comes from.
enum class StepTime {
  CostModel,  // forward and backward of ModelSpec from the cost model
  Fixed,      // a drawn time per step (DLIO's computation_time / eval_time)
};

struct ComputeSpec {
  StepTime step_time = StepTime::CostModel;
  ModelSpec model;
  // StepTime::Fixed: the draws, seeded per rank from `seed`.
  TimeSpec fixed_train, fixed_eval;
  std::uint64_t fixed_seed = 0;
  // What the step does besides computing (a PyTorch loop: all of them; DLIO's
  // default: none, as dlio_benchmark only sleeps).
  bool copy_batch = true;                    // x.to(device): the batch's bytes over PCIe
  bool use_allocator = true;                 // weights, batch and activations through the caching allocator
  bool all_reduce = true;                    // DDP gradient all-reduce when the job has several GPUs
  SyncMode sync = SyncMode::EveryIteration;  // loss.item() each step, or only at the epoch's end
  VariationOptions variation;                // cv replaced by a measured profile's cv
  // GPEmu-compatible "N GPUs" (only to compare with GPEmu's own figures):
  // one rank whose every batch's H2D copy and compute take 1/N of their
  // time, with no all-reduce, as GPEmu's prototype emulated N GPUs. 1: off.
  int time_divisor = 1;
};

// Where a rank's batches come from.
enum class DataSource {
  Synthetic,  // in-memory batches, always ready (no files)
  Loader,     // the real data loader: real files, reads, decodes, workers
  Modelled,   // the loader's semantics with modelled costs (deterministic on the virtual clock)
  Custom,     // DataSpec::custom builds each rank's source
};

struct DataSpec {
  DataSource source = DataSource::Synthetic;
  // Synthetic: batches per epoch, and bytes per sample (0: the model's input).
  std::int64_t synthetic_batches = 300;
  std::uint64_t synthetic_bytes_per_sample = 0;
  // Synthetic with a dataset: batches of the sampler's indices over `dataset`
  // (DLIO's synthetic loader) instead of synthetic_batches.
  bool synthetic_over_dataset = false;
  bool pin_memory = true;  // Synthetic: the batches' host memory
  // Loader / Modelled (and Synthetic over a dataset).
  pipeline::Dataset dataset;
  pipeline::LoaderOptions loader;      // rank and world_size are set per rank
  pipeline::LoaderModelOptions model;  // Modelled
  // Modelled, several nodes (ClusterSpec::nodes; docs/pipeline.md "Several
  // nodes"): each node has its own cores (model.cores), page cache, loader
  // cache (model.page_cache_bytes, model.cache_bytes) and storage device,
  // shared by its ranks; with shared_storage, model.storage is one server
  // that every node's loaders read (an NFS server), each seeing its share.
  bool shared_storage = false;
  // Storage requests a node keeps in flight at most (split among its ranks); 0: no limit but the device's.
  int io_depth = 0;
  // A cache spanning the nodes (pipeline.h, "distributed cache"); remote
  // hits go to a fetch server over ClusterSpec::network's NIC, with this
  // latency per request (-1: the network's latency twice, a request and its
  // answer) and this many requests answered at once per node (0: as many as
  // the node's loader workers send).
  pipeline::DistributedCacheKind distributed_cache = pipeline::DistributedCacheKind::None;
  Duration remote_fetch_latency = -1;
  int remote_fetch_slots = 0;
  bool cold = false;           // Loader: evict the epoch's files first
  bool untimed_reads = false;  // Loader: reads take no emulated time (DLIO, virtual clock)
  // Custom: rank's source (called once per rank, before the run).
  std::function<std::unique_ptr<pipeline::BatchSource>(int rank, Clock& clock, Timeline& timeline)> custom;
};

struct ClusterSpec {
  // required. With device.share.gpu set, the job's one GPU is a process's
  // view of that shared GPU, on its timeline (gpus must be 1).
  const GpuSpec* gpu = nullptr;
  int gpus = 1;  // data-parallel ranks, over all nodes
  // Nodes the GPUs are spread over evenly (interconnect/cluster.h). A job
  // whose step program moves bytes (H2D copies, the all-reduce) puts at most
  // kMaxGpusPerNode GPUs in a node; with nodes > 1 the nodes are joined by
  // `network` and DDP's all-reduce is hierarchical. Ranks that move no bytes
  // (a DLIO step) get independent devices and ignore the nodes.
  int nodes = 1;
  NetworkSpec network;   // nodes > 1 (network_preset / parse_network)
  NodeOptions node;      // gpus > 1: each node (node.gpus is set from gpus / nodes)
  DeviceOptions device;  // gpus == 1
  // A session's GPUs (session.h sets it; a caller that keeps its own
  // devices may too): with on_node.timeline set, the ranks run on these GPUs
  // of an existing node, on its timeline, instead of GPUs the job builds.
  // With links (a DDP step of several GPUs) the job's node is a view of
  // on_node.node (Node(NodeGpus, ...): its switch uplinks and NVLink, shared
  // with the other jobs on it); otherwise each rank's device is made from
  // `device` (PCIe links of its own, or its shared GPU's). gpus must be
  // on_node.gpus.size(); device.share stays empty (the shared GPUs are
  // on_node.shares). A job of several nodes given only a timeline still
  // builds its nodes and network on it (Cluster), unless on_cluster gives
  // nodes and a network of the session's. Trace rows:
  // node.first_device_index + rank.
  NodeGpus on_node;
  // One node of a job of several processes (real mode, docs/train.md "Real
  // nodes"): this process emulates node real_node of real_nodes (its GPUs are
  // the global ranks real_node x gpus + local, which the loaders shard by),
  // and each train step of a local rank, once its batch is ready and its
  // GPU's earlier work is done, first calls real_exchange(local rank, step
  // number from 1): the network part of the step's gradient all-reduce, a
  // real collective among the processes that blocks its host thread for as
  // long as the real network takes. nodes must be 1 (the other nodes are processes).
  int real_node = 0, real_nodes = 1;
  std::function<void(int local_rank, std::uint64_t step)> real_exchange;
  // A session's nodes and network for a job of several nodes that moves
  // bytes (with on_node.timeline, their timeline): its Cluster is a view of
  // them (interconnect/cluster.h), so its all-reduce crosses the NICs and
  // switch other jobs on those nodes use. One entry per node, rank order.
  ClusterGpus on_cluster;
  BucketOptions buckets;
  int backward_even_chunks = 16;  // DDP without a zoo graph (backward_plan.h)
  int backward_max_chunks = 64;
};

// A checkpoint after step `step` (1-based) of epoch `epoch` (1-based), inside
// the epoch; or, after_epoch, once the epoch's steps are done (`step` is then
// only its label). Checkpoint-only jobs (ScheduleSpec::train false) write the
// points in order.
struct CheckpointPoint {
  int epoch = 0;
  std::uint64_t step = 0;
  bool after_epoch = false;
};
struct CheckpointCall {
  int rank = 0;
  int epoch = 0;
  std::uint64_t step = 0;
  Clock* clock = nullptr;
  Timeline* timeline = nullptr;
  std::function<void(Time)> sleep_until;  // the rank's host sleeps go through this
};
struct CheckpointIo {
  bool written = false;  // false: this rank writes nothing
  std::uint64_t bytes_written = 0, bytes_read = 0;
  double write_s = 0, read_s = 0;  // wall time of the real I/O
};

// Between two train steps of a rank, what a caller that pauses or preempts
// the job may do (ScheduleSpec::between_steps; a Session's pause and
// preemption, session.h). Given on the rank's host thread; valid during the call.
// The ranks of a job of several GPUs reach their boundaries at different
// times: a caller that stops them stops each before the same step
// (iterations()), or their all-reduces would wait for one another.
class StepBoundary {
 public:
  int rank() const;
  std::int64_t iterations() const;  // train steps this rank has run
  void sleep_until(Time t) const;   // through the rank's sleeper
  void drain() const;               // the host waits for the rank's GPU work (synchronize)
  void release_memory() const;      // its tensors and cached segments go back (the process left the GPU)
  void restore_memory() const;      // its persistent state is allocated again (restarted from a checkpoint)
  // The host waits until every rank of the job has called barrier() (the
  // job's ranks, under either clock; returns at once for one GPU). Throws
  // when another rank failed instead.
  void barrier() const;

 private:
  friend class Job;
  StepBoundary(class Job& job, void* rank) : job_(job), rank_(rank) {}
  class Job& job_;
  void* rank_;
};

struct EvalSpec {
  int first_epoch = 0;      // 1-based; 0: no evaluation
  int every = 1;            // epochs between evaluations
  std::uint64_t steps = 0;  // per evaluation
  DataSpec data;
};

struct ScheduleSpec {
  int epochs = 1;
  // Stop each rank after this many steps over all epochs; -1: run the epochs.
  std::int64_t max_iterations = -1;
  // Steps per epoch; 0: what the source gives. A source that runs out sooner
  // is an error (DLIO's fixed steps per epoch).
  std::uint64_t steps_per_epoch = 0;
  // The epoch number sources see: the epoch (0-based; a new shuffle each
  // epoch), or always 0 (DLIO's seed_change_epoch: False).
  bool reshuffle_each_epoch = true;
  // Train ranks at all (false: only the checkpoints, DLIO's checkpoint-only mode).
  bool train = true;
  std::vector<CheckpointPoint> checkpoints;
  std::function<CheckpointIo(const CheckpointCall&)> checkpoint;  // the I/O; called on the rank's host thread
  EvalSpec eval;
  // On an error in a rank (a failed checkpoint, a loader error, SIGINT or
  // SIGTERM), return the record of what finished with RunRecord::stopped set
  // instead of throwing. A single GPU interrupted by a signal always stops
  // cleanly after its current step, keeping its record.
  bool keep_partial = false;
  // Called before each train step of each rank, on the rank's host thread;
  // null: nothing between steps.
  std::function<void(const StepBoundary&)> between_steps;
};

// Where a job's per-step records go once their GPU times are known, besides
// (or instead of) RunRecord: a front end's running figures, or a file of
// rows. Called from the ranks' host threads (and from Job::record() for the
// last ones), per rank in step and kernel issue order.
struct StepRecord;
struct KernelSpan;
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void on_step(const StepRecord&) {}
  virtual void on_kernel(int gpu, const KernelSpan&) {}
};

// What a RunRecord keeps of each step. By default every step and kernel
// (RunRecord::steps, RankRecord::compute_intervals), so memory grows with the
// steps; a long run keeps neither and its memory is flat: the per-rank totals
// (RankRecord::train, compute_busy, last_kernel_end) are kept either way, and
// summarize() reads only them. `epochs`: RunRecord::epochs keeps every
// phase's mark (false: a caller that hears them through
// JobObserver::on_phase_end keeps what it needs, and summarize() has no
// per-epoch rows).
struct RecordSpec {
  bool steps = true;
  bool kernels = true;
  bool epochs = true;
  RecordSink* sink = nullptr;  // not owned; outlives the run
};

struct JobSpec {
  ComputeSpec compute;
  int batch_size = 64;  // per rank
  DataSpec data;
  ClusterSpec cluster;
  ScheduleSpec schedule;
  RecordSpec record;
  bool trace = false;  // record timeline operations and host spans
};

// Throws InputError naming the first bad field, its value and what is accepted.
void validate(const JobSpec& spec);
// What a job's RunRecord keeps to the run's end (everything else is flat),
// in bytes: with RecordSpec::epochs a mark per phase of each GPU (about 230
// bytes an epoch with its summary, measured), with RecordSpec::steps each
// step and its kernels (about 400 bytes a step), with JobSpec::trace each
// step's timeline operations (about 10 KB a step of resnet18, measured; a
// model of more operators keeps more). A Job refuses (InputError) a run
// whose records cannot fit in what the process may still allocate.
inline constexpr double kRecordBytesPerEpoch = 256, kRecordBytesPerStep = 400, kTraceBytesPerStep = 10240;
double kept_record_bytes(const JobSpec& spec, std::int64_t planned_steps);
// Whether the job's ranks share links (PCIe uplinks, NVLink, the network):
// their step program copies batches or all-reduces gradients.
bool uses_links(const JobSpec& spec);

}  // namespace gpemu
