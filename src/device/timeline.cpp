#include "gpemu/timeline.h"
#include "device/pending_op.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <stdexcept>
#include <tuple>

namespace gpemu {

using detail::PendingOp;

// The discrete-event simulation of the pending operations, kept between
// resolutions. Events are join times (a transfer's start + latency) and
// finish times; a link's flows only change rate when a flow joins or leaves
// it, so only that link is water-filled again, and a flow's remaining bytes
// are brought forward only when its link is touched. Each event costs
// O(log events + flows on the touched links), so a resolution is near-linear
// in the operations and concurrent transfers it covers.
struct Timeline::Sim {
  bool valid = false;                           // the state below continues the last resolution
  Time now = -1;                                // the now that resolution committed at
  Time t = 0;                                   // simulated up to here
  std::size_t unknown = 0;                      // pending operations whose end is not known yet
  std::vector<std::vector<PendingOp*>> active;  // per link: joined, unfinished flows
  std::vector<std::uint64_t> version;           // per link: bumped by every water-fill
  std::vector<PendingOp*> running;              // per ShareRule::Priority link: the flow it runs, or null
  std::vector<char> dirty;
  std::vector<int> dirty_list;
  std::vector<PendingOp*> work;  // start now determinable
  using JoinEntry = std::tuple<Time, std::uint64_t, PendingOp*>;
  std::priority_queue<JoinEntry, std::vector<JoinEntry>, std::greater<>> joins;
  using FinishEntry = std::tuple<Time, int, std::uint64_t>;  // earliest finish on a link, link, version
  std::priority_queue<FinishEntry, std::vector<FinishEntry>, std::greater<>> finishes;
  std::set<std::string, std::less<>> names;
  std::shared_ptr<detail::OpPool> pool = std::make_shared<detail::OpPool>();
};

bool Completion::resolved() const { return !op_ || op_->final.load(std::memory_order_acquire); }
Time Completion::known_end() const {
  if (op_ && op_->final.load(std::memory_order_acquire)) return op_->end;
  return end_;
}

Time Completion::known_start(Duration duration) const {
  if (op_ && op_->final.load(std::memory_order_acquire)) return op_->start;
  return known_end() - duration;
}

Timeline::Timeline(Clock& clock) : clock_(clock), sim_(std::make_unique<Sim>()) {}
Timeline::~Timeline() = default;

const Link& Timeline::add_link(std::string name, double capacity, bool shared, LinkShare share) {
  if (!(share.contended_efficiency > 0 && share.contended_efficiency <= 1))
    throw std::invalid_argument("Timeline::add_link: contended_efficiency must be in (0, 1]");
  std::lock_guard<std::mutex> lock(mutex_);
  links_.emplace_back(new Link(std::move(name), capacity, static_cast<int>(links_.size()), share));
  link_shared_.push_back(shared);
  sim_->valid = false;
  return *links_.back();
}

Time Timeline::issue_time() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::max(clock_.now(), horizon_);
}

namespace {
// Time to move bytes at rate (bytes per ns), rounded up to whole ns; never
// for a transfer at rate 0 (one a ShareRule::Priority link holds back).
Duration transfer_ns(double bytes, double rate) {
  if (bytes <= 0) return 0;
  if (rate <= 0) return kTimeInfinity;
  return static_cast<Duration>(std::ceil(bytes / rate - 1e-9));
}
double per_ns(double bytes_per_s) { return bytes_per_s * 1e-9; }
}  // namespace

void Timeline::record_locked(const TraceTag& tag, Time start, Time end) {
  records_.push_back(
      TraceRecord{std::string(tag.name), std::string(tag.category), tag.device, tag.stream, tag.engine, start, end});
}

const std::string* Timeline::intern_locked(std::string_view s) {
  auto it = sim_->names.find(s);
  if (it == sim_->names.end()) it = sim_->names.emplace(s).first;
  return &*it;
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
  if (!has_pending && (!is_flow || (!link_shared_[spec.link->index_] && !spec.link2))) {
    // Fast path: nothing this operation depends on can still move.
    Time end = lb + spec.duration;
    if (is_flow) end += transfer_ns(spec.bytes, std::min(cap, link_cap));
    if (tracing_ && spec.trace) record_locked(spec.tag, lb, end);
    latest_end_ = std::max(latest_end_, end);
    return Completion::at(end);
  }
  ++stats_.ops_pending_path;
  auto op = std::allocate_shared<PendingOp>(detail::OpAllocator<PendingOp>(sim_->pool));
  op->seq = next_seq_++;
  op->lower_bound = lb;
  op->duration = spec.duration;
  op->link = is_flow ? spec.link->index_ : -1;
  op->link2 = is_flow && spec.link2 && spec.link2 != spec.link ? spec.link2->index_ : -1;
  op->bytes = spec.bytes;
  op->cap = is_flow ? std::min(cap, link_cap) : 0;
  op->priority = spec.priority;
  op->sm_demand = spec.sm_demand;
  op->bw_demand = spec.bw_demand;
  for (const Completion& d : deps)
    if (d.op_ && !d.op_->final.load(std::memory_order_relaxed)) {
      op->deps.push_back(d.op_);
      d.op_->dependents.push_back(op.get());
    }
  // Traced when tracing is on at issue, as the fast path records then.
  op->trace = spec.trace && tracing_;
  if (op->trace) {
    op->name = intern_locked(spec.tag.name);
    op->category = intern_locked(spec.tag.category);
  }
  op->device = spec.tag.device;
  op->stream = spec.tag.stream;
  op->engine = spec.tag.engine;
  pending_.push_back(op);
  if (sim_->valid) append_locked(*op);
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
  op.dependents.clear();
  latest_end_ = std::max(latest_end_, op.end);
  if (tracing_ && op.trace) {
    records_.push_back(TraceRecord{*op.name, *op.category, op.device, op.stream, op.engine, op.start, op.end});
  }
}

// Adds an operation issued after the last resolution to its simulation when
// that gives what a rebuild would: the operation cannot act before the
// simulated time (it waits for something not yet simulated, or joins its link
// later). Otherwise the next resolution rebuilds.
void Timeline::append_locked(PendingOp& op) {
  Sim& sim = *sim_;
  op.s_start_known = op.s_end_known = op.s_joined = false;
  op.s_remaining = op.bytes;
  op.s_unknown = 0;
  Time start = op.lower_bound;
  for (auto& d : op.deps) {
    if (d->final.load(std::memory_order_relaxed)) {
      start = std::max(start, d->end);
    } else if (d->s_end_known) {
      start = std::max(start, d->s_end);
    } else {
      ++op.s_unknown;
    }
  }
  ++sim.unknown;
  if (op.s_unknown > 0) return;  // its start comes from an event not yet simulated
  if (op.link < 0) {
    if (start + op.duration <= sim.now) {
      sim.valid = false;  // would be committed now: leave that to a rebuild
      return;
    }
    op.s_start_known = op.s_end_known = true;
    op.s_start = start;
    op.s_end = start + op.duration;
    --sim.unknown;
    return;
  }
  if (start + op.duration <= sim.t) {
    sim.valid = false;  // it would have joined its link in the simulated past
    return;
  }
  op.s_start_known = true;
  op.s_start = start;
  op.s_join_at = start + op.duration;
  sim.joins.emplace(op.s_join_at, op.seq, &op);
}

// Rebuilds the simulation from the state committed at the horizon.
void Timeline::restart_locked(Time now) {
  Sim& sim = *sim_;
  ++stats_.restarts;
  stats_.ops_loaded += pending_.size();
  const std::size_t nlinks = links_.size();
  sim.valid = true;
  sim.now = now;
  sim.t = horizon_;
  sim.unknown = pending_.size();
  sim.active.assign(nlinks, {});
  sim.version.assign(nlinks, 0);
  sim.running.assign(nlinks, nullptr);
  sim.dirty.assign(nlinks, 0);
  sim.dirty_list.clear();
  sim.work.clear();
  sim.joins = {};
  sim.finishes = {};
  for (auto& sp : pending_) {
    PendingOp& op = *sp;
    op.s_start_known = op.s_end_known = op.s_joined = false;
    op.s_remaining = op.bytes;
    op.s_unknown = 0;
    for (auto& d : op.deps)
      if (!d->final.load(std::memory_order_relaxed)) ++op.s_unknown;
    if (op.c_joined) {
      op.s_start_known = op.s_joined = true;
      op.s_start = op.c_start;
      op.s_remaining = op.c_remaining;
      op.s_rem_t = horizon_;
      op.s_share[0] = op.s_share[1] = std::numeric_limits<double>::infinity();
      if (op.c_running) sim.running[op.link] = &op;
      for (int l : {op.link, op.link2}) {
        if (l < 0) continue;
        sim.active[l].push_back(&op);
        if (!sim.dirty[l]) {
          sim.dirty[l] = 1;
          sim.dirty_list.push_back(l);
        }
      }
    } else if (op.s_unknown == 0) {
      sim.work.push_back(&op);
    }
  }
}

// A discrete-event simulation of the pending operations from the committed
// horizon. Fixed-cost operations resolve as soon as their dependencies do;
// transfers join their link at start + latency and progress at the link's
// max-min fair share until their bytes are moved.
Time Timeline::resolve_locked(PendingOp* target, bool to_end) {
  ++stats_.resolutions;
  Sim& sim = *sim_;
  const Time now = std::max(clock_.now(), horizon_);
  // Continuing is exact: the last resolution committed at this same now and
  // everything issued since acts after the simulated time (append_locked).
  bool committed = sim.valid && sim.now == now;
  if (!committed) restart_locked(now);
  Time& t = sim.t;
  std::vector<PendingOp*> finished_by_now;

  auto end_known = [&](PendingOp& op, Time end) {
    op.s_end_known = true;
    op.s_end = end;
    --sim.unknown;
    for (PendingOp* d : op.dependents)
      if (--d->s_unknown == 0) sim.work.push_back(d);
  };
  // Resolves whatever has become determinable: an operation starts once all
  // it depends on has ended; a fixed-cost one then ends, which may make more
  // determinable.
  auto drain = [&] {
    while (!sim.work.empty()) {
      PendingOp& op = *sim.work.back();
      sim.work.pop_back();
      Time start = op.lower_bound;
      for (auto& d : op.deps) start = std::max(start, d->final.load(std::memory_order_relaxed) ? d->end : d->s_end);
      op.s_start_known = true;
      op.s_start = start;
      if (op.link < 0) {
        end_known(op, start + op.duration);
      } else {
        op.s_join_at = start + op.duration;
        sim.joins.emplace(op.s_join_at, op.seq, &op);
      }
    }
  };
  auto advance = [&](int l, Time at) {
    for (PendingOp* f : sim.active[l]) {
      const Time dt = at - f->s_rem_t;
      if (dt != 0) f->s_remaining -= f->s_rate * static_cast<double>(dt);
      f->s_rem_t = at;
    }
  };
  auto mark_dirty = [&](int l) {
    if (!sim.dirty[l]) {
      sim.dirty[l] = 1;
      sim.dirty_list.push_back(l);
    }
  };
  // Max-min fair shares (water-filling over the per-flow caps), in a total
  // order so the result does not depend on the order flows joined in.
  auto water_fill = [&](int l, Time at) {
    auto& flows = sim.active[l];
    std::erase_if(flows, [](const PendingOp* f) { return f->s_end_known; });  // finished on their other link
    advance(l, at);
    // A flow that also crosses another link is capped here at what it got there.
    auto cap_here = [l](const PendingOp* f) {
      return f->link2 < 0 ? f->cap : std::min(f->cap, f->s_share[f->link == l ? 1 : 0]);
    };
    std::sort(flows.begin(), flows.end(), [&](const PendingOp* a, const PendingOp* b) {
      const double ca = cap_here(a), cb = cap_here(b);
      return ca != cb ? ca < cb : a->seq < b->seq;
    });
    const LinkShare& rule = links_[l]->share();
    double left = per_ns(links_[l]->capacity_bytes_per_s());
    if (rule.rule == ShareRule::TimeSlice && flows.size() > 1) left *= rule.contended_efficiency;
    // Demand: one slowdown for all, from the busiest of SMs and memory bandwidth.
    double demand = 1;
    if (rule.rule == ShareRule::Demand) {
      double sm = 0, bw = 0;
      for (const PendingOp* f : flows) {
        sm += f->sm_demand;
        bw += f->bw_demand;
      }
      demand = std::max({1.0, sm, bw});
    }
    // Priority: the running transfer keeps the link to its end; then the
    // highest priority goes, the first joined among equals.
    PendingOp* run = nullptr;
    if (rule.rule == ShareRule::Priority && !flows.empty()) {
      run = sim.running[l];
      if (!run || std::find(flows.begin(), flows.end(), run) == flows.end()) {
        run = *std::min_element(flows.begin(), flows.end(), [](const PendingOp* a, const PendingOp* b) {
          return std::tie(b->priority, a->s_join_at, a->seq) < std::tie(a->priority, b->s_join_at, b->seq);
        });
      }
      sim.running[l] = run;
    }
    std::size_t n = flows.size();
    Time first = kTimeInfinity;
    for (PendingOp* f : flows) {
      double share = left / static_cast<double>(n--);
      if (rule.rule == ShareRule::Demand) share = per_ns(links_[l]->capacity_bytes_per_s()) / demand;
      if (rule.rule == ShareRule::Priority) share = f == run ? left : 0;
      f->s_rate = std::min(cap_here(f), share);
      f->s_share[f->link == l ? 0 : 1] = f->s_rate;
      if (rule.rule == ShareRule::MaxMin || rule.rule == ShareRule::TimeSlice) left -= f->s_rate;
      f->s_finish_at = f->s_rate > 0 ? at + transfer_ns(f->s_remaining, f->s_rate) : kTimeInfinity;
      first = std::min(first, f->s_finish_at);
    }
    ++stats_.water_fills;
    stats_.flow_rate_updates += flows.size();
    ++sim.version[l];
    if (first != kTimeInfinity) sim.finishes.emplace(first, l, sim.version[l]);
    sim.dirty[l] = 0;
  };
  auto refill_dirty = [&](Time at) {
    for (int l : sim.dirty_list)
      if (sim.dirty[l]) water_fill(l, at);
    sim.dirty_list.clear();
  };
  auto next_finish = [&] {
    while (!sim.finishes.empty()) {
      const auto& [when, l, v] = sim.finishes.top();
      if (v == sim.version[l]) return when;
      sim.finishes.pop();
    }
    return kTimeInfinity;
  };

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
        op.c_running = sim.running[op.link] == &op;
      }
    }
    horizon_ = at;
    committed = true;
  };

  // Flows that join at `at`, in issue order (as flows joining at one instant always joined).
  auto absorb_joins = [&](Time at) {
    if (sim.joins.empty() || std::get<0>(sim.joins.top()) > at) return;
    std::vector<PendingOp*> joining;
    while (!sim.joins.empty() && std::get<0>(sim.joins.top()) <= at) {
      joining.push_back(std::get<2>(sim.joins.top()));
      sim.joins.pop();
    }
    std::sort(joining.begin(), joining.end(), [](const PendingOp* a, const PendingOp* b) { return a->seq < b->seq; });
    for (PendingOp* op : joining) {
      op->s_joined = true;
      op->s_remaining = op->bytes;
      op->s_rem_t = at;
      op->s_rate = 0;
      op->s_share[0] = op->s_share[1] = std::numeric_limits<double>::infinity();
      for (int l : {op->link, op->link2}) {
        if (l < 0) continue;
        sim.active[l].push_back(op);
        mark_dirty(l);
      }
    }
  };

  for (;;) {
    drain();
    // What joins now joins before the links are shared out again: a kernel
    // that follows one that just ended on its stream is there when a
    // Priority link picks its next kernel, as on a GPU whose queue holds it.
    absorb_joins(t);
    refill_dirty(t);
    const Time next = std::min(next_finish(), sim.joins.empty() ? kTimeInfinity : std::get<0>(sim.joins.top()));

    if (!committed && next > now) {
      t = now;
      for (std::size_t l = 0; l < links_.size(); ++l) advance(static_cast<int>(l), now);
      commit(now);
      for (std::size_t l = 0; l < links_.size(); ++l)
        if (!sim.active[l].empty()) water_fill(static_cast<int>(l), now);
    }
    if (committed) {
      if (target ? target->s_end_known : !to_end) break;
      if (sim.unknown == 0) break;
    }
    if (next == kTimeInfinity) break;  // nothing can progress (cannot happen: deps precede dependents)

    ++stats_.events;
    t = next;
    absorb_joins(t);
    refill_dirty(t);
    std::vector<int> finishing;
    while (!sim.finishes.empty() && std::get<0>(sim.finishes.top()) <= t) {
      const auto [when, l, v] = sim.finishes.top();
      sim.finishes.pop();
      if (v == sim.version[l]) finishing.push_back(l);
    }
    for (int l : finishing) {
      advance(l, t);
      auto& flows = sim.active[l];
      std::size_t kept = 0;
      for (PendingOp* f : flows) {
        if (f->s_end_known) continue;  // finished on its other link: dropped here
        if (f->s_finish_at <= t) {
          end_known(*f, t);
          if (sim.running[l] == f) sim.running[l] = nullptr;
          // Its other link (a switch that may carry a thousand flows) drops
          // it when next water-filled, at this same t, which also brings the
          // other flows' bytes forward: one pass per link and event, not one
          // per finishing flow.
          if (f->link2 >= 0) mark_dirty(f->link == l ? f->link2 : f->link);
        } else {
          flows[kept++] = f;
        }
      }
      flows.resize(kept);
      mark_dirty(l);
    }
  }

  Time result = 0;
  if (target) {
    result = target->s_end_known ? target->s_end : kTimeInfinity;
  } else if (to_end) {
    // Only wait_all needs the latest end; a query must not cost a scan.
    result = latest_end_;
    for (auto& sp : pending_)
      if (sp->s_end_known) result = std::max(result, sp->s_end);
  }
  if (!finished_by_now.empty()) {
    for (PendingOp* op : finished_by_now) finalize_locked(*op);
    std::erase_if(pending_,
                  [](const std::shared_ptr<PendingOp>& p) { return p->final.load(std::memory_order_relaxed); });
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

void Timeline::cancel(const Completion& c) {
  if (!c.op_) return;  // issued on the fast path: its end was fixed at issue
  std::lock_guard<std::mutex> lock(mutex_);
  PendingOp& op = *c.op_;
  if (op.final.load(std::memory_order_relaxed)) return;
  resolve_locked(nullptr, false);  // commits every flow's progress up to now
  if (op.final.load(std::memory_order_relaxed)) return;
  // No end before the committed horizon (now): what was committed stays.
  const Time now = horizon_;
  if (op.s_start_known && op.s_start <= now) {
    op.duration = std::min(op.duration, now - op.s_start);  // started: its latency ends by now
  } else {
    op.lower_bound = now;
    op.duration = 0;
  }
  op.bytes = 0;
  op.c_remaining = 0;
  sim_->valid = false;  // the next resolution rebuilds from the committed state
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
