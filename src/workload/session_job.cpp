// A session's job from its arrival to its end: waiting for the job it comes
// after and for its GPUs, its spec on them, built and run on its ranks' host
// threads, its outcome, its end told to the observers.
#include <algorithm>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "gpemu/session.h"
#include "workload/session_impl.h"
#include "workload/session_storage.h"

namespace gpemu {

namespace session_detail {

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    throw;  // the host's memory, not the job's: the run cannot go on
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

}  // namespace session_detail

using session_detail::error_text;
using session_detail::Request;

void Session::run_job(Slot& s) {
  JobOutcome& out = s.out;
  try {
    if (s.job.after) {
      Slot& before = slot(*s.job.after);
      before.ended.wait();
      out.arrival = std::max(clock_.now(), before.out.end + s.job.arrival);
    }
    clock_.sleep_until(out.arrival);
    out.start = out.end = out.arrival;
    s.request.gpu = s.job.gpu;
    enqueue(s);
    dispatch();
    s.placed->wait();
  } catch (const std::logic_error& e) {
    // Every other job has ended and the placement policy still keeps it queued.
    out.error =
        fmt::format("never started: placement policy '{}' kept it queued ({})", spec_.placement->name(), e.what());
    out.start = out.end = clock_.now();
    end_job(s);
    return;
  }
  {
    std::lock_guard lock(mu_);
    out.state = JobState::Running;
  }
  out.start = out.end = clock_.now();
  start_job(s);
  end_job(s);
}

// The job's spec on its GPUs: the session's card, its node's links (a job of
// several GPUs), the GPUs' shared views (a shared session), its node's CPUs
// and, with SessionSpec::data_storage, its node's disk.
JobSpec Session::placed_spec(Slot& s) {
  JobSpec j = s.job.job;
  const int per_node = spec_.gpus_per_node, node = s.out.gpu / per_node;
  // Its modelled loaders share the node's cores with the other jobs' (unless
  // the job states the machine's loader threads itself, or brings a pool). A
  // job of several nodes has them to itself (it takes whole nodes), and its
  // loaders take each node's own cores (node_loaders.h), not its first node's.
  pipeline::LoaderModelOptions& m = j.data.model;
  if (j.data.source == DataSource::Modelled && m.loader_threads == 0 && !m.cpu_pool && j.cluster.nodes == 1)
    m.cpu_pool = cpu_pools_[static_cast<std::size_t>(node)];
  // Its modelled loaders read the node's disk (or the shared store) with the
  // other jobs on it; those starting at this instant join it before any of
  // them reads, so that each reads its share from its first request.
  if (spec_.data_storage) {
    const bool own_nodes = j.cluster.nodes > 1 && !spec_.data_storage_shared;
    if (read_from_session_storage(j, *spec_.data_storage, spec_.data_storage_shared,
                                  own_nodes ? nullptr : data_shares_[static_cast<std::size_t>(node)]))
      clock_.yield_to_peers();
  }
  j.cluster.gpu = spec_.gpu;
  NodeGpus& on = j.cluster.on_node;
  on.timeline = timeline_.get();
  // Made by add_job for a job of several GPUs of one node; a job of several
  // nodes is a view of the session's nodes and network (on_cluster).
  {
    std::lock_guard live(live_mu_);  // a job added while the session runs may make a node's links
    on.node = j.cluster.nodes == 1 ? nodes_[static_cast<std::size_t>(node)].get() : nullptr;
  }
  on.gpus.clear();
  on.shares.clear();
  // A job of several nodes that uses their links reaches its GPUs' shared
  // views through its nodes (on_cluster, below).
  const bool view = j.cluster.nodes > 1 && network_, via_nodes = view && uses_links(j);
  auto share = [&](int g) { return ShareContext{gpus_[static_cast<std::size_t>(g)].get(), s.job.priority, s.job.mig}; };
  for (const int g : s.out.gpus) {
    on.gpus.push_back(j.cluster.nodes == 1 ? g % per_node : g);
    if (!spec_.exclusive && !via_nodes) on.shares.push_back(share(g));
  }
  ClusterGpus& c = j.cluster.on_cluster;
  c = {};
  if (view) {
    const std::size_t per = s.out.gpus.size() / static_cast<std::size_t>(j.cluster.nodes);
    for (std::size_t k = 0; k < s.out.gpus.size(); k += per) {
      const int n = s.out.gpus[k] / per_node;
      NodeGpus ng;
      ng.timeline = timeline_.get();
      ng.node = nodes_[static_cast<std::size_t>(n)].get();
      for (std::size_t i = k; i < k + per; ++i) {
        ng.gpus.push_back(s.out.gpus[i] % per_node);
        if (!spec_.exclusive) ng.shares.push_back(share(s.out.gpus[i]));
      }
      c.nodes.push_back(std::move(ng));
      c.network_nodes.push_back(n);
    }
    c.network = network_.get();
    j.cluster.network = spec_.network;
  }
  j.cluster.node.first_device_index = s.job.trace_row;
  j.schedule.keep_partial = true;
  j.schedule.between_steps = [this, &s, own = std::move(j.schedule.between_steps)](const StepBoundary& b) {
    if (own) own(b);
    between_steps(s, b);
  };
  j.trace = spec_.trace;
  return j;
}

// Builds the job on its GPUs and runs it: rank 0 on this thread, the others
// on theirs (run_rank); its record once every rank is done and its GPU work
// has completed.
void Session::start_job(Slot& s) {
  JobOutcome& out = s.out;
  // Made when it starts, so its context and weights take the GPU's memory
  // from then; destroyed at its end, giving them back.
  std::optional<Job> job;
  // on_stop, once on_start was called, before the Job goes (declared after it).
  struct Stop {
    const std::function<void()>* hook = nullptr;
    ~Stop() {
      if (hook && *hook) (*hook)();
    }
  } stop;
  std::vector<std::function<void()>> threads;
  try {
    job.emplace(clock_, s.job.costs ? *s.job.costs : costs_, placed_spec(s));
    out.devices = job->trace_devices();
    if (s.job.on_start) {
      stop.hook = &s.job.on_stop;
      s.job.on_start(*job);
    }
    threads = job->host_threads(s.job.observer);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    out.error = e.what();  // at its start: no context, no slice, no room for its weights, a bad spec
    out.exception = std::current_exception();
    return;  // end_job lets its other ranks' threads go
  }
  if (s.started) {
    s.bodies = std::move(threads);
    s.started->set();
    s.bodies.front()();
    for (std::size_t r = 1; r < s.rank_done.size(); ++r) s.rank_done[r]->wait();
  } else {
    threads.front()();  // one GPU: one host thread, this one
  }
  finish_outcome(*job, out);
}

void finish_outcome(Job& job, JobOutcome& out) {
  for (int g = 0; g < job.gpus(); ++g) job.device(g).synchronize();  // its work completes before its process exits
  out.record = job.record();
  const RunRecord& rec = *out.record;
  if (rec.stopped) {
    out.error = error_text(rec.stopped);
    out.exception = rec.stopped;
  }
  // Its end: its last GPU work (train steps and kernels).
  for (const RankRecord& rank : rec.ranks) {
    if (rank.train.steps > 0) out.end = std::max(out.end, rank.train.end);
    out.end = std::max(out.end, rank.last_kernel_end);
  }
}

// A rank after the first of a job of several GPUs, on a host thread of its own.
void Session::run_rank(Slot& s, int rank) {
  try {
    s.started->wait();
  } catch (const std::logic_error&) {
    // Nothing could start the job (every thread waits): its first thread
    // fails it the same way.
  }
  if (s.started->is_set() && !s.bodies.empty()) s.bodies[static_cast<std::size_t>(rank)]();
  s.rank_done[static_cast<std::size_t>(rank)]->set();
}

void Session::end_job(Slot& s) {
  {
    std::lock_guard lock(mu_);
    s.out.state = s.out.error.empty() ? JobState::Finished : JobState::Failed;
    s.pending = Request::None;
  }
  if (s.started) s.started->set();  // its other ranks' threads, when it never ran
  leave_gpu(s);
  for (const auto& observe : end_observers_) observe(*this, s.out);
  s.ended.set();
}

}  // namespace gpemu
