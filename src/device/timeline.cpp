#include "gpemu/timeline.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

namespace gpemu {
namespace detail {

struct PendingOp {
  Time lower_bound = 0;
  Duration duration = 0;
  int link = -1;          // index into the timeline's links; -1 for fixed-cost ops
  double bytes = 0;
  double cap = 0;         // bytes per ns
  std::vector<std::shared_ptr<PendingOp>> deps;  // those still pending at issue
  std::string name, category;
  int device = -1, stream = -1, engine = -1;
  bool trace = true;

  std::atomic<bool> final{false};
  Time start = -1, end = -1;

  // Flow state committed at the timeline's horizon.
  bool c_joined = false;
  Time c_start = 0;
  double c_remaining = 0;

  // Simulation scratch.
  bool s_start_known = false, s_end_known = false, s_joined = false;
  Time s_start = 0, s_end = 0, s_join_at = 0, s_finish_at = 0;
  double s_remaining = 0, s_rate = 0;
};

}  // namespace detail

using detail::PendingOp;

bool Completion::resolved() const { return !op_ || op_->final.load(std::memory_order_acquire); }
Time Completion::known_end() const {
  if (op_ && op_->final.load(std::memory_order_acquire)) return op_->end;
  return end_;
}

Timeline::Timeline(Clock& clock) : clock_(clock) {}
Timeline::~Timeline() = default;

const Link& Timeline::add_link(std::string name, double capacity, bool shared) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.emplace_back(new Link(std::move(name), capacity, static_cast<int>(links_.size())));
  link_shared_.push_back(shared);
  return *links_.back();
}

Time Timeline::issue_time() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::max(clock_.now(), horizon_);
}

namespace {
// Time to move bytes at rate (bytes per ns), rounded up to whole ns.
Duration transfer_ns(double bytes, double rate) {
  if (bytes <= 0) return 0;
  return static_cast<Duration>(std::ceil(bytes / rate - 1e-9));
}
double per_ns(double bytes_per_s) { return bytes_per_s * 1e-9; }
}  // namespace

void Timeline::record_locked(const TraceTag& tag, Time start, Time end) {
  records_.push_back(TraceRecord{std::string(tag.name), std::string(tag.category), tag.device, tag.stream,
                                 tag.engine, start, end});
}

Completion Timeline::issue(const OpSpec& spec, std::span<const Completion> deps) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.ops_issued;
  Time lb = std::max(spec.lower_bound, horizon_);
  bool has_pending = false;
  for (const Completion& d : deps) {
    if (d.op_ && !d.op_->final.load(std::memory_order_relaxed)) {
      has_pending = true;
    } else {
      lb = std::max(lb, d.op_ ? d.op_->end : d.end_);
    }
  }
  const bool is_flow = spec.link != nullptr;
  const double link_cap = is_flow ? per_ns(spec.link->capacity_bytes_per_s()) : 0;
  const double cap = spec.rate_cap > 0 ? per_ns(spec.rate_cap) : std::numeric_limits<double>::infinity();
  if (!has_pending && (!is_flow || !link_shared_[spec.link->index_])) {
    // Fast path: nothing this operation depends on can still move.
    Time end = lb + spec.duration;
    if (is_flow) end += transfer_ns(spec.bytes, std::min(cap, link_cap));
    if (tracing_ && spec.trace) record_locked(spec.tag, lb, end);
    latest_end_ = std::max(latest_end_, end);
    return Completion::at(end);
  }
  ++stats_.ops_pending_path;
  auto op = std::make_shared<PendingOp>();
  op->lower_bound = lb;
  op->duration = spec.duration;
  op->link = is_flow ? spec.link->index_ : -1;
  op->bytes = spec.bytes;
  op->cap = is_flow ? std::min(cap, link_cap) : 0;
  for (const Completion& d : deps)
    if (d.op_ && !d.op_->final.load(std::memory_order_relaxed)) op->deps.push_back(d.op_);
  op->name = spec.tag.name;
  op->category = spec.tag.category;
  op->device = spec.tag.device;
  op->stream = spec.tag.stream;
  op->engine = spec.tag.engine;
  op->trace = spec.trace;
  pending_.push_back(op);
  Completion c;
  c.end_ = lb;
  c.op_ = std::move(op);
  return c;
}

void Timeline::finalize_locked(PendingOp& op) {
  op.start = op.s_start;
  op.end = op.s_end;
  op.final.store(true, std::memory_order_release);
  op.deps.clear();  // break chains so memory is released
  latest_end_ = std::max(latest_end_, op.end);
  if (tracing_ && op.trace) {
    records_.push_back(TraceRecord{op.name, op.category, op.device, op.stream, op.engine, op.start, op.end});
  }
}

// A discrete-event simulation of the pending operations from the committed
// horizon. Fixed-cost operations resolve as soon as their dependencies do;
// transfers join their link at start + latency and progress at the link's
// max-min fair share until their bytes are moved.
Time Timeline::resolve_locked(PendingOp* target, bool to_end) {
  ++stats_.resolutions;
  const Time now = std::max(clock_.now(), horizon_);
  const std::size_t nlinks = links_.size();
  std::vector<std::vector<PendingOp*>> active(nlinks);
  std::vector<bool> dirty(nlinks, false);

  for (auto& sp : pending_) {
    PendingOp& op = *sp;
    op.s_start_known = op.s_end_known = op.s_joined = false;
    op.s_remaining = op.bytes;
    if (op.c_joined) {
      op.s_start_known = op.s_joined = true;
      op.s_start = op.c_start;
      op.s_remaining = op.c_remaining;
      active[op.link].push_back(&op);
      dirty[op.link] = true;
    }
  }

  auto recompute_rates = [&](std::size_t l, Time t) {
    auto& flows = active[l];
    std::sort(flows.begin(), flows.end(), [](const PendingOp* a, const PendingOp* b) { return a->cap < b->cap; });
    double left = per_ns(links_[l]->capacity_bytes_per_s());
    std::size_t n = flows.size();
    for (PendingOp* f : flows) {
      double share = left / static_cast<double>(n--);
      f->s_rate = std::min(f->cap, share);
      left -= f->s_rate;
      f->s_finish_at = t + transfer_ns(f->s_remaining, f->s_rate);
    }
    dirty[l] = false;
  };

  Time t = horizon_;
  bool committed = false;
  std::vector<PendingOp*> finished_by_now;

  auto commit = [&](Time at) {
    // Record the state at `at` as the new committed horizon.
    for (auto& sp : pending_) {
      PendingOp& op = *sp;
      if (op.s_end_known && op.s_end <= at) {
        finished_by_now.push_back(&op);
      } else if (op.link >= 0 && op.s_joined) {
        op.c_joined = true;
        op.c_start = op.s_start;
        op.c_remaining = op.s_remaining;
      }
    }
    horizon_ = at;
    committed = true;
  };

  for (;;) {
    // Resolve whatever has become determinable; dependencies precede their
    // dependents in issue order, so one forward pass suffices.
    for (auto& sp : pending_) {
      PendingOp& op = *sp;
      if (op.s_start_known) continue;
      Time start = op.lower_bound;
      bool known = true;
      for (auto& d : op.deps) {
        if (d->final.load(std::memory_order_relaxed)) {
          start = std::max(start, d->end);
        } else if (d->s_end_known) {
          start = std::max(start, d->s_end);
        } else {
          known = false;
          break;
        }
      }
      if (!known) continue;
      op.s_start_known = true;
      op.s_start = start;
      if (op.link < 0) {
        op.s_end_known = true;
        op.s_end = start + op.duration;
      } else {
        op.s_join_at = start + op.duration;
      }
    }
    for (std::size_t l = 0; l < nlinks; ++l)
      if (dirty[l]) recompute_rates(l, t);

    Time next = kTimeInfinity;
    bool remaining_work = false;
    for (auto& sp : pending_) {
      PendingOp& op = *sp;
      if (!op.s_end_known) remaining_work = true;
      if (op.link < 0 || op.s_end_known) continue;
      if (op.s_joined) next = std::min(next, op.s_finish_at);
      else if (op.s_start_known) next = std::min(next, op.s_join_at);
    }

    if (!committed && next > now) {
      for (std::size_t l = 0; l < nlinks; ++l)
        for (PendingOp* f : active[l]) f->s_remaining -= f->s_rate * static_cast<double>(now - t);
      t = now;
      commit(now);
      for (std::size_t l = 0; l < nlinks; ++l)
        if (!active[l].empty()) recompute_rates(l, t);
    }
    if (committed) {
      if (target ? target->s_end_known : !to_end) break;
      if (!remaining_work) break;
    }
    if (next == kTimeInfinity) break;  // nothing can progress (cannot happen: deps precede dependents)

    for (std::size_t l = 0; l < nlinks; ++l)
      for (PendingOp* f : active[l]) f->s_remaining -= f->s_rate * static_cast<double>(next - t);
    t = next;
    for (auto& sp : pending_) {
      PendingOp& op = *sp;
      if (op.link < 0 || op.s_end_known) continue;
      if (!op.s_joined && op.s_start_known && op.s_join_at <= t) {
        op.s_joined = true;
        op.s_remaining = op.bytes;
        active[op.link].push_back(&op);
        dirty[op.link] = true;
      }
    }
    for (std::size_t l = 0; l < nlinks; ++l)
      if (dirty[l]) recompute_rates(l, t);
    for (std::size_t l = 0; l < nlinks; ++l) {
      auto& flows = active[l];
      for (auto it = flows.begin(); it != flows.end();) {
        PendingOp* f = *it;
        if (f->s_finish_at <= t) {
          f->s_end_known = true;
          f->s_end = t;
          it = flows.erase(it);
          dirty[l] = true;
        } else {
          ++it;
        }
      }
    }
  }

  Time result = 0;
  if (target) {
    result = target->s_end_known ? target->s_end : kTimeInfinity;
  } else {
    result = latest_end_;
    for (auto& sp : pending_)
      if (sp->s_end_known) result = std::max(result, sp->s_end);
  }
  if (!finished_by_now.empty()) {
    for (PendingOp* op : finished_by_now) finalize_locked(*op);
    std::erase_if(pending_, [](const std::shared_ptr<PendingOp>& p) { return p->final.load(std::memory_order_relaxed); });
  }
  return result;
}

Time Timeline::wait(const Completion& c) {
  if (!c.op_) {
    clock_.sleep_until(c.end_);
    return c.end_;
  }
  for (;;) {
    Time until;
    bool done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!c.op_->final.load(std::memory_order_relaxed)) resolve_locked(c.op_.get(), false);
      done = c.op_->final.load(std::memory_order_relaxed);
      until = done ? c.op_->end : c.op_->s_end;
    }
    clock_.sleep_until(until);
    if (done) return until;
  }
}

Time Timeline::wait(const Completion& c, const std::function<void(Time)>& sleep_until) {
  // A transfer joining a shared link can only delay c, so sleeping to the
  // provisional end never oversleeps.
  for (;;) {
    const Time end = end_time(c);
    if (query(c)) return end_time(c);
    sleep_until(end);
  }
}

bool Timeline::query(const Completion& c) {
  if (!c.op_) return c.end_ <= clock_.now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!c.op_->final.load(std::memory_order_relaxed)) resolve_locked(nullptr, false);
  return c.op_->final.load(std::memory_order_relaxed);
}

Time Timeline::end_time(const Completion& c) {
  if (!c.op_) return c.end_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (c.op_->final.load(std::memory_order_relaxed)) return c.op_->end;
  return resolve_locked(c.op_.get(), false);
}

Time Timeline::wait_all() {
  for (;;) {
    Time until;
    bool done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      until = pending_.empty() ? latest_end_ : resolve_locked(nullptr, true);
      done = pending_.empty();
    }
    clock_.sleep_until(until);
    if (done) return until;
  }
}

void Timeline::enable_trace(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracing_ = on;
}

void Timeline::add_host_span(HostSpan span) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tracing_) spans_.push_back(std::move(span));
}

std::vector<TraceRecord> Timeline::trace_records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

std::vector<HostSpan> Timeline::host_spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

TimelineStats Timeline::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace gpemu
