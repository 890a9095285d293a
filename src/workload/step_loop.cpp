// A rank's loop: its epochs (run_rank: train, checkpoints, evaluation) and
// within a phase its steps (run_phase: a batch from the source, the step
// program walked on the rank's streams, the memory plan's events applied
// through its allocator, the step's record kept pending), a checkpoint at
// the schedule's points and a GPU-decoding loader's work on the GPU.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "clock/host_sync.h"
#include "common/interrupt.h"
#include "cost/plan_executor.h"
#include "gpemu/device/shared_gpu.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/job/job.h"
#include "interconnect/ddp_reducer.h"
#include "workload/job_impl.h"

namespace gpemu {

using job_detail::Pending;
using job_detail::StepMemory;

namespace {

// The most steps a rank's host runs ahead of its GPU (see run_phase).
constexpr std::size_t kMaxStepsAhead = 1024;

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

}  // namespace gpemu
