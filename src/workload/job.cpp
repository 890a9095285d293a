// Building a job: its devices (a Device, a Node or a Cluster, its own or a
// session's), its plan (the step programs, the backward split, what its
// kernels keep busy) and its ranks; the steps it plans, refused up front
// when their records cannot fit. Running it: job_run.cpp.
#include "gpemu/job/job.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "clock/host_sync.h"
#include "common/host_memory.h"
#include "gpemu/cost_model.h"
#include "gpemu/device/shared_gpu.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/spec_error.h"
#include "interconnect/ddp_reducer.h"
#include "workload/job_impl.h"
#include "workload/roofline.h"

namespace gpemu {
namespace {

VariationOptions with_cv(VariationOptions v, std::optional<double> measured) {
  if (measured) v.cv = *measured;
  return v;
}

// A run whose records cannot fit in what this process may allocate is
// refused before it starts (QA H3), not ended by std::bad_alloc hours in.
void check_records_fit(const JobSpec& s, std::int64_t planned_steps) {
  const double need = kept_record_bytes(s, planned_steps);
  if (need < 64.0 * (1 << 20)) return;  // not worth a look
  const double have = allocatable_bytes();
  if (have <= 0 || need <= have) return;
  // The value's rule is "not valid here" (this machine), so the sentence is the rule's.
  throw SpecError(
      "schedule.epochs", "",
      fmt::format(
          "{} ({} steps a GPU) on {} GPU(s) is not valid here: the run keeps {}, {:.2f} GB in all, more than "
          "this process can allocate now ({:.2f} GB: the machine's available memory or ulimit -v); accepted: fewer "
          "epochs, steps or GPUs{}",
          s.schedule.epochs, planned_steps, s.cluster.gpus,
          s.trace ? fmt::format("each step's operations for the trace (about {:.0f} bytes) and record (about {:.0f} "
                                "bytes) and each epoch's mark (about {:.0f} bytes)",
                                kTraceBytesPerStep, kRecordBytesPerStep, kRecordBytesPerEpoch)
          : s.record.steps
              ? fmt::format("each step's record (about {:.0f} bytes: a trace or report draws them) and each "
                            "epoch's mark (about {:.0f} bytes)",
                            kRecordBytesPerStep, kRecordBytesPerEpoch)
              : fmt::format("each epoch's mark (about {:.0f} bytes a GPU)", kRecordBytesPerEpoch),
          need / 1e9, have / 1e9,
          s.record.steps || s.trace ? fmt::format(", or no {} or {}", spec_field("trace"), spec_field("record.steps"))
                                    : ""));
}

}  // namespace

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

}  // namespace gpemu
