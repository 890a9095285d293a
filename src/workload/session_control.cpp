// Pausing, preempting and resuming a session's job: a request taken by every
// rank before the same step, the checkpoint written and read through the
// session's storage, the GPUs left and placed again.
#include <algorithm>
#include <memory>
#include <mutex>

#include "gpemu/session.h"
#include "workload/session_impl.h"

namespace gpemu {

using session_detail::Request;

void Session::pause(JobId id) { request_stop(id, false); }
void Session::preempt(JobId id) { request_stop(id, true); }

// Taken by each rank before the step after the one its furthest rank has
// started: no rank has started it, and every rank will.
void Session::request_stop(JobId id, bool preempt) {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  if (s.client || s.out.state != JobState::Running || s.pending == Request::Preempt) return;
  if (s.pending == Request::Pause && !preempt) return;
  if (s.pending == Request::None) s.stop_at = *std::max_element(s.last_step.begin(), s.last_step.end()) + 1;
  s.pending = preempt ? Request::Preempt : Request::Pause;
}

void Session::resume(JobId id) {
  Slot& s = slot(id);
  ClockEvent* wake = nullptr;
  {
    std::lock_guard lock(mu_);
    s.pending = Request::None;  // a request not yet taken is withdrawn
    if ((s.out.state == JobState::Paused || s.out.state == JobState::Preempted) && s.resumed) wake = s.resumed.get();
  }
  if (wake) wake->set();
}

// The job's checkpoint through the session's storage, one request from now
// (with mu_ held, so requests arrive in time order); when it ends.
Time Session::checkpoint_io(const Slot& s) {
  const Time now = clock_.now();
  if (!checkpoint_storage_ || s.job.checkpoint_bytes == 0) return now;
  return checkpoint_storage_->serve(now, s.job.checkpoint_bytes);
}

// At a rank's step boundary. A pause stops every rank before the same step,
// holding the GPUs; a preemption drains every GPU, writes the checkpoint
// once for the job, gives every rank's tensors back and leaves the GPUs;
// then on resume the job waits for the placement policy to give it its GPUs
// again (its Devices, the processes' contexts, stay), reads the checkpoint
// and every rank allocates its state again. The pause's span runs from the
// last rank stopping to the last rank going on.
void Session::between_steps(Slot& s, const StepBoundary& b) {
  const int ranks = static_cast<int>(s.last_step.size());
  std::unique_lock lock(mu_);
  s.last_step[static_cast<std::size_t>(b.rank())] = b.iterations();
  if (!s.stop) {
    if (s.pending == Request::None || b.iterations() != s.stop_at) return;
    s.stop = std::make_unique<Slot::Stop>(clock_);
    s.stop->at = s.stop_at;
    s.stop->pause.preempted = s.pending == Request::Preempt;
    s.pending = Request::None;
    s.out.state = s.stop->pause.preempted ? JobState::Preempted : JobState::Paused;
    s.resumed = std::make_unique<ClockEvent>(clock_);
  } else if (b.iterations() != s.stop->at) {
    return;  // a rank that went on while its peers leave the stop
  }
  Slot::Stop& st = *s.stop;
  ClockEvent& resumed = *s.resumed;
  const bool preempted = st.pause.preempted;
  lock.unlock();
  if (preempted) b.drain();
  lock.lock();
  if (++st.arrived == ranks) {
    st.pause.from = clock_.now();
    if (preempted) st.write_end = checkpoint_io(s) + s.job.checkpoint_save;
  }
  lock.unlock();
  if (preempted) {
    b.barrier();  // every GPU has drained and the checkpoint's end is known
    b.sleep_until(st.write_end);
    b.release_memory();
    lock.lock();
    const bool all = ++st.released == ranks;
    lock.unlock();
    if (all) leave_gpu(s);
  }
  resumed.wait();
  if (preempted) {
    if (b.rank() == 0) {
      {
        std::lock_guard relock(mu_);
        s.request.gpu = s.out.gpu;  // its Devices are on those GPUs
        if (ranks > 1) s.request.want = s.out.gpus;
      }
      enqueue(s);
      dispatch();
      s.placed->wait();
      {
        std::lock_guard relock(mu_);
        st.restore_end = checkpoint_io(s) + s.job.checkpoint_restore;
      }
      st.restarted.set();
    } else {
      st.restarted.wait();
    }
    b.sleep_until(st.restore_end);
    b.restore_memory();
  }
  lock.lock();
  if (++st.left < ranks) return;
  st.pause.to = clock_.now();
  s.out.pauses.push_back(st.pause);
  s.out.state = JobState::Running;
  s.stop.reset();
}

}  // namespace gpemu
