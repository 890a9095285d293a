#include "gpemu/job.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "clock/host_sync.h"
#include "common/host_memory.h"
#include "common/interrupt.h"
#include "cost/plan_executor.h"
#include "gpemu/cost_model.h"
#include "gpemu/device/shared_gpu.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "interconnect/ddp_reducer.h"
#include "workload/backward_plan.h"
#include "workload/memory_plan.h"
#include "workload/node_loaders.h"
#include "workload/roofline.h"

namespace gpemu {
namespace {

VariationOptions with_cv(VariationOptions v, std::optional<double> measured) {
  if (measured) v.cv = *measured;
  return v;
}

// Noise streams: rank g draws forward from 1 + 2g and backward from 2 + 2g.
std::uint64_t forward_stream(int gpu) { return 1 + 2 * static_cast<std::uint64_t>(gpu); }
std::uint64_t backward_stream(int gpu) { return 2 + 2 * static_cast<std::uint64_t>(gpu); }

// The allocations of one step at one batch size: the zoo's traced lifetimes,
// or (model not in the zoo) the cost model's figures split evenly.
struct StepMemory {
  bool zoo = false;
  zoo::ZooMemoryPlan plan;  // zoo
  MemoryPlan even;          // otherwise
};

}  // namespace

std::string_view to_string(StepOp op) {
  switch (op) {
    case StepOp::CopyBatch: return "copy batch";
    case StepOp::Forward: return "forward";
    case StepOp::Backward: return "backward";
    case StepOp::AllReduceWait: return "all-reduce wait";
    case StepOp::OptimizerStep: return "optimizer step";
    case StepOp::LossItem: return "loss.item()";
    case StepOp::Compute: return "compute";
    case StepOp::Synchronize: return "synchronize";
    case StepOp::ReleaseBatch: return "release batch";
  }
  return "?";
}

std::string_view to_string(RunPhase p) { return p == RunPhase::Train ? "train" : "eval"; }

double kept_record_bytes(const JobSpec& s, std::int64_t planned_steps) {
  const double gpus = std::max(1, s.cluster.gpus);
  const double phases =
      s.schedule.train ? static_cast<double>(s.schedule.epochs) * (s.schedule.eval.steps > 0 ? 2 : 1) : 0;
  const double epochs = s.record.epochs ? gpus * phases : 0;
  const double all_steps = gpus * static_cast<double>(std::max<std::int64_t>(0, planned_steps));
  return epochs * kRecordBytesPerEpoch + (s.record.steps ? all_steps * kRecordBytesPerStep : 0) +
         (s.trace ? all_steps * kTraceBytesPerStep : 0);
}

void validate(const JobSpec& s) {
  if (s.cluster.gpu == nullptr) throw InputError("job: cluster.gpu is missing; give a GPU from the catalog");
  if (s.batch_size < 1)
    throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", s.batch_size));
  if (s.cluster.gpus < 1)
    throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", s.cluster.gpus));
  if (s.schedule.epochs < (s.schedule.train ? 1 : 0))
    throw InputError(fmt::format("--epochs {} is impossible: it must be at least 1", s.schedule.epochs));
  if (s.schedule.max_iterations < -1)
    throw InputError(fmt::format("iterations {} is impossible: it must be 0 or more", s.schedule.max_iterations));
  if (s.data.source == DataSource::Synthetic && !s.data.synthetic_over_dataset && s.data.synthetic_batches < 0)
    throw InputError(fmt::format("iterations {} is impossible: it must be 0 or more", s.data.synthetic_batches));
  if (s.data.source == DataSource::Custom && !s.data.custom)
    throw InputError("job: data.source is Custom but data.custom is not set");
  if (s.compute.step_time == StepTime::CostModel && s.compute.model.name.empty())
    throw InputError("job: compute.model.name is empty; give a model (see 'gpemu models')");
  if (s.compute.model.seq_len < 0)
    throw InputError(fmt::format("sequence length {} is impossible: it must be at least 1", s.compute.model.seq_len));
  if (s.cluster.nodes < 1)
    throw InputError(fmt::format("--nodes {} is impossible: it must be at least 1", s.cluster.nodes));
  if (uses_links(s) && (s.cluster.gpus > 1 || s.cluster.nodes > 1)) {
    // Even split, at most kMaxGpusPerNode a node: refused with what to give.
    plan_cluster(s.cluster.gpus, s.cluster.nodes, s.cluster.node, s.cluster.network);
    if (s.cluster.nodes > 1 && !(s.cluster.network.line_rate_gbps > 0))
      throw InputError(
          fmt::format("job: cluster.network is not set for {} nodes; give --network 10gbe|25gbe|100gbe|400gbe|FILE",
                      s.cluster.nodes));
  }
  if (s.cluster.buckets.bucket_cap_bytes == 0) throw InputError("--bucket-cap-mb must be positive");
  if (s.cluster.device.share.gpu && (s.cluster.gpus != 1 || s.cluster.nodes != 1))
    throw InputError(fmt::format("job: a job on a shared GPU runs on one GPU, not {} on {} node(s)", s.cluster.gpus,
                                 s.cluster.nodes));
  if (const NodeGpus& on = s.cluster.on_node; on.timeline) {
    if (static_cast<std::size_t>(s.cluster.gpus) != on.gpus.size() ||
        (s.cluster.nodes != 1 && (on.node || (!on.shares.empty() && uses_links(s)))))
      throw InputError(fmt::format("job: cluster.on_node gives {} GPU(s){} for cluster.gpus {} on {} node(s)",
                                   on.gpus.size(), on.node || !on.shares.empty() ? " of one node" : "", s.cluster.gpus,
                                   s.cluster.nodes));
    if (!on.shares.empty() && on.shares.size() != on.gpus.size())
      throw InputError(fmt::format("job: cluster.on_node.shares has {} entries for {} GPUs: give one per GPU, or none",
                                   on.shares.size(), on.gpus.size()));
    if (s.cluster.device.share.gpu)
      throw InputError(
          "job: cluster.device.share and cluster.on_node both set: give the shared GPUs in on_node.shares");
    if (s.cluster.gpus > 1 && s.cluster.nodes == 1 && uses_links(s) && !on.node)
      throw InputError(fmt::format(
          "job: cluster.on_node.node is not set: {} GPUs that copy batches or all-reduce need their node's links",
          s.cluster.gpus));
  } else if (s.cluster.on_node.node) {
    throw InputError("job: cluster.on_node.node is set without on_node.timeline, the GPUs' timeline");
  }
  if (const ClusterGpus& c = s.cluster.on_cluster; c.network) {
    bool ok = s.cluster.on_node.timeline && static_cast<int>(c.nodes.size()) == s.cluster.nodes &&
              c.network_nodes.size() == c.nodes.size();
    for (const NodeGpus& n : c.nodes)
      ok = ok && n.timeline == s.cluster.on_node.timeline &&
           static_cast<int>(n.gpus.size()) * s.cluster.nodes == s.cluster.gpus;
    if (!ok)
      throw InputError(fmt::format(
          "job: cluster.on_cluster gives {} node(s) for cluster.gpus {} on {} node(s): give one entry per node, each "
          "with gpus / nodes GPUs on cluster.on_node.timeline",
          c.nodes.size(), s.cluster.gpus, s.cluster.nodes));
  }
  if (s.compute.time_divisor < 1 || s.compute.time_divisor > 1'000'000)
    throw InputError(fmt::format("--gpemu-gpus {} is impossible: accepted 1 to 1000000", s.compute.time_divisor));
  if (s.compute.time_divisor > 1 && s.cluster.gpus > s.cluster.nodes)
    throw InputError(fmt::format(
        "--gpemu-gpus {} is GPEmu's one process standing for {} GPUs (one per node); it excludes --gpus {} on {} "
        "node(s): give one GPU per node (or drop --gpemu-gpus for {} data-parallel ranks with all-reduce)",
        s.compute.time_divisor, s.compute.time_divisor, s.cluster.gpus, s.cluster.nodes, s.cluster.gpus));
  validate_node_data(s);
  if (s.cluster.real_nodes < 1 || s.cluster.real_node < 0 || s.cluster.real_node >= s.cluster.real_nodes ||
      (s.cluster.real_nodes > 1 && s.cluster.nodes != 1))
    throw InputError(
        fmt::format("job: cluster.real_node {} of real_nodes {} with nodes {}: a node of several "
                    "processes is one node of 0 to real_nodes - 1, and emulates only its own",
                    s.cluster.real_node, s.cluster.real_nodes, s.cluster.nodes));
  if (!s.schedule.checkpoints.empty() && !s.schedule.checkpoint)
    throw InputError("job: schedule.checkpoints are given but schedule.checkpoint (the I/O) is not set");
  if (s.schedule.eval.first_epoch > 0 && s.schedule.eval.every < 1)
    throw InputError(
        fmt::format("job: schedule.eval.every {} is impossible: it must be at least 1", s.schedule.eval.every));
}

KernelDemand roofline_demand(const GpuSpec& gpu, Precision precision, double flops, double bytes) {
  const double peak = gpu.peak_tflops(precision).value_or(gpu.fp32_tflops) * 1e12;
  const double bandwidth = gpu.memory_bandwidth_gbs * 1e9;
  if (!(peak > 0) || !(bandwidth > 0) || !(flops >= 0) || !(bytes >= 0) || flops + bytes <= 0) return {};
  const double compute = flops / peak, memory = bytes / bandwidth, busiest = std::max(compute, memory);
  return {static_cast<float>(compute / busiest), static_cast<float>(memory / busiest)};
}

bool uses_links(const JobSpec& spec) {
  return spec.compute.copy_batch || (spec.compute.all_reduce && spec.compute.step_time == StepTime::CostModel);
}

std::vector<StepOp> step_program(const JobSpec& spec, RunPhase phase) {
  const ComputeSpec& c = spec.compute;
  std::vector<StepOp> p;
  if (c.step_time == StepTime::Fixed) {
    p = {StepOp::Compute, StepOp::Synchronize, StepOp::ReleaseBatch};
    return p;
  }
  if (c.copy_batch || c.use_allocator) p.push_back(StepOp::CopyBatch);
  p.push_back(StepOp::Forward);
  if (phase == RunPhase::Train) {
    p.push_back(StepOp::Backward);
    if (spec.cluster.gpus > 1 && c.all_reduce) p.push_back(StepOp::AllReduceWait);
    p.push_back(StepOp::OptimizerStep);
  }
  if (c.sync == SyncMode::EveryIteration) p.push_back(c.copy_batch ? StepOp::LossItem : StepOp::Synchronize);
  return p;
}

void derive_stalls(StepRecord& b) {
  b.h2d_start = std::max(b.h2d_start, b.gpu_idle_since);
  b.h2d = std::max<Duration>(0, b.h2d_end - b.h2d_start);
  b.all_reduce_wait = b.all_reduce_end > 0 ? std::max<Duration>(0, b.all_reduce_end - b.backward_end) : 0;
  const Time stall_from = std::max(b.next_called, b.gpu_idle_since);
  const Time stall_to = std::min(b.delivered, b.h2d_start);
  b.data_stall = std::max<Duration>(0, stall_to - stall_from);
  const Duration work = b.read + b.decode;
  b.fetch_stall = work > 0
                      ? static_cast<Duration>(std::llround(static_cast<double>(b.data_stall) *
                                                           static_cast<double>(b.read) / static_cast<double>(work)))
                      : b.data_stall;
  b.prep_stall = b.data_stall - b.fetch_stall;
}

// ---- the job ------------------------------------------------------------------

struct Job::Plan {
  BackwardPlan backward;
  // What the forward and the backward (with the optimizer step) keep busy:
  // read by a shared GPU's policy (KernelDemand).
  KernelDemand forward_demand, backward_demand;
  // The step program's first and last operation that launches a kernel: a
  // Fifo-shared GPU is held from the one to the other.
  std::size_t first_kernel_op[2] = {0, 0}, last_kernel_op[2] = {0, 0};  // by RunPhase
  std::vector<std::size_t> backward_ends;  // bucket_chunk_ends of backward for the reducer's buckets
  std::vector<StepOp> train, eval;
  const zoo::ModelGraph* graph = nullptr;
  zoo::ReplayOptions replay;
  // A batch size's cost and memory plan, made once for all ranks (a pure
  // function of the size: a thousand ranks need not replay the zoo a
  // thousand times). Entries are never erased, so pointers stay valid.
  std::mutex per_batch_mu;
  std::map<std::int64_t, std::pair<StepCost, StepMemory>> per_batch;

  const std::pair<StepCost, StepMemory>& batch(int n, const CostModel& costs, const JobSpec& spec,
                                               const StepCost& full) {
    std::lock_guard lock(per_batch_mu);
    auto found = per_batch.find(n);
    if (found != per_batch.end()) return found->second;
    StepCost c = n == spec.batch_size ? full : costs.step_cost(*spec.cluster.gpu, spec.compute.model.name, n);
    if (const Duration d = spec.compute.time_divisor; d > 1) {
      // GPEmu's "N GPUs": each batch's time divided by N (ComputeSpec::time_divisor).
      c.forward /= d;
      c.backward /= d;
      if (c.transfer_pinned) *c.transfer_pinned /= d;
      if (c.transfer_pageable) *c.transfer_pageable /= d;
    }
    StepMemory m;
    if (graph) {
      m.zoo = true;
      m.plan = zoo::zoo_memory_plan(*graph, zoo::Shape{n, spec.compute.model.seq_len}, replay);
    } else {
      m.even = make_memory_plan(c, n);
    }
    return per_batch.emplace(n, std::make_pair(std::move(c), std::move(m))).first->second;
  }
};

namespace {

// A run whose records cannot fit in what this process may allocate is
// refused before it starts (QA H3), not ended by std::bad_alloc hours in.
void check_records_fit(const JobSpec& s, std::int64_t planned_steps) {
  const double need = kept_record_bytes(s, planned_steps);
  if (need < 64.0 * (1 << 20)) return;  // not worth a look
  const double have = allocatable_bytes();
  if (have <= 0 || need <= have) return;
  throw InputError(fmt::format(
      "--epochs {} ({} steps a GPU) on {} GPU(s) is not valid here: the run keeps {}, {:.2f} GB in all, more than "
      "this process can allocate now ({:.2f} GB: the machine's available memory or ulimit -v); accepted: fewer "
      "epochs, steps or GPUs{}",
      s.schedule.epochs, planned_steps, s.cluster.gpus,
      s.trace ? fmt::format("each step's operations for the trace (about {:.0f} bytes) and record (about {:.0f} "
                            "bytes) and each epoch's mark (about {:.0f} bytes)",
                            kTraceBytesPerStep, kRecordBytesPerStep, kRecordBytesPerEpoch)
      : s.record.steps ? fmt::format("each step's record (about {:.0f} bytes: a trace or report draws them) and each "
                                     "epoch's mark (about {:.0f} bytes)",
                                     kRecordBytesPerStep, kRecordBytesPerEpoch)
                       : fmt::format("each epoch's mark (about {:.0f} bytes a GPU)", kRecordBytesPerEpoch),
      need / 1e9, have / 1e9, s.record.steps || s.trace ? ", or no --trace or --report" : ""));
}

// The most steps a rank's host runs ahead of its GPU (see run_phase).
constexpr std::size_t kMaxStepsAhead = 1024;

struct Pending {
  StepRecord rec;
  Time issue = 0;
  Completion prev_tail, h2d, forward, backward, all_reduce, step;
  bool has_h2d = false, has_all_reduce = false;
};

// A resolved completion keeps only its time, so it stops holding its
// operation's record (the Timeline frees it); the end time read later is the
// same. Returns whether `c` is resolved.
bool settle(Completion& c) {
  if (!c.resolved()) return false;
  c = Completion::at(c.known_end());
  return true;
}

bool settle(Pending& p) {
  bool all = true;
  for (Completion* c : {&p.prev_tail, &p.h2d, &p.forward, &p.backward, &p.all_reduce, &p.step}) all &= settle(*c);
  return all;
}

// The step's record with its GPU times filled in; `end` reads a completion's
// final end time.
template <class EndTime>
StepRecord finish(Pending& p, EndTime end) {
  StepRecord& b = p.rec;
  b.gpu_idle_since = end(p.prev_tail);
  b.h2d_start = p.issue;
  b.h2d_end = p.has_h2d ? end(p.h2d) : p.issue;
  b.forward_end = end(p.forward);
  b.backward_end = end(p.backward);
  b.step_end = end(p.step);
  if (p.has_all_reduce) b.all_reduce_end = end(p.all_reduce);
  derive_stalls(b);
  if (!p.has_h2d) b.h2d_end = b.h2d_start, b.h2d = 0;
  return std::move(b);
}

}  // namespace

struct Job::Rank {
  int index = 0;
  Device* device = nullptr;
  Node* node = nullptr;          // the rank's node when ranks share links
  int local = 0;                 // its index in that node
  Stream* stream = nullptr;      // the loop's stream (the legacy default stream, as a PyTorch loop)
  Stream* comm = nullptr;        // DDP's communication stream (gpus > 1)
  Stream* prep = nullptr;        // GPU decode's stream (LoadedBatch::gpu_decode), made at its first batch
  std::uint64_t prep_bytes = 0;  // device memory the GPU decode pipeline holds (in `persistent`)
  std::function<void(Time)> sleep;
  Variation forward_noise, backward_noise;
  std::optional<TimeSampler> train_draw, eval_draw;
  std::vector<CachingAllocator::Ptr> persistent;
  std::vector<CachingAllocator::Ptr> slots;                                  // zoo plan: live storages by slot
  std::vector<CachingAllocator::Ptr> live;                                   // even plan: input and activations
  std::map<std::int64_t, const std::pair<StepCost, StepMemory>*> per_batch;  // the plan's entries
  bool steady = false;                                                       // zoo plan: the first iteration has run
  // Zoo plan: the plan entry whose last steady iteration left this rank's
  // allocator and slots exactly as it found them (AllocatorSnapshot), so
  // its next steady iteration would too, with the same addresses and
  // counters; the Job skips replaying it. nullptr: not known.
  const std::pair<StepCost, StepMemory>* memory_fixed_point = nullptr;
  std::unique_ptr<pipeline::BatchSource> train_source, eval_source;
  std::shared_ptr<void> current;  // the batch the loop holds (x), until the next one
  std::int64_t iterations = 0;
  // Steps and kernels whose GPU times are not all known yet (a few, in issue
  // order); once known they move to `steps` and `spans`, records of a few
  // words each, so a run's memory grows by little per step (the pages of a
  // growing record are faulted in between two steps, on the host's
  // critical path) and no record keeps its operations alive.
  std::deque<Pending> pending;
  std::deque<std::pair<Completion, Duration>> kernels;
  std::vector<StepRecord> steps;  // RecordSpec::steps
  std::vector<KernelSpan> spans;  // RecordSpec::kernels
  Duration compute_busy = 0;
  Time last_kernel_end = 0;
  StepTotals train;
  std::vector<EpochMark> phases;     // with RecordSpec::epochs
  std::deque<Completion> in_flight;  // the tails of the last steps issued, at most kMaxStepsAhead
  std::vector<CheckpointRecord> checkpoints;
  Duration forward_total = 0, backward_total = 0;

  Rank(VariationOptions fwd, VariationOptions bwd, int gpu)
      : index(gpu), forward_noise(fwd, forward_stream(gpu)), backward_noise(bwd, backward_stream(gpu)) {}
  ~Rank() { release_all(); }
  void release_all() {
    current.reset();
    if (!device) return;
    CachingAllocator& a = device->allocator();
    for (auto q = live.rbegin(); q != live.rend(); ++q) a.free(*q);
    live.clear();
    for (auto& p : slots)
      if (p) a.free(p);
    slots.clear();
    for (auto q = persistent.rbegin(); q != persistent.rend(); ++q) a.free(*q);
    persistent.clear();
    prep_bytes = 0;
  }
};

Job::Job(Clock& clock, const CostModel& costs, JobSpec spec)
    : clock_(clock), costs_(costs), spec_(std::move(spec)), plan_(std::make_unique<Plan>()) {
  validate(spec_);
  const GpuSpec& gpu = *spec_.cluster.gpu;
  const bool model_time = spec_.compute.step_time == StepTime::CostModel;
  if (model_time) cost_ = costs_.step_cost(gpu, spec_.compute.model.name, spec_.batch_size);
  const NodeGpus& on = spec_.cluster.on_node;
  if (on.timeline || spec_.cluster.device.share.gpu) {
    timeline_ = on.timeline ? on.timeline : &spec_.cluster.device.share.gpu->timeline();
    if (&timeline_->clock() != &clock_) throw std::logic_error("Job: a shared GPU's timeline runs on another clock");
  } else {
    own_timeline_ = std::make_unique<Timeline>(clock_);
    timeline_ = own_timeline_.get();
  }
  if (spec_.trace) timeline_->enable_trace(true);
  const int gpus = spec_.cluster.gpus;
  // Ranks share a node (PCIe switches, NVLink, the ring) only when the step
  // program moves bytes: a DLIO step (compute and synchronize) touches no
  // link, and its ranks get independent devices, any number of them.
  const bool links = uses_links(spec_);
  if (gpus == 1 || !links) {
    for (int g = 0; g < gpus; ++g) {
      DeviceOptions d = spec_.cluster.device;
      d.index = spec_.cluster.node.first_device_index + g;
      if (!on.shares.empty()) d.share = on.shares[static_cast<std::size_t>(g)];
      devices_.push_back(std::make_unique<Device>(*timeline_, gpu, d));
    }
  } else {
    if (on.timeline && spec_.cluster.nodes == 1) {
      if (&on.node->timeline() != timeline_)
        throw std::logic_error("Job: cluster.on_node's node is on another timeline");
      node_ = std::make_unique<Node>(on, spec_.cluster.node.device, spec_.cluster.node.first_device_index);
      comm_ = std::make_unique<Communicator>(*node_);
    } else if (spec_.cluster.nodes == 1) {
      NodeOptions n = spec_.cluster.node;
      n.gpus = gpus;
      node_ = std::make_unique<Node>(*timeline_, gpu, n);
      comm_ = std::make_unique<Communicator>(*node_);
    } else if (spec_.cluster.on_cluster.network) {
      // A session's nodes and network: this job's view of them.
      cluster_ = std::make_unique<Cluster>(spec_.cluster.on_cluster, spec_.cluster.node.device,
                                           spec_.cluster.node.first_device_index);
      comm_ = std::make_unique<ClusterCommunicator>(*cluster_);
    } else {
      // Several nodes joined by the network, hierarchical all-reduce.
      cluster_ =
          std::make_unique<Cluster>(*timeline_, gpu,
                                    plan_cluster(gpus, spec_.cluster.nodes, spec_.cluster.node, spec_.cluster.network));
      comm_ = std::make_unique<ClusterCommunicator>(*cluster_);
    }
    if (model_time && spec_.compute.all_reduce)
      plan_->backward = plan_backward(gpu, spec_.compute.model.name, cost_, spec_.batch_size,
                                      spec_.cluster.backward_even_chunks, spec_.cluster.backward_max_chunks);
  }
  plan_->train = step_program(spec_, RunPhase::Train);
  plan_->eval = step_program(spec_, RunPhase::Eval);
  for (const RunPhase phase : {RunPhase::Train, RunPhase::Eval}) {
    const std::vector<StepOp>& program = phase == RunPhase::Train ? plan_->train : plan_->eval;
    const auto k = static_cast<std::size_t>(phase);
    bool first = true;
    for (std::size_t i = 0; i < program.size(); ++i) {
      const StepOp op = program[i];
      if (op != StepOp::Forward && op != StepOp::Backward && op != StepOp::OptimizerStep && op != StepOp::Compute)
        continue;
      if (first) plan_->first_kernel_op[k] = i;
      plan_->last_kernel_op[k] = i;
      first = false;
    }
  }
  // Only a shared GPU's policy reads what kernels keep busy.
  auto any_shared = [](const NodeGpus& n) {
    return std::any_of(n.shares.begin(), n.shares.end(), [](const ShareContext& c) { return c.gpu; });
  };
  const std::vector<NodeGpus>& views = spec_.cluster.on_cluster.nodes;
  const bool shared =
      spec_.cluster.device.share.gpu || any_shared(on) || std::any_of(views.begin(), views.end(), any_shared);
  if (model_time && shared) {
    if (const zoo::ModelGraph* g = zoo::find_model(spec_.compute.model.name)) {
      const auto totals = g->phase_totals(zoo::Shape{spec_.batch_size, spec_.compute.model.seq_len},
                                          spec_.compute.model.precision, spec_.compute.model.optimizer);
      const zoo::Precision mp = spec_.compute.model.precision;
      const Precision p = mp == zoo::Precision::FP32 ? Precision::FP32
                          : zoo::is_bf16(mp)         ? Precision::BF16
                                                     : Precision::FP16;
      const auto& fwd = totals[static_cast<int>(zoo::Phase::Forward)];
      const auto& bwd = totals[static_cast<int>(zoo::Phase::Backward)];
      const auto& opt = totals[static_cast<int>(zoo::Phase::Optimizer)];
      plan_->forward_demand = roofline_demand(gpu, p, fwd.flops, fwd.bytes_read + fwd.bytes_written);
      plan_->backward_demand = roofline_demand(gpu, p, bwd.flops + opt.flops,
                                               bwd.bytes_read + bwd.bytes_written + opt.bytes_read + opt.bytes_written);
    }
  }
  if (model_time && spec_.compute.use_allocator) {
    plan_->graph = zoo::find_model(spec_.compute.model.name);
    // Measured memory (a profile) keeps precedence over the zoo's trace, as in predict.
    if (cost_.memory_provenance == Provenance::Measured || cost_.memory_provenance == Provenance::Interpolated)
      plan_->graph = nullptr;
    plan_->replay.precision = spec_.compute.model.precision;
    plan_->replay.optimizer = spec_.compute.model.optimizer;
    plan_->replay.keep_grads = spec_.compute.model.keep_grads;
    plan_->replay.keep_output = spec_.compute.model.keep_output;
  }
  const VariationOptions fwd = with_cv(spec_.compute.variation, cost_.forward_cv);
  const VariationOptions bwd = with_cv(spec_.compute.variation, cost_.backward_cv);
  for (int g = 0; g < gpus; ++g) {
    auto r = std::make_unique<Rank>(fwd, bwd, g);
    r->device = &device(g);
    r->stream = &r->device->default_stream();
    if (node_) {
      r->node = node_.get();
      r->local = g;
    } else if (cluster_) {
      r->node = &cluster_->node(cluster_->node_of(g));
      r->local = cluster_->local_of(g);
    }
    if (r->node) r->comm = &r->device->create_stream(/*non_blocking=*/true);
    if (spec_.compute.step_time == StepTime::Fixed) {
      r->train_draw.emplace(spec_.compute.fixed_train, derive_seed(spec_.compute.fixed_seed, g, 1));
      r->eval_draw.emplace(spec_.compute.fixed_eval, derive_seed(spec_.compute.fixed_seed, g, 2));
    }
    ranks_.push_back(std::move(r));
  }
  if (spec_.schedule.train) {
    std::int64_t per_epoch = static_cast<std::int64_t>(spec_.schedule.steps_per_epoch);
    const DataSpec& d = spec_.data;
    if (per_epoch == 0 && d.source == DataSource::Synthetic && !d.synthetic_over_dataset) {
      per_epoch = d.synthetic_batches;
    } else if (per_epoch == 0 && d.source != DataSource::Custom && d.dataset.size() > 0) {
      pipeline::LoaderOptions lo = d.loader;
      lo.rank = 0;
      lo.world_size = spec_.cluster.real_nodes * gpus;
      const pipeline::Sampler sampler(d.dataset.size(), pipeline::sampler_options(lo));
      const auto b = static_cast<std::size_t>(spec_.batch_size);
      const bool drop_last = d.loader.drop_last || d.source == DataSource::Synthetic;
      per_epoch = static_cast<std::int64_t>(drop_last ? sampler.size() / b : (sampler.size() + b - 1) / b);
    }
    const std::int64_t all = per_epoch * spec_.schedule.epochs;
    planned_ = spec_.schedule.max_iterations >= 0 ? std::min(all, spec_.schedule.max_iterations) : all;
  }
  check_records_fit(spec_, planned_);
}

Job::~Job() { ranks_.clear(); }

Device& Job::device(int gpu) {
  if (gpu < 0 || gpu >= spec_.cluster.gpus)
    throw InputError(fmt::format("GPU {}: this run has GPUs 0 to {}", gpu, spec_.cluster.gpus - 1));
  if (node_) return node_->device(gpu);
  if (cluster_) return cluster_->device(gpu);
  return *devices_[static_cast<std::size_t>(gpu)];
}

std::vector<TraceDeviceName> Job::trace_devices() const {
  std::vector<TraceDeviceName> out;
  for (const auto& r : ranks_)
    out.push_back({r->device->index(), trace_gpu_name(r->device->index(), spec_.cluster.gpu->id)});
  return out;
}

std::int64_t Job::planned_iterations() const { return planned_; }

namespace {

// A host copy over a node GPU's switch uplink (a shared GPU's: its PCIe
// link, as Device::copy), as Device::copy issues it, but without blocking:
// the caller waits through its HostSync.
Completion node_copy(Node& node, int gpu, Stream& s, Engine engine, std::uint64_t bytes, HostMemoryKind host,
                     std::string_view name) {
  const PcieModel& p = s.device().pcie();
  OpSpec spec;
  spec.duration = p.latency(host);
  const int sw = node.switch_of(gpu);
  const bool h2d = engine == Engine::CopyH2D;
  if (const SharedGpu* g = s.device().shared())
    spec.link = h2d ? &g->host_link_h2d() : &g->host_link_d2h();
  else
    spec.link = h2d ? &node.switch_uplink_h2d(sw) : &node.switch_uplink_d2h(sw);
  spec.bytes = static_cast<double>(bytes);
  spec.rate_cap = p.gbs(host) * 1e9;
  spec.tag.name = name;
  spec.tag.category = engine == Engine::CopyH2D ? "h2d" : "d2h";
  return s.enqueue(spec, engine);
}

}  // namespace

void Job::checkpoint(Rank& r, int epoch, std::uint64_t step, JobObserver* observer) {
  CheckpointCall call;
  call.rank = r.index;
  call.epoch = epoch;
  call.step = step;
  call.clock = &clock_;
  call.timeline = timeline_;
  call.sleep_until = r.sleep;
  const Time c0 = clock_.now();
  const CheckpointIo io = spec_.schedule.checkpoint(call);
  if (!io.written) return;
  CheckpointRecord rec;
  rec.gpu = r.index;
  rec.epoch = epoch;
  rec.step = step;
  rec.start = c0;
  rec.end = clock_.now();
  rec.io = io;
  if (timeline_->tracing())
    timeline_->add_host_span(HostSpan{"checkpoint", "checkpoint", "host", r.index, rec.start, rec.end});
  r.checkpoints.push_back(rec);
  if (observer) observer->on_checkpoint(rec);
}

// Settles the records of earlier steps whose operations have resolved, in
// order, up to the first that has not (stream order: the later ones mostly
// have not either), so each step costs O(1) amortized.
void Job::settle_records(Rank& r) {
  while (!r.pending.empty() && settle(r.pending.front())) {
    keep_step(r, finish(r.pending.front(), [](const Completion& c) { return c.known_end(); }));
    r.pending.pop_front();
  }
  while (!r.kernels.empty() && r.kernels.front().first.resolved()) {
    const auto& [c, d] = r.kernels.front();
    keep_kernel(r, {c.known_start(d), c.known_end()}, d);
    r.kernels.pop_front();
  }
}

// A settled step: into the totals, the sink and (when kept) the record.
void Job::keep_step(Rank& r, StepRecord&& s) {
  if (s.phase == RunPhase::Train) r.train.add(s);
  if (spec_.record.sink) spec_.record.sink->on_step(s);
  if (spec_.record.steps) r.steps.push_back(std::move(s));
}

void Job::keep_kernel(Rank& r, KernelSpan k, Duration busy) {
  r.compute_busy += busy;
  r.last_kernel_end = std::max(r.last_kernel_end, k.end);
  if (spec_.record.sink) spec_.record.sink->on_kernel(r.index, k);
  if (spec_.record.kernels) r.spans.push_back(k);
}

void StepTotals::add(const StepRecord& s) {
  ++steps;
  samples += s.samples;
  data_stall += s.data_stall;
  fetch_stall += s.fetch_stall;
  prep_stall += s.prep_stall;
  h2d += s.h2d;
  all_reduce_wait += s.all_reduce_wait;
  end = std::max(end, std::max(s.step_end, s.all_reduce_end));
}

// A GPU-decoding loader's work on the rank's GPU (pipeline.h, "GPU decode"):
// its buffers, allocated as the pipeline grows them and kept to the end (an
// out-of-memory error can come from them), and the batch's decode and
// augmentation kernels on their own stream, which share the GPU with
// training's.
void Job::gpu_preprocess(Rank& r, const pipeline::LoadedBatch& b) {
  if (b.pipeline_device_bytes > r.prep_bytes) {
    if (spec_.compute.use_allocator) {
      const std::uint64_t more = b.pipeline_device_bytes - r.prep_bytes;
      try {
        r.persistent.push_back(r.device->allocator().allocate(more));
      } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError(fmt::format("GPU {}: the GPU decode pipeline's buffers (its decoded batches and decode "
                                           "buffers, {:.1f} MiB) do not fit beside training: {}",
                                           r.index, static_cast<double>(b.pipeline_device_bytes) / 1048576.0, e.what()),
                               more);
      }
    }
    r.prep_bytes = b.pipeline_device_bytes;
  }
  if (b.gpu_decode <= 0) return;
  if (!r.prep) r.prep = &r.device->create_stream(/*non_blocking=*/true);
  const Completion c = r.prep->launch_kernel(b.gpu_decode, "GPU decode (DALI-style)");
  r.kernels.emplace_back(c, b.gpu_decode);
}

void Job::run_phase(Rank& r, RunPhase phase, int epoch, pipeline::BatchSource& source, JobObserver* observer,
                    bool& stop) {
  Timeline& tl = *timeline_;
  Stream& s = *r.stream;
  CachingAllocator& alloc = r.device->allocator();
  const ScheduleSpec& sched = spec_.schedule;
  const bool train = phase == RunPhase::Train;
  const std::vector<StepOp>& program = train ? plan_->train : plan_->eval;
  auto host_wait = [&](const Completion& c) {
    if (!c.resolved()) sync_->yield_before_wait(r.index);
    tl.wait(c, r.sleep);
  };
  auto host_wait_end = [&](const Completion& c) {
    host_wait(c);
    return tl.end_time(c);
  };
  const std::uint64_t fixed_steps = train ? sched.steps_per_epoch : sched.eval.steps;
  const std::uint64_t epoch_arg = sched.reshuffle_each_epoch ? static_cast<std::uint64_t>(epoch - 1) : 0;

  EpochMark mark;
  mark.gpu = r.index;
  mark.phase = phase;
  mark.epoch = static_cast<std::uint64_t>(epoch - 1);
  mark.start = clock_.now();
  source.begin_epoch(epoch_arg);
  for (std::uint64_t step = 0;; ++step) {
    if (fixed_steps > 0 && step >= fixed_steps) break;
    if (train && sched.max_iterations >= 0 && r.iterations >= sched.max_iterations) {
      stop = true;
      break;
    }
    if (sync_->aborted()) throw PeerFailed("another GPU's host thread failed");
    if (train && sched.between_steps) {
      StepBoundary boundary(*this, &r);
      sched.between_steps(boundary);
    }
    if (interrupt_requested()) {  // SIGINT/SIGTERM
      // One GPU stops cleanly after its step and keeps its record; ranks that
      // must agree on where to stop unwind instead.
      if (spec_.cluster.gpus > 1 || !train || spec_.schedule.keep_partial) throw_if_interrupted();
      interrupted_ = true;
      stop = true;
      break;
    }
    // CUDA's launch queue is finite: a host that never waits for its GPU
    // (SyncMode::AtEnd) blocks in a launch once the queue is full. The rank
    // waits here for its oldest unfinished step when kMaxStepsAhead are in
    // flight. A real host blocks well before that (each step launches many
    // kernels), so no figure changes; what it bounds is the work queued on
    // the timeline ahead of the clock, which a run of any length would
    // otherwise issue before the first step ends.
    if (r.in_flight.size() >= kMaxStepsAhead) {
      host_wait(r.in_flight.front());
      r.in_flight.pop_front();
    }
    const Time called = clock_.now();
    std::optional<pipeline::LoadedBatch> b = source.next(r.sleep);
    if (!b) {
      if (fixed_steps > 0)
        throw Error(fmt::format("job: GPU {} ran out of {} batches at step {} of {} in epoch {}", r.index,
                                to_string(phase), step + 1, fixed_steps, epoch));
      break;
    }
    const Time delivered = clock_.now();
    if (train && spec_.cluster.real_exchange) {
      // The network part of the step's all-reduce among the node processes,
      // real and blocking, once this GPU's earlier work is done.
      StepBoundary(*this, &r).drain();
      spec_.cluster.real_exchange(r.index, static_cast<std::uint64_t>(r.iterations) + 1);
    }
    if (b->gpu_decode > 0 || b->pipeline_device_bytes > r.prep_bytes) gpu_preprocess(r, *b);

    const int n = static_cast<int>(b->samples);
    const std::pair<StepCost, StepMemory>* costs = nullptr;
    if (spec_.compute.step_time == StepTime::CostModel) {
      auto found = r.per_batch.find(b->samples);
      if (found == r.per_batch.end())
        found = r.per_batch.emplace(b->samples, &plan_->batch(n, costs_, spec_, cost_)).first;
      costs = found->second;
    }
    // Evaluation steps (forward only) allocate less than training steps; they
    // are not replayed through the allocator.
    const bool memory = spec_.compute.use_allocator && costs != nullptr && train;
    const std::int64_t it = r.iterations;

    Pending p;
    p.rec.gpu = r.index;
    p.rec.phase = phase;
    p.rec.epoch = mark.epoch;
    p.rec.index = b->index;
    p.rec.iteration = it;
    p.rec.samples = b->samples;
    p.rec.bytes = b->bytes;
    p.rec.sample_indices = std::move(b->sample_indices);
    p.rec.next_called = called;
    p.rec.delivered = delivered;
    p.rec.ready = b->ready;
    p.rec.read = b->read;
    p.rec.decode = b->decode;
    p.issue = tl.issue_time();
    p.prev_tail = s.tail();

    const StepMemory* mem = memory ? &costs->second : nullptr;
    const bool steady = r.steady;
    // A steady iteration that returned the allocator to the state it found
    // is a fixed point: the same events from the same state repeat it
    // exactly, so it is not replayed again (the allocator's figures, addresses
    // and peaks are what the replay would leave). Otherwise the iteration is
    // replayed and checked.
    const bool skip_memory = mem && mem->zoo && steady && r.memory_fixed_point == costs;
    std::optional<std::pair<AllocatorSnapshot, std::vector<CachingAllocator::Ptr>>> memory_before;
    if (mem && !skip_memory) {
      r.memory_fixed_point = nullptr;
      if (mem->zoo && steady) memory_before.emplace(alloc.snapshot(), r.slots);
    }
    auto zoo_phase = [&](std::function<bool(const zoo::MemoryEvent&)> take) {
      if (!mem || !mem->zoo || skip_memory) return;
      zoo::apply_events(alloc, mem->plan, steady ? mem->plan.steady_iteration : mem->plan.first_iteration, r.slots,
                        {.take = std::move(take)});
    };
    auto free_even = [&] {
      for (auto q = r.live.rbegin(); q != r.live.rend(); ++q) alloc.free(*q);
      r.live.clear();
    };
    std::vector<Duration> parts;
    // A GPU whose policy gives steps the GPU alone (fifo) is this step's from its first kernel to its last.
    struct Turn {
      SharedGpu* gpu = nullptr;
      Stream* stream = nullptr;
      void end() {
        if (gpu) gpu->end_turn(stream->tail());
        gpu = nullptr;
      }
      ~Turn() { end(); }
    } turn;
    SharedGpu* fifo = r.device->shared();
    if (fifo && !fifo->exclusive_steps()) fifo = nullptr;
    const auto k = static_cast<std::size_t>(phase);
    try {
      for (std::size_t i = 0; i < program.size(); ++i) {
        const StepOp op = program[i];
        if (fifo && i == plan_->first_kernel_op[k]) {
          const Completion dep[] = {fifo->begin_turn()};
          turn.gpu = fifo;
          turn.stream = &s;
          OpSpec wait;
          wait.trace = false;
          wait.tag.name = "wait for the shared GPU";
          s.enqueue(wait, std::nullopt, dep);
        }
        switch (op) {
          case StepOp::CopyBatch: {
            if (mem && mem->zoo) {
              zoo_phase([](const zoo::MemoryEvent& e) { return e.op < 0; });
            } else if (mem) {
              r.live.push_back(alloc.allocate(b->bytes));
            }
            if (!spec_.compute.copy_batch) break;
            // x.to(device): a measured transfer time is replayed (scaled by
            // the batch's bytes when it is not the profiled size); otherwise
            // the PCIe model moves the batch's real bytes.
            const bool pinned = b->memory == HostMemoryKind::Pinned;
            const auto measured = pinned ? costs->first.transfer_pinned : costs->first.transfer_pageable;
            const std::uint64_t profiled = costs->first.input_bytes_per_sample * static_cast<std::uint64_t>(n);
            if (measured) {
              OpSpec o;
              o.duration = *measured;
              if (b->bytes != profiled && profiled > 0)
                o.duration = std::llround(static_cast<double>(*measured) * static_cast<double>(b->bytes) /
                                          static_cast<double>(profiled));
              o.tag.name = "H2D batch";
              o.tag.category = "h2d";
              p.h2d = s.enqueue(o, Engine::CopyH2D);
              if (!pinned) host_wait(p.h2d);
            } else if (!r.node) {
              // Under time_divisor N, 1/N of the bytes: the copy's time divided by N.
              const std::uint64_t bytes = b->bytes / static_cast<std::uint64_t>(spec_.compute.time_divisor);
              p.h2d = s.copy_h2d(bytes, b->memory, "H2D batch");  // pageable: blocks, as cudaMemcpy
            } else {
              p.h2d = node_copy(*r.node, r.local, s, Engine::CopyH2D, b->bytes, b->memory, "H2D batch");
              if (!pinned) host_wait(p.h2d);
            }
            p.has_h2d = true;
            break;
          }
          case StepOp::Forward: {
            if (mem && mem->zoo) {
              zoo_phase([](const zoo::MemoryEvent& e) { return e.op >= 0 && e.phase == zoo::Phase::Forward; });
            } else if (mem) {
              for (std::uint64_t t : mem->even.activation_tensors) r.live.push_back(alloc.allocate(t));
            }
            const Duration fwd = r.forward_noise.sample(costs->first.forward, it);
            p.forward = s.launch_kernel(fwd, "forward", plan_->forward_demand);
            r.kernels.emplace_back(p.forward, fwd);
            r.forward_total += fwd;
            p.rec.compute += fwd;
            break;
          }
          case StepOp::Backward: {
            zoo_phase([](const zoo::MemoryEvent& e) { return e.op >= 0 && e.phase == zoo::Phase::Backward; });
            const Duration bwd = r.backward_noise.sample(costs->first.backward, it);
            r.backward_total += bwd;
            p.rec.compute += bwd;
            if (!r.node || !spec_.compute.all_reduce) {
              p.backward = s.launch_kernel(bwd, "backward+step", plan_->backward_demand);
              r.kernels.emplace_back(p.backward, bwd);
            } else {
              parts = split_backward(plan_->backward, bwd);
              // One kernel per run of chunks that ends where a bucket completes
              // (backward_plan.h): the same times as a kernel per chunk.
              std::size_t k = 0;
              for (const std::size_t end : plan_->backward_ends) {
                Duration d = 0;
                for (std::size_t j = k; j < end; ++j) d += parts[j];
                const Completion c = s.launch_kernel(d, "backward", plan_->backward_demand);
                r.kernels.emplace_back(c, d);
                for (; k < end; ++k)
                  for (int g : plan_->backward.chunks[k].gradients) reducer_->gradient_ready(r.index, it, g, c);
              }
              p.backward = s.tail();
            }
            break;
          }
          case StepOp::AllReduceWait: {
            // End of DDP's backward: the stream waits for the all-reduces.
            p.all_reduce = reducer_->finish(r.index, it);
            p.has_all_reduce = true;
            OpSpec wait;
            wait.trace = false;
            wait.tag.name = "wait for all-reduce";
            const Completion dep[] = {p.all_reduce};
            s.enqueue(wait, std::nullopt, dep);
            break;
          }
          case StepOp::OptimizerStep: {
            zoo_phase([](const zoo::MemoryEvent& e) { return e.op >= 0 && e.phase == zoo::Phase::Optimizer; });
            if (!parts.empty()) {
              const Completion o = s.launch_kernel(parts.back(), "optimizer step", plan_->backward_demand);
              r.kernels.emplace_back(o, parts.back());
            }
            // Frees are host-side and stream-ordered, as in PyTorch.
            if (mem && !mem->zoo) free_even();
            break;
          }
          case StepOp::LossItem:
            if (!r.node) {
              s.copy_d2h(4, HostMemoryKind::Pageable, "loss.item()");
            } else {
              host_wait(node_copy(*r.node, r.local, s, Engine::CopyD2H, 4, HostMemoryKind::Pageable, "loss.item()"));
            }
            break;
          case StepOp::Compute: {
            TimeSampler& draw = train ? *r.train_draw : *r.eval_draw;
            const Duration d = from_seconds(draw.next_seconds());
            const Completion c = s.launch_kernel(d, train ? "compute" : "eval");
            r.kernels.emplace_back(c, d);
            p.rec.compute += d;
            break;
          }
          case StepOp::Synchronize: host_wait(s.tail()); break;
          case StepOp::ReleaseBatch: b->keep_alive.reset(); break;
        }
        if (i == plan_->last_kernel_op[k]) turn.end();
      }
      // The iteration's end: the zoo plan's end-of-iteration events (the input,
      // set_to_none grads).
      if (mem && mem->zoo) {
        zoo_phase([&](const zoo::MemoryEvent& e) { return e.op >= mem->plan.op_count; });
        if (memory_before && memory_before->second == r.slots && memory_before->first == alloc.snapshot())
          r.memory_fixed_point = costs;
        r.steady = true;
      } else if (mem) {
        free_even();
      }
    } catch (...) {
      free_even();
      throw;
    }
    p.step = s.tail();
    // Only a host that never waits can run ahead (it waits every step otherwise).
    if (spec_.compute.sync == SyncMode::AtEnd) r.in_flight.push_back(p.step);
    p.rec.host_done = clock_.now();
    // The loop drops the previous batch (its staging buffer) when x is rebound.
    r.current = std::move(b->keep_alive);
    mark.samples += p.rec.samples;
    if (train) ++r.iterations;
    r.pending.push_back(std::move(p));
    if (observer) {
      StepEvent ev;
      ev.gpu = r.index;
      ev.phase = phase;
      ev.epoch = epoch;
      ev.step = step + 1;
      ev.steps = fixed_steps;
      ev.done = r.iterations;
      ev.total = planned_;
      ev.record = &r.pending.back().rec;
      observer->on_step(ev);
    }
    settle_records(r);
    if (train) {
      for (const CheckpointPoint& c : sched.checkpoints)
        if (!c.after_epoch && c.epoch == epoch && c.step == step + 1) {
          mark.host_end = clock_.now();
          checkpoint(r, epoch, step + 1, observer);
        }
    }
  }
  // End of the phase: the host waits for the GPU (torch.cuda.synchronize()).
  // Both waits returned, so the phase's last completions are final.
  mark.end = std::max(mark.start, host_wait_end(s.tail()));
  if (r.comm) mark.end = std::max(mark.end, host_wait_end(r.comm->tail()));
  mark.host_end = clock_.now();
  r.in_flight.clear();  // the host waited for all of it
  if (observer) observer->on_phase_end(mark);
  if (spec_.record.epochs) r.phases.push_back(mark);
}

void Job::run_rank(Rank& r, JobObserver* observer) {
  const ScheduleSpec& sched = spec_.schedule;
  if (!sched.train) {  // checkpoints only
    for (const CheckpointPoint& c : sched.checkpoints) checkpoint(r, c.epoch, c.step, observer);
    return;
  }
  bool stop = false;
  for (int e = 1; e <= sched.epochs && !stop; ++e) {
    if (sched.max_iterations >= 0 && r.iterations >= sched.max_iterations) break;
    run_phase(r, RunPhase::Train, e, *r.train_source, observer, stop);
    for (const CheckpointPoint& c : sched.checkpoints)
      if (c.after_epoch && c.epoch == e) checkpoint(r, e, c.step, observer);
    const EvalSpec& ev = sched.eval;
    if (r.eval_source && e >= ev.first_epoch && (e - ev.first_epoch) % ev.every == 0)
      run_phase(r, RunPhase::Eval, e, *r.eval_source, observer, stop);
  }
  r.current.reset();
}

RunRecord Job::run(JobObserver* observer) {
  std::vector<std::function<void()>> bodies = host_threads(observer);
  try {
    clock_.run_concurrently(std::move(bodies));
  } catch (...) {
    std::lock_guard lock(error_mu_);
    if (!first_error_) first_error_ = std::current_exception();
  }
  if (first_error_ && !spec_.schedule.keep_partial) std::rethrow_exception(first_error_);
  return record();
}

// Persistent state (weights, gradients, optimizer state) on the rank's GPU.
void Job::allocate_persistent(Rank& r) {
  if (spec_.compute.step_time != StepTime::CostModel || !spec_.compute.use_allocator || !spec_.schedule.train) return;
  CachingAllocator& a = r.device->allocator();
  if (plan_->graph) {
    zoo::allocate_persistent(a, plan_->batch(spec_.batch_size, costs_, spec_, cost_).second.plan, r.slots);
  } else {
    const MemoryPlan full = make_memory_plan(cost_, spec_.batch_size);
    for (std::uint64_t t : full.persistent_tensors) r.persistent.push_back(a.allocate(t));
  }
}

int StepBoundary::rank() const { return static_cast<Job::Rank*>(rank_)->index; }

std::int64_t StepBoundary::iterations() const { return static_cast<Job::Rank*>(rank_)->iterations; }

void StepBoundary::sleep_until(Time t) const { static_cast<Job::Rank*>(rank_)->sleep(t); }

void StepBoundary::drain() const {
  Job::Rank& r = *static_cast<Job::Rank*>(rank_);
  for (Stream* s : {r.stream, r.comm, r.prep})
    if (s) job_.timeline().wait(s->tail(), r.sleep);
}

void StepBoundary::release_memory() const {
  Job::Rank& r = *static_cast<Job::Rank*>(rank_);
  std::shared_ptr<void> batch = std::move(r.current);  // the host keeps its batch
  r.release_all();
  r.current = std::move(batch);
  r.device->allocator().empty_cache();
  // The first iteration after a restart makes its gradients and optimizer state again.
  r.steady = false;
  r.memory_fixed_point = nullptr;
}

void StepBoundary::restore_memory() const { job_.allocate_persistent(*static_cast<Job::Rank*>(rank_)); }

void StepBoundary::barrier() const { job_.barrier(static_cast<Job::Rank*>(rank_)->index); }

// Through the host sync, so that under the virtual clock a rank waiting here
// lets time move to its peers' next wake-ups, and a peer's failure ends the wait.
void Job::barrier(int rank) {
  std::uint64_t passed = 0;
  bool last = false;
  {
    std::lock_guard lock(sync_->mutex());
    passed = barrier_passed_;
    if (++barrier_arrived_ == spec_.cluster.gpus) {
      barrier_arrived_ = 0;
      ++barrier_passed_;
      last = true;
    }
  }
  if (last) {
    sync_->notify_all();
    return;
  }
  sync_->wait_until(rank, [&] { return barrier_passed_ != passed; });
}

std::vector<std::function<void()>> Job::host_threads(JobObserver* observer) {
  if (sync_) throw std::logic_error("Job::run called twice");
  const int gpus = spec_.cluster.gpus;
  sync_ = std::make_unique<HostSync>(clock_, gpus);
  for (auto& r : ranks_) r->sleep = sync_->sleeper(r->index);

  // Sources, one per rank (and per phase), made now: a custom source may need the job's timeline.
  const std::shared_ptr<pipeline::DistributedCache> distributed_cache = make_distributed_cache(spec_);
  // One copy of each phase's sample list for all ranks' modelled loaders.
  std::map<const DataSpec*, std::shared_ptr<const pipeline::Dataset>> datasets;
  auto make_source = [&](const DataSpec& d, int g, int batch) -> std::unique_ptr<pipeline::BatchSource> {
    pipeline::LoaderOptions lo = d.loader;
    lo.batch_size = static_cast<std::size_t>(batch);
    lo.rank = spec_.cluster.real_node * gpus + g;  // one node of several processes: its global ranks
    lo.world_size = spec_.cluster.real_nodes * gpus;
    const HostMemoryKind mem = d.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
    switch (d.source) {
      case DataSource::Synthetic: {
        const std::uint64_t bytes =
            d.synthetic_bytes_per_sample > 0 ? d.synthetic_bytes_per_sample : cost_.input_bytes_per_sample;
        if (d.synthetic_over_dataset) {
          const pipeline::SamplerOptions so = pipeline::sampler_options(lo);
          return std::make_unique<pipeline::SyntheticSource>(clock_, pipeline::Sampler(d.dataset.size(), so), batch,
                                                             bytes, mem);
        }
        return std::make_unique<pipeline::SyntheticSource>(clock_, d.synthetic_batches, batch, bytes, mem);
      }
      case DataSource::Loader: {
        pipeline::PipelineSourceOptions so;
        so.rank = g;
        so.cold = d.cold;
        so.trace = timeline_;
        so.untimed = d.untimed_reads;
        return std::make_unique<pipeline::PipelineSource>(clock_, d.dataset, lo, so);
      }
      case DataSource::Modelled: {
        lo.cache.reset();
        const pipeline::LoaderModelOptions m =
            node_loader_model(spec_, d, g, &d == &spec_.data ? distributed_cache : nullptr);
        std::shared_ptr<const pipeline::Dataset>& shared = datasets[&d];
        if (!shared) shared = std::make_shared<const pipeline::Dataset>(d.dataset);
        return std::make_unique<pipeline::ModelledLoader>(clock_, shared, lo, m, timeline_);
      }
      case DataSource::Custom: return d.custom(g, clock_, *timeline_);
    }
    return nullptr;
  };
  if (spec_.schedule.train) {
    for (auto& r : ranks_) {
      r->train_source = make_source(spec_.data, r->index, spec_.batch_size);
      if (spec_.schedule.eval.first_epoch > 0 && spec_.schedule.eval.steps > 0)
        r->eval_source = make_source(spec_.schedule.eval.data, r->index,
                                     static_cast<int>(spec_.schedule.eval.data.loader.batch_size
                                                          ? spec_.schedule.eval.data.loader.batch_size
                                                          : static_cast<std::size_t>(spec_.batch_size)));
    }
  }

  if (comm_ && spec_.compute.step_time == StepTime::CostModel && spec_.compute.all_reduce) {
    std::vector<Stream*> comm;
    for (auto& r : ranks_) comm.push_back(r->comm);
    reducer_ =
        std::make_unique<DdpReducer>(*comm_, *sync_, comm, plan_->backward.gradient_bytes, spec_.cluster.buckets);
    plan_->backward_ends = bucket_chunk_ends(plan_->backward, reducer_->buckets());
  }

  // The records grow by one step each: reserve them up front and touch their
  // pages now, so a growing vector is never copied, nor its new pages
  // faulted in, between two steps on the host's critical path (a fault costs
  // microseconds on a virtual machine: a 100 us step would lose 1-2 % of AU).
  {
    const std::int64_t evals = spec_.schedule.eval.first_epoch > 0
                                   ? static_cast<std::int64_t>(spec_.schedule.eval.steps) * spec_.schedule.epochs
                                   : 0;
    // Reserved for at most 4 Mi steps over all ranks (about 1 GiB of address
    // space), touched for at most 1 Mi (a longer run grows as usual).
    const auto ranks = static_cast<std::size_t>(gpus);
    const auto planned =
        std::min(static_cast<std::size_t>(std::max<std::int64_t>(planned_ + evals, 0)), (std::size_t{1} << 22) / ranks);
    const std::size_t steps = std::min(planned, (std::size_t{1} << 20) / ranks);
    // Kernels per step: forward and backward+step, or with DDP forward, one
    // per run of backward chunks and the optimizer step; at most 256 Ki reserved.
    const std::size_t kernels_per_step = std::max<std::size_t>(2, 2 + plan_->backward_ends.size());
    for (auto& r : ranks_) {
      if (spec_.record.steps) {
        r->steps.reserve(planned);
        r->steps.resize(steps);
        r->steps.clear();
      }
      if (spec_.record.kernels) {
        r->spans.resize(std::min(steps * kernels_per_step, std::size_t{1} << 18));
        r->spans.clear();
      }
    }
  }

  for (auto& r : ranks_) allocate_persistent(*r);
  start_ = clock_.now();

  std::vector<std::function<void()>> bodies;
  for (int g = 0; g < gpus; ++g) {
    bodies.push_back([this, g, observer] {
      try {
        run_rank(*ranks_[g], observer);
        sync_->finish(g);
      } catch (const PeerFailed&) {
        sync_->finish(g);  // another rank's error is the job's
      } catch (...) {
        {
          std::lock_guard lock(error_mu_);
          if (!first_error_) first_error_ = std::current_exception();
        }
        sync_->abort();
        sync_->finish(g);
      }
    });
  }
  return bodies;
}

RunRecord Job::record() {
  if (!sync_) throw std::logic_error("Job::record called before host_threads");
  const int gpus = spec_.cluster.gpus;
  const std::exception_ptr stopped = first_error_;
  const Time start = start_;
  // ---- everything has completed: read the final times ----
  Timeline& tl = *timeline_;
  RunRecord rec;
  rec.model = spec_.compute.step_time == StepTime::CostModel ? canonical_model_name(spec_.compute.model.name) : "";
  rec.gpu = spec_.cluster.gpu->id;
  rec.gpus = gpus;
  rec.nodes = cluster_ ? cluster_->nodes() : 1;
  if (cluster_) rec.network = spec_.cluster.network.name;
  rec.batch_size = spec_.batch_size;
  rec.clock = std::string(clock_.name());
  rec.step_time = spec_.compute.step_time;
  rec.stopped = stopped;
  rec.interrupted = interrupted_;
  rec.start = start;
  rec.host_end = clock_.now();
  rec.cost = cost_;
  rec.memory_plan = !spec_.compute.use_allocator || spec_.compute.step_time != StepTime::CostModel
                        ? "none (the step program allocates nothing)"
                    : plan_->graph
                        ? "model zoo (traced tensor lifetimes)"
                        : "even split of the cost model's figures (model not in the zoo, or measured memory)";
  if (reducer_) {
    rec.buckets = static_cast<int>(reducer_->buckets().size());
    for (const auto& b : reducer_->buckets()) rec.all_reduce_bytes += b.bytes;
    rec.all_reduces = reducer_->all_reduces();
    rec.backward_split = plan_->backward.source;
  }
  if (ranks_.size() > 1) {
    std::size_t total = 0;
    for (auto& r : ranks_) total += r->steps.size() + r->pending.size();
    rec.steps.reserve(total);
  }
  for (auto& r : ranks_) {
    RankRecord rr;
    rr.gpu = r->index;
    rr.iterations = r->iterations;
    // What had not settled during the run has now.
    auto end = [&tl](const Completion& c) { return tl.end_time(c); };
    for (const auto& [c, d] : r->kernels) keep_kernel(*r, {c.known_start(d), end(c)}, d);
    r->kernels.clear();
    for (Pending& p : r->pending) keep_step(*r, finish(p, end));
    r->pending.clear();
    rr.compute_intervals = std::move(r->spans);
    rr.compute_busy = r->compute_busy;
    rr.last_kernel_end = r->last_kernel_end;
    rr.train = r->train;
    if (rec.steps.empty())
      rec.steps = std::move(r->steps);
    else
      rec.steps.insert(rec.steps.end(), std::make_move_iterator(r->steps.begin()),
                       std::make_move_iterator(r->steps.end()));
    rec.epochs.insert(rec.epochs.end(), r->phases.begin(), r->phases.end());
    for (const CheckpointRecord& c : r->checkpoints) rec.checkpoints.push_back(c);
    const AllocatorStats a = r->device->allocator().stats();
    rr.peak_allocated_bytes = a.peak_allocated_bytes;
    rr.peak_reserved_bytes = a.peak_reserved_bytes;
    rr.forward_total = r->forward_total;
    rr.backward_total = r->backward_total;
    if (r->train_source) {
      rr.source = r->train_source->describe();
      rec.loader_stats.push_back(r->train_source->stats());
    }
    if (r->eval_source) rec.eval_loader_stats.push_back(r->eval_source->stats());
    rec.ranks.push_back(std::move(rr));
  }
  return rec;
}

// ---- one step, predicted ------------------------------------------------------

StepPrediction predict_step(const CostModel& costs, JobSpec spec, HostMemoryKind host) {
  spec.cluster.gpus = 1;
  spec.data = DataSpec{};
  spec.data.source = DataSource::Synthetic;
  spec.data.synthetic_batches = 2;
  spec.data.pin_memory = host == HostMemoryKind::Pinned;
  spec.compute.step_time = StepTime::CostModel;
  spec.compute.copy_batch = true;
  spec.compute.use_allocator = false;
  spec.compute.sync = SyncMode::AtEnd;
  spec.compute.variation.cv = 0;
  spec.compute.variation.warmup_factor = 1;
  spec.schedule = ScheduleSpec{};
  spec.trace = false;
  auto clock = make_virtual_clock();
  Job job(*clock, costs, spec);
  const RunRecord rec = job.run();
  if (rec.steps.size() < 2) throw std::logic_error("predict_step: the job ran fewer than two steps");
  const StepRecord& s = rec.steps[1];
  StepPrediction p;
  p.cost = job.cost();
  p.transfer = s.h2d_end - s.h2d_start;
  p.forward = s.forward_end - s.h2d_end;
  p.backward = s.backward_end - s.forward_end;
  p.iteration = p.transfer + p.forward + p.backward;
  return p;
}

// ---- summaries ----------------------------------------------------------------

namespace {
double pct(Duration part, Duration whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
}  // namespace

double RunSummary::mean_epoch_s() const {
  if (epochs.empty()) return 0;
  double s = 0;
  for (const EpochSummary& e : epochs) s += to_seconds(e.end - e.start);
  return s / static_cast<double>(epochs.size());
}

RunSummary summarize(const RunRecord& rec) {
  RunSummary res;
  res.model = rec.model;
  res.gpu = rec.gpu;
  res.gpus = rec.gpus;
  res.batch_size = rec.batch_size;
  res.clock = rec.clock;
  res.start = rec.start;
  res.cost = rec.cost;
  res.backward_split = rec.backward_split;
  res.memory_plan = rec.memory_plan;
  res.buckets = rec.buckets;
  res.all_reduce_bytes = rec.all_reduce_bytes;
  res.all_reduces = rec.all_reduces;
  if (!rec.ranks.empty()) res.source = rec.ranks.front().source;
  std::map<std::uint64_t, EpochSummary> epochs;
  Time end = rec.start;
  for (const RankRecord& rr : rec.ranks) {
    GpuSummary g;
    g.gpu = rr.gpu;
    g.iterations = rr.iterations;
    g.end = rec.start;
    g.compute_busy = rr.compute_busy;
    g.compute_intervals = rr.compute_intervals;
    g.peak_allocated_bytes = rr.peak_allocated_bytes;
    g.peak_reserved_bytes = rr.peak_reserved_bytes;
    for (const EpochMark& m : rec.epochs) {
      if (m.gpu != rr.gpu) continue;
      g.end = std::max(g.end, m.end);
      if (m.phase != RunPhase::Train) continue;
      auto [it, fresh] = epochs.try_emplace(m.epoch);
      EpochSummary& er = it->second;
      if (fresh) {
        er.epoch = m.epoch;
        er.start = m.start;
        er.end = m.end;
      } else {
        er.start = std::min(er.start, m.start);
        er.end = std::max(er.end, m.end);
      }
      er.samples += m.samples;
    }
    res.peak_allocated_bytes = std::max(res.peak_allocated_bytes, rr.peak_allocated_bytes);
    res.peak_reserved_bytes = std::max(res.peak_reserved_bytes, rr.peak_reserved_bytes);
    res.iterations = std::max(res.iterations, rr.iterations);
    res.forward_total += rr.forward_total;
    res.backward_total += rr.backward_total;
    end = std::max(end, g.end);
    res.per_gpu.push_back(std::move(g));
  }
  // The train steps' totals (RankRecord::train, kept whether or not the
  // record keeps the steps).
  for (std::size_t i = 0; i < rec.ranks.size(); ++i) {
    const StepTotals& t = rec.ranks[i].train;
    GpuSummary& g = res.per_gpu[i];
    // A run stopped early (keep_partial) has no mark for the phase it was
    // in; its steps still count, so the time they took counts too.
    if (t.steps > 0) g.end = std::max(g.end, t.end);
    end = std::max(end, g.end);
    g.samples += t.samples;
    g.data_stall += t.data_stall;
    g.fetch_stall += t.fetch_stall;
    g.prep_stall += t.prep_stall;
    g.h2d += t.h2d;
    g.all_reduce_wait += t.all_reduce_wait;
    res.samples += t.samples;
  }
  for (auto& [e, er] : epochs) res.epochs.push_back(er);
  res.elapsed = end - rec.start;
  const double secs = to_seconds(res.elapsed);
  res.samples_per_s = secs > 0 ? static_cast<double>(res.samples) / secs : 0;
  res.iterations_per_s = secs > 0 ? static_cast<double>(res.iterations) / secs : 0;
  const double n = static_cast<double>(std::max<std::size_t>(1, res.per_gpu.size()));
  for (const GpuSummary& g : res.per_gpu) {
    res.gpu_util_pct += pct(g.compute_busy, res.elapsed) / n;
    res.data_stall_pct += pct(g.data_stall, res.elapsed) / n;
    res.fetch_stall_pct += pct(g.fetch_stall, res.elapsed) / n;
    res.prep_stall_pct += pct(g.prep_stall, res.elapsed) / n;
    res.h2d_pct += pct(g.h2d, res.elapsed) / n;
    res.all_reduce_pct += pct(g.all_reduce_wait, res.elapsed) / n;
  }
  return res;
}

}  // namespace gpemu
