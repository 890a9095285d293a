// The job's record: a step's stalls derived from its times, steps and
// kernels settled as their GPU times become known (into the totals, the
// sink and the kept record), and the RunRecord read once the run is over.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "gpemu/cost_model.h"
#include "gpemu/job/job.h"
#include "interconnect/ddp_reducer.h"
#include "workload/job_impl.h"

namespace gpemu {

using job_detail::Pending;

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

namespace {

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

}  // namespace gpemu
