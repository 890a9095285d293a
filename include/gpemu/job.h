// The training-job engine: a JobSpec, the Job that runs it on a clock, and its typed record.
//
// Sections: workload, job.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/interconnect.h"
#include "gpemu/pipeline.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"
#include "gpemu/zoo.h"

// ==== workload ====
//
// Pieces of a training step shared by the job (job.h) and predict: when the
// host waits for the GPU, and the even-split memory plan used for models that
// are not in the model zoo.
//
// Thread safety: free functions on values.

namespace gpemu {

enum class SyncMode {
  EveryIteration,  // loss.item() each iteration
  AtEnd,           // only torch.cuda.synchronize() at the end
};
// "iteration" or "end"; InputError otherwise.
SyncMode parse_sync_mode(std::string_view s);
std::string_view to_string(SyncMode m);

// The allocations one training iteration makes, derived from a StepCost.
// Persistent state (weights, gradients, optimizer state) is allocated as
// per-tensor blocks once; each iteration allocates the input batch and the
// activations layer by layer during forward and frees them in reverse during
// backward. Until per-model tensor graphs exist (the model zoo), tensors are
// split evenly: docs/workload.md.
struct MemoryPlan {
  std::vector<std::uint64_t> persistent_tensors;
  std::uint64_t input_bytes = 0;
  std::vector<std::uint64_t> activation_tensors;  // allocation order
};
MemoryPlan make_memory_plan(const StepCost& cost, int batch_size);

struct MemoryCheck {
  bool fits = true;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::string reason;  // why it does not fit: the OOM message, or the measured evidence
};
// What a kernel of `flops` and `bytes` of memory traffic keeps busy on `gpu`
// when alone, by the roofline at the card's peaks: the slower of compute and
// memory is the bottleneck (1), the other its share of that time. {1, 1}
// when the figures are missing.
KernelDemand roofline_demand(const GpuSpec& gpu, Precision precision, double flops, double bytes);

// Replays two iterations of the plan through a fresh caching allocator of the
// device's capacity (no timing). A batch at or beyond measured OOM evidence
// does not fit, whatever the replay says.
MemoryCheck check_memory(const StepCost& cost, int batch_size, std::uint64_t capacity_bytes);

}  // namespace gpemu

// ==== job ====
//
// The training job: the one engine that every front end drives (`gpemu
// train`, `train --dlio-config`, `analyze`, the benches, the C++ API).
//
//   JobSpec  --(a front end fills it)-->  Job(Clock&, const CostModel&, JobSpec)  --run()-->  RunRecord
//   summarize(RunRecord), dlio::metrics(RunRecord): pure functions of the record
//
// Per rank (one emulated GPU and one host thread each, run under
// Clock::run_concurrently so virtual-clock runs are deterministic), per epoch:
//
//   for batch in source:               # next() blocks until the batch is in host memory
//       walk the StepProgram           # the only thing that differs between jobs
//       [checkpoint]                   # at the points the schedule names
//   [evaluation]                       # an eval phase after the epochs the schedule names
//
// A StepProgram is data: the list of operations one step issues (see
// StepOp). A PyTorch training step is
//   H2D copy of the batch, activations allocated, forward, backward (in chunks
//   with DDP's gradient-ready points), wait for the all-reduce, optimizer
//   step, activations freed, loss.item()
// and a DLIO step is
//   compute (a draw of computation_time), synchronize, release the batch.
// Memory follows the model zoo's traced tensor lifetimes through each
// device's caching allocator where the model is in the zoo (the same plan
// `gpemu predict` replays), else an even split of the cost model's figures
// (flagged in RunRecord::memory_plan), so OutOfMemoryError comes at the same
// batch as predict says.
//
// Data stall of batch i on a GPU: the time its GPU was idle because the batch
// was not ready, i.e. the overlap of [host called next(), next() returned)
// with [end of the GPU's previous work on the training stream, H2D start of
// batch i). docs/train.md has the details.
//
// Thread safety: a Job is used by one thread; run() starts the host threads.
// JobObserver callbacks come from the ranks' host threads.

namespace gpemu {

// ---- what to run ------------------------------------------------------------

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
  // builds its nodes and network on it (Cluster). Trace rows:
  // node.first_device_index + rank.
  NodeGpus on_node;
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
class StepBoundary {
 public:
  int rank() const;
  std::int64_t iterations() const;  // train steps this rank has run
  void sleep_until(Time t) const;   // through the rank's sleeper
  void drain() const;               // the host waits for the rank's GPU work (synchronize)
  void release_memory() const;      // its tensors and cached segments go back (the process left the GPU)
  void restore_memory() const;      // its persistent state is allocated again (restarted from a checkpoint)

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
  // Called before each train step of each rank; null: nothing between steps.
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
// summarize() reads only them.
struct RecordSpec {
  bool steps = true;
  bool kernels = true;
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
// Whether the job's ranks share links (PCIe uplinks, NVLink, the network):
// their step program copies batches or all-reduces gradients.
bool uses_links(const JobSpec& spec);

// ---- the step program -------------------------------------------------------

enum class StepOp {
  CopyBatch,      // allocate the input on the GPU, copy it (pinned: async; pageable: the host waits)
  Forward,        // allocate activations (forward events of the memory plan), forward kernel
  Backward,       // backward (chunks with gradient-ready points under DDP), backward memory events
  AllReduceWait,  // the stream waits for the iteration's all-reduces (DDP)
  OptimizerStep,  // optimizer kernel and its memory events; frees the activations and the input
  LossItem,       // a 4-byte D2H copy the host waits for (loss.item())
  Compute,        // a kernel of the drawn fixed step time
  Synchronize,    // the host waits for the stream (torch.cuda.synchronize, DLIO's sleep)
  ReleaseBatch,   // the host drops the batch (its staging buffer) now, not at the next one
};
std::string_view to_string(StepOp op);

enum class RunPhase { Train, Eval };
std::string_view to_string(RunPhase p);

// The program of a phase's step for this spec (the Job walks it).
std::vector<StepOp> step_program(const JobSpec& spec, RunPhase phase);

// ---- what a run records -----------------------------------------------------

// [start, end) of one kernel on a GPU's compute engine.
struct KernelSpan {
  Time start = 0, end = 0;
};

// One step on one rank. Times are on the run's clock.
struct StepRecord {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  std::uint64_t epoch = 0;     // 0-based
  std::size_t index = 0;       // position in the epoch
  std::int64_t iteration = 0;  // per rank, over the run (train steps)
  std::int64_t samples = 0;
  std::uint64_t bytes = 0;
  std::vector<std::size_t> sample_indices;
  Time next_called = 0;     // host asked the source
  Time delivered = 0;       // next() returned
  Time ready = 0;           // the source had finished the batch
  Time gpu_idle_since = 0;  // end of the GPU's previous work on the training stream
  Time h2d_start = 0, h2d_end = 0;
  Time forward_end = 0, backward_end = 0;
  Time all_reduce_end = 0;        // gpus > 1: the iteration's all-reduces ended on this GPU
  Time step_end = 0;              // end of the step's last op on the training stream
  Time host_done = 0;             // the host finished the step's program
  Duration compute = 0;           // kernel time issued (emulated)
  Duration read = 0, decode = 0;  // the source's work on the batch
  // Derived at the end of the run (data_stall(): see the top of the file).
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0;
  Duration h2d = 0;
  Duration all_reduce_wait = 0;
};

// A rank's train steps, totalled as they settle: what summarize() and a
// session read, so a record that keeps no steps has the same figures.
struct StepTotals {
  std::int64_t steps = 0, samples = 0;
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0, h2d = 0, all_reduce_wait = 0;
  Time end = 0;  // the latest step_end or all_reduce_end
  void add(const StepRecord& s);
};

struct EpochMark {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  std::uint64_t epoch = 0;  // 0-based
  Time start = 0;           // before the source's begin_epoch
  Time host_end = 0;        // the host left the phase
  Time end = 0;             // the last completion of the phase's work on this GPU
  std::int64_t samples = 0;
};

struct CheckpointRecord {
  int gpu = 0;
  int epoch = 0;
  std::uint64_t step = 0;
  Time start = 0, end = 0;
  CheckpointIo io;
};

struct RankRecord {
  int gpu = 0;
  std::int64_t iterations = 0;
  Duration compute_busy = 0;
  std::vector<KernelSpan> compute_intervals;  // every kernel, issue order (RecordSpec::kernels)
  Time last_kernel_end = 0;
  StepTotals train;  // its train steps
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  Duration forward_total = 0, backward_total = 0;
  std::string source;  // the source's describe()
};

struct RunRecord {
  std::string model;  // canonical name ("" for fixed step times without a model)
  std::string gpu;    // catalog id
  int gpus = 1;
  int nodes = 1;        // the GPUs' nodes (1 when the ranks share no links)
  std::string network;  // nodes > 1: the network's name ("" otherwise)
  int batch_size = 0;
  std::string clock;
  StepTime step_time = StepTime::CostModel;
  Time start = 0;
  Time host_end = 0;              // the last host thread finished
  std::vector<StepRecord> steps;  // ordered by (gpu, phase order as run); RecordSpec::steps
  std::vector<EpochMark> epochs;  // per rank and phase, in order
  std::vector<CheckpointRecord> checkpoints;
  std::vector<RankRecord> ranks;
  StepCost cost;               // at the full batch size (cost-model step time)
  std::string memory_plan;     // "model zoo" (traced lifetimes) or "even split (model not in the zoo)"
  std::string backward_split;  // gpus > 1
  int buckets = 0;
  std::uint64_t all_reduce_bytes = 0;  // per iteration
  std::uint64_t all_reduces = 0;
  std::vector<pipeline::LoaderStats> loader_stats;       // per rank, train source
  std::vector<pipeline::LoaderStats> eval_loader_stats;  // per rank, eval source (when evaluated)
  // The error that stopped the run early (ScheduleSpec::keep_partial); epoch
  // marks exist only for the phases that finished. Null when the run finished.
  std::exception_ptr stopped;
  bool interrupted = false;  // a single-GPU run stopped by SIGINT/SIGTERM
};

// Stall of one step (see the top of the file) and its split by the batch's
// read : decode time.
void derive_stalls(StepRecord& s);

// ---- what people read -------------------------------------------------------

struct GpuSummary {
  int gpu = 0;
  std::int64_t iterations = 0;
  std::int64_t samples = 0;
  Time end = 0;
  Duration compute_busy = 0;
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0;
  Duration h2d = 0;
  Duration all_reduce_wait = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::vector<KernelSpan> compute_intervals;
};

struct EpochSummary {
  std::uint64_t epoch = 0;
  Time start = 0, end = 0;  // earliest start and latest end over the GPUs
  std::int64_t samples = 0;
};

// The figures of a training run (train phase): pure function of the record.
struct RunSummary {
  std::string model, gpu, clock;
  int gpus = 1;
  int batch_size = 0;
  Time start = 0;
  Duration elapsed = 0;         // start to the last completion on any GPU
  std::int64_t iterations = 0;  // per GPU (the most any GPU ran)
  std::int64_t samples = 0;     // over all GPUs
  double samples_per_s = 0, iterations_per_s = 0;
  // Shares of `elapsed`, averaged over the GPUs, in percent.
  double gpu_util_pct = 0, data_stall_pct = 0, fetch_stall_pct = 0, prep_stall_pct = 0, h2d_pct = 0;
  double all_reduce_pct = 0;
  std::uint64_t all_reduces = 0;
  int buckets = 0;
  std::uint64_t all_reduce_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  Duration forward_total = 0, backward_total = 0;
  std::vector<EpochSummary> epochs;
  std::vector<GpuSummary> per_gpu;
  StepCost cost;
  std::string backward_split, source, memory_plan;
  double mean_epoch_s() const;
};
RunSummary summarize(const RunRecord& record);

// ---- one step, predicted ----------------------------------------------------

struct StepPrediction {
  Duration transfer = 0, forward = 0, backward = 0;
  Duration iteration = 0;  // transfer + forward + backward
  StepCost cost;           // the cost model's figures behind them
};
// `gpemu predict`'s times: the job itself runs two steps of `spec` on one GPU
// (in-memory batches from `host` memory, no variation, the host not waiting)
// under a virtual clock, and the second step's phases are read from its
// record, so a prediction is what a training run would show. Memory is not
// replayed here (predict replays the same zoo plan until the allocator
// settles: zoo_memory.h).
StepPrediction predict_step(const CostModel& costs, JobSpec spec, HostMemoryKind host);

// ---- `gpemu predict`: a model's step on a card, time and memory --------------
//
// What `gpemu predict` prints and the Python module's gpemu.predict returns,
// computed once here for every front end: the times from predict_step with
// the layered cost model of the request's program variant, the memory from
// the zoo's traced lifetimes replayed until the allocator settles (or the
// cost model's figures for models outside the zoo), a measured profile's OOM
// evidence winning over the replay, and the expected error of the calibration.

// The options of the analytical model and of the zoo's memory replay for a model spec.
AnalyticalOptions analytical_options(const ModelSpec& m);
zoo::ReplayOptions replay_options(const ModelSpec& m);
// The layered cost model a job of this model runs on (make_layered_cost_model):
// measured profiles from `profiles` where they apply, then the analytical
// model; `notes` hears why profiles were set aside when they were.
std::unique_ptr<CostModel> job_cost_model(const ModelSpec& m,
                                          const std::optional<std::filesystem::path>& profiles = std::nullopt,
                                          std::vector<std::string>* notes = nullptr);

struct PredictRequest {
  const GpuSpec* gpu = nullptr;  // required
  ModelSpec model;
  // nullopt: only the largest batch that fits (max_batch must be set).
  std::optional<int> batch_size;
  bool max_batch = false;  // also find the largest batch that fits (zoo models)
  HostMemoryKind host = HostMemoryKind::Pinned;
  // Measured profiles (GPEmu or gpemu layout); nullopt: the analytical model alone.
  std::optional<std::filesystem::path> profiles;
};

struct Prediction {
  std::string gpu, model;  // catalog id, canonical model name
  int batch_size = 0;      // 0: a largest-batch-only request
  HostMemoryKind host = HostMemoryKind::Pinned;
  zoo::Precision precision = zoo::Precision::FP32;
  zoo::Optimizer optimizer = zoo::Optimizer::SGD;
  bool keep_grads = true;
  bool keep_output = true;      // ModelSpec::keep_output
  std::string program_variant;  // describe(variant)
  std::string host_profile;     // the host profile's name ("" : the GPU family's calibrated launch times)
  std::string step_sync;        // "phases" or "pipelined"
  // The analytical model's host and GPU side of one step (zoo models whose
  // times the analytical model gives): which bounds each phase.
  std::optional<StepBreakdown> breakdown;
  std::optional<std::int64_t> seq_len;  // sequence models: the resolved length
  Duration transfer = 0, forward = 0, backward = 0, iteration = 0;
  bool transfer_measured = false;  // from a profile, not the PCIe model
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0, capacity_bytes = 0;
  bool fits = true;
  std::string oom_reason;     // when it does not fit (or max_batch is 0)
  std::string memory_source;  // "model zoo replay" or "cost model"
  Provenance forward_provenance = Provenance::Estimated, backward_provenance = Provenance::Estimated,
             memory_provenance = Provenance::Estimated;
  std::string note, cost_model;  // where the times come from; the cost model's describe()
  std::optional<int> oom_evidence_batch;
  std::optional<std::int64_t> max_batch;
  std::optional<ExpectedError> expected_error;  // zero for a replayed measurement
  std::vector<std::string> notes;               // warnings for the user (profiles set aside)
  double samples_per_s() const { return iteration > 0 ? batch_size / to_seconds(iteration) : 0; }
};

// InputError naming what was wrong: an unknown model, a sequence length for
// a model without one, BF16 on a card without it, no batch size and no
// max_batch, max_batch for a model outside the zoo.
Prediction predict(const PredictRequest& request);

// ---- the job ----------------------------------------------------------------

// Progress: called from the ranks' host threads after each step.
struct StepEvent {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  int epoch = 0;                     // 1-based
  std::uint64_t step = 0;            // 1-based within the epoch
  std::uint64_t steps = 0;           // the epoch's steps (0: unknown)
  std::int64_t done = 0, total = 0;  // train steps of this rank so far / planned
  const StepRecord* record = nullptr;
};
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void on_step(const StepEvent&) {}
  virtual void on_checkpoint(const CheckpointRecord&) {}
};

class Job {
 public:
  // Builds the devices (one Device for one GPU, a Node for several, a
  // Cluster of Nodes joined by the network for several nodes) on a timeline
  // of `clock`. InputError for an invalid spec or unknown model.
  Job(Clock& clock, const CostModel& costs, JobSpec spec);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  Clock& clock() const { return clock_; }
  Timeline& timeline() { return *timeline_; }
  const JobSpec& spec() const { return spec_; }
  int gpus() const { return spec_.cluster.gpus; }
  Device& device(int gpu);
  Node* node() { return node_.get(); }           // one node of several GPUs
  Cluster* cluster() { return cluster_.get(); }  // several nodes
  const StepCost& cost() const { return cost_; }
  std::vector<TraceDeviceName> trace_devices() const;
  // Train steps each rank will run (0 when the source cannot tell before running).
  std::int64_t planned_iterations() const;

  // Runs the schedule. Throws what a host thread threw first
  // (OutOfMemoryError, a loader's InputError, ...). Call once.
  RunRecord run(JobObserver* observer = nullptr);

  // run() in two halves, for a caller that runs the host threads itself
  // (gpemu share runs several jobs' threads under one clock): the bodies of
  // the ranks' host threads, to be run concurrently under clock(); they do
  // not throw, a failure is kept. Then, once every body has returned and
  // the job's work has completed, its record, with RunRecord::stopped set
  // when a body failed. Call each once, in this order, instead of run().
  std::vector<std::function<void()>> host_threads(JobObserver* observer = nullptr);
  RunRecord record();

 private:
  struct Rank;
  void run_rank(Rank& r, JobObserver* observer);
  void run_phase(Rank& r, RunPhase phase, int epoch, pipeline::BatchSource& source, JobObserver* observer, bool& stop);
  void gpu_preprocess(Rank& r, const pipeline::LoadedBatch& b);
  void checkpoint(Rank& r, int epoch, std::uint64_t step, JobObserver* observer);
  void settle_records(Rank& r);
  void keep_step(Rank& r, StepRecord&& s);
  void keep_kernel(Rank& r, KernelSpan k, Duration busy);
  void allocate_persistent(Rank& r);
  friend class StepBoundary;

  Clock& clock_;
  const CostModel& costs_;
  JobSpec spec_;
  StepCost cost_;
  std::unique_ptr<Timeline> own_timeline_;  // null on a shared GPU, whose timeline it is
  Timeline* timeline_ = nullptr;
  std::vector<std::unique_ptr<Device>> devices_;  // without a node
  std::unique_ptr<Node> node_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<AllReduceGroup> comm_;
  std::unique_ptr<class HostSync> sync_;
  std::unique_ptr<class DdpReducer> reducer_;
  struct Plan;
  std::unique_ptr<Plan> plan_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::int64_t planned_ = 0;
  std::atomic<bool> interrupted_{false};
  Time start_ = 0;
  std::mutex error_mu_;
  std::exception_ptr first_error_;
};

}  // namespace gpemu
