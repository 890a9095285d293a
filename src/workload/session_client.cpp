// A session's clients (session.h, ClientSpec, Session::attach): processes
// driven from outside, op by op, that are jobs of the session: their slots,
// placed as they attach, their Devices, their end.
#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/session.h"
#include "workload/session_impl.h"

namespace gpemu {

using session_detail::check_placement;
using session_detail::error_text;

// A client's slot, running on the GPUs the placement policy gives it now.
JobId Session::add_client(const ClientSpec& c) {
  std::lock_guard live(live_mu_);
  if (ran_ && !spec_.open) throw std::logic_error("Session::attach after run() on a session that is not open");
  if (closed_) throw std::logic_error("Session::attach after close()");
  const auto id = static_cast<JobId>(slots_.size());
  const std::string who = fmt::format("session: client {} ('{}')", id, one_line_message(c.name));
  const int gpn = spec_.gpus_per_node;
  if (c.gpus < 1 || c.gpus > gpn)
    throw InputError(fmt::format("{}: gpus {}: give 1 to {} (a node's GPUs)", who, c.gpus, gpn));
  if (c.gpu < -1 || c.gpu >= gpus())
    throw InputError(
        fmt::format("{}: gpu {}: give -1 (the placement policy's choice) or 0 to {}", who, c.gpu, gpus() - 1));
  if (c.gpu >= 0 && c.gpu % gpn + c.gpus > gpn)
    throw InputError(
        fmt::format("{}: gpu {} and {} GPUs from it: they pass node {}'s last GPU", who, c.gpu, c.gpus, c.gpu / gpn));
  if (spec_.exclusive && !c.mig.empty())
    throw InputError(fmt::format("{}: mig '{}': an exclusive session's GPUs are whole cards", who, c.mig));
  auto s = std::make_unique<Slot>(clock_);
  s->client = true;
  s->job.name = c.name;
  s->job.gpu = c.gpu;
  s->job.priority = c.priority;
  s->job.mig = c.mig;
  s->job.job.cluster.gpus = c.gpus;
  s->last_step.assign(1, -1);
  s->request = PlacementRequest{id, c.gpu, clock_.now(), c.gpus, {}, 1};
  JobOutcome& out = s->out;
  out.id = id;
  out.name = c.name;
  out.arrival = out.start = out.end = s->request.queued;
  {
    std::lock_guard lock(mu_);
    const std::vector<GpuLoad> loads = loads_locked();
    std::vector<int> gs = spec_.placement->place_gpus(s->request, loads);
    if (!gs.empty()) check_placement(*spec_.placement, id, s->request, gs, gpus(), gpn);
    if (gs.empty() || (spec_.exclusive && std::any_of(gs.begin(), gs.end(), [&](int g) { return gpu_jobs_[g] > 0; })))
      throw Error(
          fmt::format("{}: placement policy '{}' gives it no GPU now{} (a client is placed as it attaches, "
                      "or refused)",
                      who, spec_.placement->name(),
                      spec_.exclusive ? ", or only GPUs that hold a job (an exclusive session's hold one)" : ""));
    for (const int g : gs) ++gpu_jobs_[static_cast<std::size_t>(g)];
    out.gpu = gs.front();
    out.gpus = std::move(gs);
    out.state = JobState::Running;
    s->on_gpu = true;
  }
  slots_.push_back(std::move(s));
  return id;
}

// The client's end, now: what ended it (null: it detached), its GPUs left,
// the observers told, its end event set.
void Session::end_client(JobId id, std::exception_ptr error) {
  Slot& s = slot(id);
  s.out.end = std::max(s.out.start, clock_.now());
  if (error) {
    s.out.error = error_text(error);
    s.out.exception = error;
  }
  end_job(s);
}

ClientHandle Session::attach(ClientSpec client) {
  const JobId id = add_client(client);
  std::vector<int> placed = outcome(id).gpus;
  std::vector<std::unique_ptr<Device>> devices;
  try {
    for (const int g : placed) {
      DeviceOptions d;
      d.index = g;
      if (!spec_.exclusive) d.share = ShareContext{&gpu(g), client.priority, client.mig};
      devices.push_back(std::make_unique<Device>(*timeline_, *spec_.gpu, d));
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    // No room for its context, no slice: a process that never started.
    devices.clear();
    end_client(id, std::current_exception());
    throw;
  }
  ClientHandle h;
  h.session_ = this;
  h.id_ = id;
  h.gpus_ = std::move(placed);
  h.devices_ = std::move(devices);
  return h;
}

ClientHandle::ClientHandle(ClientHandle&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      id_(std::exchange(other.id_, -1)),
      gpus_(std::move(other.gpus_)),
      devices_(std::move(other.devices_)) {}

ClientHandle& ClientHandle::operator=(ClientHandle&& other) noexcept {
  if (this == &other) return *this;
  try {
    detach();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an observer's error; this one has ended all the same
  }
  session_ = std::exchange(other.session_, nullptr);
  id_ = std::exchange(other.id_, -1);
  gpus_ = std::move(other.gpus_);
  devices_ = std::move(other.devices_);
  return *this;
}

ClientHandle::~ClientHandle() {
  try {
    detach();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an observer's error; the client has ended all the same
  }
}

int ClientHandle::gpu(int rank) const {
  if (rank < 0 || rank >= gpus())
    throw InputError(fmt::format("client {}: rank {}: it has {} GPU(s)", id_, rank, gpus()));
  return gpus_[static_cast<std::size_t>(rank)];
}

Device& ClientHandle::device(int rank) {
  if (!session_) throw std::logic_error("ClientHandle::device: the client is not attached");
  gpu(rank);  // in range
  return *devices_[static_cast<std::size_t>(rank)];
}

void ClientHandle::detach() {
  Session* session = std::exchange(session_, nullptr);
  if (!session) return;
  devices_.clear();  // the process exits: its contexts and memory go back
  session->end_client(id_, nullptr);
}

}  // namespace gpemu
