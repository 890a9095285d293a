// gpemu serve's server: a client's job ("job"), the engine's Job run on the
// client's GPU as gpemu share runs it, and its step ends ("job_steps")
// (serve_server.h).
#include "share/serve_server.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/share.h"
#include "share/job_entry.h"
#include "share/results.h"
#include "share/serve_request.h"
#include "share/serve_wire.h"

namespace gpemu {

using share_detail::fail;
using share_detail::hung_up;
using share_detail::request_int;

namespace {

// Step ends a "job" or "job_steps" reply carries at most (about 20 bytes
// each: well within a line).
constexpr std::size_t kStepsPerReply = 20'000;

}  // namespace

// Its kernels, as its job settles them, count in smi's utilisation.
class ShareServer::Impl::KernelsSeen final : public RecordSink {
 public:
  KernelsSeen(Impl& server, const Client& c) : server_(server), c_(c) {}
  void on_kernel(int, const KernelSpan& k) override {
    server_.record_kernel(c_.gpu, Completion::at(k.end), k.end - k.start, c_.id);
  }

 private:
  Impl& server_;
  const Client& c_;
};

// "job": the client's process is the engine's Job (job.h) on its GPU, the
// step loop `gpemu share` runs in one process: the same memory plan through
// its caching allocator, copies, kernels and policy turns. The hello's
// device (its context and slice) makes way for the job's own.
nlohmann::json ShareServer::Impl::run_job(Client& c, const nlohmann::json& m) {
  if (c.worked)
    return fail("protocol",
                "job: send it right after hello: the job is the whole process, and this one has asked for GPU work "
                "or memory already");
  const auto entry = m.find("job");
  if (entry == m.end() || !entry->is_object())
    throw InputError("job: 'job' must be an object, a job of a jobs file (docs/sharing.md, \"The jobs file\")");
  for (const auto& [key, why] :
       {std::pair<const char*, const char*>{"arrival_s", "the client starts it when it connects"},
        {"after", "a queue runs in one process (gpemu share)"},
        {"priority", "hello gives it"},
        {"mig", "hello gives it"},
        {"dataset", "a served job's batches are in memory (gpemu share runs loaders)"}})
    if (entry->contains(key)) throw InputError(fmt::format("job: '{}' is not for a served job: {}", key, why));
  std::optional<std::filesystem::path> profiles;
  if (const auto p = m.find("profiles"); p != m.end()) {
    if (!p->is_string() || p->get<std::string>().empty() || p->get<std::string>().size() > 4096 ||
        has_control_characters(p->get<std::string>()))
      throw InputError("job: 'profiles' must be a folder's path (at most 4096 bytes, no control characters)");
    profiles = p->get<std::string>();
  }
  const auto steps = m.find("steps");
  if (steps != m.end() && !steps->is_boolean()) throw InputError("job: 'steps' must be true or false");
  ShareSpec one;
  one.gpu = o.gpu;
  one.options = o.share;
  one.jobs = {share_detail::parse_job_entry(*entry, "job")};
  give_cost_models(one, profiles);  // InputError for an unknown model or host
  const SharedJobSpec& js = one.jobs.front();
  SessionJob job = share_detail::session_job(js, c.gpu);  // it arrives now
  job.priority = c.priority;                              // its hello's
  job.mig = c.mig;
  job.trace_row = c.gpu;  // its Device's index: the GPU's, as a hello's device
  // A client that hangs up, or the server stopping, ends its job at the next step.
  job.job.schedule.between_steps = [this, &c](const StepBoundary&) {
    if (stopping) throw Error("the server is stopping");
    if (hung_up(c.fd)) throw Error("the client hung up");
  };
  KernelsSeen seen(*this, c);
  job.job.record.sink = &seen;
  job.job.record.steps = steps != m.end() && steps->get<bool>();
  // smi counts the job's device while it is the client's process.
  job.on_start = [this, &c](Job& j) {
    std::lock_guard lock(mu);
    c.job_device = &j.device(0);
  };
  job.on_stop = [this, &c] {
    std::lock_guard lock(mu);
    c.job_device = nullptr;
  };
  {
    std::lock_guard lock(mu);
    c.streams.clear();
    c.device = nullptr;
    c.process.detach();
  }
  // It arrives now and runs on the session's host thread; its end is an
  // event of the session's, and its memory has gone back by then, as a
  // process's at its exit.
  const JobId id = session->add_job(std::move(job));
  {
    std::lock_guard lock(mu);
    c.job = id;
  }
  session->ended(id).wait();
  JobOutcome out = session->take_outcome(id);
  const SharedJobResult r = share_detail::job_result(js, *o.gpu, std::move(out));
  c.ran_job = true;
  c.job_step_ends = r.step_ends();
  c.job_step_samples = r.step_samples();
  nlohmann::json reply = {{"ok", true},
                          {"start_ns", r.arrival},
                          {"end_ns", r.end},
                          {"iterations", r.iterations()},
                          {"samples", r.samples()},
                          {"compute_busy_ns", r.compute_busy()},
                          {"peak_allocated_bytes", r.peak_allocated_bytes()},
                          {"peak_reserved_bytes", r.peak_reserved_bytes()},
                          {"error", r.error.empty() ? nlohmann::json() : nlohmann::json(r.error)},
                          {"steps", c.job_step_ends.size()}};
  add_steps(reply, c, 0);
  return reply;
}

void ShareServer::Impl::add_steps(nlohmann::json& reply, const Client& c, std::size_t from) {
  const std::size_t to = std::min(c.job_step_ends.size(), from + kStepsPerReply);
  reply["step_end_ns"] = std::vector<Time>(c.job_step_ends.begin() + from, c.job_step_ends.begin() + to);
  reply["step_samples"] = std::vector<std::int64_t>(c.job_step_samples.begin() + from, c.job_step_samples.begin() + to);
}

// "job_steps" {from}: the job's step ends from `from` on, a page at a time.
nlohmann::json ShareServer::Impl::job_steps(const Client& c, const nlohmann::json& m) {
  if (!c.ran_job) return fail("protocol", "job_steps: this connection has run no job");
  const auto from = request_int(m, "from", 0, static_cast<std::int64_t>(c.job_step_ends.size()), 0, true);
  nlohmann::json reply = {{"ok", true}};
  add_steps(reply, c, static_cast<std::size_t>(from));
  return reply;
}

}  // namespace gpemu
