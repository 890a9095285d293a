// The one-job case: a session that holds one job alone on its GPUs (gpemu
// train, analyze), and the job's record from its outcome.
#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "gpemu/session.h"

namespace gpemu {

SessionSpec session_for(const JobSpec& job) {
  validate(job);  // the job's own errors first, as Job would give them
  SessionSpec s;
  s.gpu = job.cluster.gpu;
  s.nodes = job.cluster.nodes;
  s.gpus_per_node = std::max(1, job.cluster.gpus / job.cluster.nodes);
  if (s.nodes * s.gpus_per_node != job.cluster.gpus) {  // GPUs that share no links, spread unevenly: one node
    s.nodes = 1;
    s.gpus_per_node = job.cluster.gpus;
  }
  s.exclusive = true;
  s.node = job.cluster.node;
  s.network = job.cluster.network;
  s.cpu_cores_per_node = job.data.model.cores;
  s.trace = job.trace;
  return s;
}

const RunRecord& record_of(const JobOutcome& o, bool keep_partial) {
  if (!o.record) {
    if (o.exception) std::rethrow_exception(o.exception);
    throw std::runtime_error(fmt::format("job {} ('{}') did not run: {}", o.id, o.name, o.error));
  }
  if (o.record->stopped && !keep_partial) std::rethrow_exception(o.record->stopped);
  return *o.record;
}

RunRecord run_alone(Clock& clock, const CostModel& costs, JobSpec job, JobObserver* observer) {
  Session session(clock, costs, session_for(job));
  const bool keep_partial = job.schedule.keep_partial;
  SessionJob one;
  one.name = "job";
  one.job = std::move(job);
  one.observer = observer;
  session.add_job(std::move(one));
  session.run();
  return record_of(session.outcome(0), keep_partial);
}

}  // namespace gpemu
