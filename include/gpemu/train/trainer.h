// The training driver: a real (or modelled) data pipeline feeding one or more
// emulated GPUs, with data stalls measured on the emulation clock.
//
// Each GPU has its own batch source (its loader shard) and its own host
// thread; they run under Clock::run_concurrently, so virtual-clock runs are
// deterministic. Per batch, the host thread of a GPU does what
//
//   for x, y in loader:                      # waits for the batch: the data stall
//       x = x.cuda(non_blocking=True)        # H2D from the staging buffer (pinned or not)
//       loss = model(x); loss.backward()     # DDP: gradient all-reduce per bucket, overlapping backward
//       opt.step()                           # waits (on the GPU) for the all-reduce
//       loss.item()                          # the host waits for the GPU (SyncMode::EveryIteration)
//
// issues, with the iteration of TrainingJob (workload.h): the same memory plan
// through the device's caching allocator (OutOfMemoryError at the same step),
// the same per-iteration variation (a single GPU's timeline equals
// TrainingJob's for the same seed and full batches), but the H2D copy moves
// the batch's real bytes, a shorter last batch costs its own batch size, and
// with several GPUs backward is issued in chunks (train/ddp.h) with a
// DDP all-reduce and a separate optimizer step.
//
// Several GPUs (gpus > 1) form an interconnect Node (topology.h): their H2D
// copies share the PCIe switch uplinks as the topology says, and the gradient
// all-reduce runs over the node's ring.
//
// Data stall of batch i on a GPU: the time its GPU was idle because the batch
// was not ready, i.e. the overlap of
//   [host called next(), next() returned)   (the host waited for the loader)
// with
//   [end of the GPU's previous work on the training stream, H2D start of batch i)
// (the GPU had nothing to do). Host time spent elsewhere (issuing, a late
// call to next()) is not a data stall. docs/train.md has the details.
//
// Thread safety: a Trainer is used by one thread; run() starts the host threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/interconnect/cluster.h"
#include "gpemu/interconnect/gradient_buckets.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/report.h"
#include "gpemu/timeline.h"
#include "gpemu/trace.h"
#include "gpemu/train/batch_source.h"
#include "gpemu/train/ddp.h"
#include "gpemu/workload.h"

namespace gpemu::train {

struct TrainOptions {
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int gpus = 1;
  int epochs = 1;
  // Stop each GPU after this many iterations (over all epochs); -1: run the epochs.
  std::int64_t max_iterations = -1;
  SyncMode sync = SyncMode::EveryIteration;
  VariationOptions variation;  // cv replaced by the profile's measured cv, as TrainingJob
  // Several GPUs: the node (gpus is set from the field above) and DDP buckets.
  NodeOptions node;
  // Nodes the GPUs are spread over (gpus must divide evenly, at most
  // kMaxGpusPerNode each) and the network joining them (interconnect/cluster.h).
  int nodes = 1;
  NetworkSpec network = network_preset("100gbe");
  BucketOptions buckets;
  int backward_even_chunks = 16;  // without a zoo graph (train/ddp.h)
  int backward_max_chunks = 64;
};

// One batch on one GPU. Times are on the emulation clock.
struct BatchRecord {
  int gpu = 0;
  std::uint64_t epoch = 0;
  std::size_t index = 0;
  std::int64_t iteration = 0;   // per GPU, over the run
  std::int64_t samples = 0;
  std::uint64_t bytes = 0;
  std::vector<std::size_t> sample_indices;
  Time next_called = 0;         // host asked the loader
  Time delivered = 0;           // next() returned
  Time ready = 0;               // loader had finished the batch
  Time gpu_idle_since = 0;      // end of the GPU's previous work on the training stream
  Time h2d_start = 0, h2d_end = 0;
  Time forward_end = 0, backward_end = 0;
  Time all_reduce_end = 0;      // gpus > 1: when the iteration's all-reduces ended on this GPU
  Time step_end = 0;            // end of the iteration's last op on the training stream
  Duration data_stall = 0;      // see the top of the file
  Duration fetch_stall = 0, prep_stall = 0;  // the stall split by the batch's read : decode time
  Duration h2d = 0;             // h2d_end - h2d_start
  Duration all_reduce_wait = 0; // training stream idle waiting for the all-reduce after backward
};

struct GpuResult {
  int gpu = 0;
  std::int64_t iterations = 0;
  std::int64_t samples = 0;
  Time end = 0;                 // last completion on this GPU
  Duration compute_busy = 0;    // kernels on the compute engine
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0;
  Duration h2d = 0;
  Duration all_reduce_wait = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::vector<BusyInterval> compute_intervals;  // [start, end) of every kernel, in issue order
};

struct EpochResult {
  std::uint64_t epoch = 0;
  Time start = 0, end = 0;      // earliest start and latest end over the GPUs
  std::int64_t samples = 0;     // over all GPUs
};

struct TrainResult {
  std::string model;
  std::string gpu;              // catalog id
  int gpus = 1;
  int batch_size = 0;
  std::string clock;
  Time start = 0;               // when the run began
  Duration elapsed = 0;         // start to the last completion on any GPU
  std::int64_t iterations = 0;  // per GPU (the most any GPU ran)
  std::int64_t samples = 0;     // over all GPUs
  double samples_per_s = 0;
  double iterations_per_s = 0;
  // Shares of `elapsed`, averaged over the GPUs, in percent.
  double gpu_util_pct = 0;
  double data_stall_pct = 0;
  double fetch_stall_pct = 0, prep_stall_pct = 0;
  double h2d_pct = 0;
  double all_reduce_pct = 0;    // exposed all-reduce (gpus > 1)
  std::uint64_t all_reduces = 0;
  int buckets = 0;              // DDP buckets per iteration (gpus > 1)
  std::uint64_t all_reduce_bytes = 0;  // gradient bytes all-reduced per iteration
  std::uint64_t peak_allocated_bytes = 0;  // the largest over the GPUs
  std::uint64_t peak_reserved_bytes = 0;
  Duration forward_total = 0, backward_total = 0;  // summed over GPUs and iterations
  std::vector<EpochResult> epochs;
  std::vector<GpuResult> per_gpu;
  std::vector<BatchRecord> batches;  // every GPU's, ordered by (gpu, iteration)
  StepCost cost;                     // at the full batch size
  std::string backward_split;        // BackwardPlan::source (gpus > 1)
  std::string source;                // the rank-0 batch source's describe()
  double mean_epoch_s() const;
};

class Trainer {
 public:
  // Builds the devices (one Device for one GPU, a Node for several) on a
  // timeline of `clock`. InputError for impossible options or an unknown model.
  Trainer(Clock& clock, const GpuSpec& spec, const CostModel& costs, TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Clock& clock() const { return clock_; }
  Timeline& timeline() { return *timeline_; }
  const TrainOptions& options() const { return options_; }
  int gpus() const { return options_.gpus; }
  Device& device(int gpu);
  Node* node() { return cluster_ ? &cluster_->node(0) : nullptr; }  // the first node
  Cluster* cluster() { return cluster_.get(); }
  const StepCost& cost() const { return cost_; }
  // Names for write_chrome_trace.
  std::vector<TraceDeviceName> trace_devices() const;

  // Iterations each GPU will run with these sources.
  std::int64_t planned_iterations(const std::vector<std::unique_ptr<BatchSource>>& sources) const;

  // Runs the epochs, one host thread per GPU, sources[g] feeding GPU g.
  // progress(done, total) is called from GPU 0's host thread after each of
  // its iterations. Throws what a host thread threw first (OutOfMemoryError,
  // a loader's InputError, ...). Call once.
  TrainResult run(std::vector<std::unique_ptr<BatchSource>> sources,
                  const std::function<void(std::int64_t done, std::int64_t total)>& progress = {});

 private:
  struct Rank;
  void run_rank(Rank& r, BatchSource& source, std::int64_t total,
                const std::function<void(std::int64_t, std::int64_t)>& progress);

  Clock& clock_;
  const GpuSpec& spec_;
  const CostModel& costs_;
  TrainOptions options_;
  StepCost cost_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Device> single_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ClusterCommunicator> comm_;
  std::unique_ptr<HostSync> sync_;
  std::unique_ptr<DdpReducer> reducer_;
  BackwardPlan backward_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace gpemu::train
