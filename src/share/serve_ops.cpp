// gpemu serve's server: a client's requests, one by one (hello, memory,
// kernels, copies, syncs, streams, events, smi, bye), on its device of the
// shared GPU (serve_server.h; docs/sharing.md has the protocol).
#include "share/serve_server.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/serve_request.h"
#include "share/serve_wire.h"

namespace gpemu {

using share_detail::fail;
using share_detail::hung_up;
using share_detail::request_demand;
using share_detail::request_int;
using share_detail::request_string;

namespace {

constexpr std::int64_t kMaxKernelNs = 3600 * kSecond;   // an hour per kernel
constexpr int kLaunchQueue = 1024;                      // kernels a client may have in flight, as CUDA's launch queue
constexpr std::size_t kMaxStreams = 1024;               // streams a client may create
constexpr std::size_t kMaxEvents = 1 << 16;             // events a client may hold at once
constexpr std::int64_t kMaxEventId = INT64_C(1) << 53;  // ids JSON numbers carry exactly

// How far ahead of now a client's kernels are put on the shared timeline.
constexpr Duration kIssueAhead = 20 * kMillisecond;

}  // namespace

// Sleeps until the server's time t in slices: the server stopping or the
// client hanging up (its process died: the kernel closed its socket) ends
// the wait with an Error that ends the client.
void ShareServer::Impl::sleep_until(const Client& c, Time t) {
  while (clock->now() < t) {
    if (stopping) throw Error("the server is stopping");
    if (hung_up(c.fd)) throw Error("the client hung up");
    clock->sleep_until(std::min<Time>(t, clock->now() + 20 * kMillisecond));
  }
}

nlohmann::json ShareServer::Impl::handle(Client& c, const nlohmann::json& m) {
  const std::string op = share_detail::request_op(m);
  if (op == "hello") {
    if (c.device || c.ran_job) return fail("protocol", "hello: this client has said hello already");
    const int g = static_cast<int>(request_int(m, "gpu", 0, o.gpus - 1, 0));
    const int priority = static_cast<int>(request_int(m, "priority", -1000, 1000, 0));
    const std::string mig = request_string(m, "mig", "");
    c.name = request_string(m, "name", "client");
    const bool slices = gpu(g).slices();
    if (slices && mig.empty())
      throw InputError(fmt::format("hello: policy mig: give 'mig', a profile of the {}", o.gpu->id));
    if (!slices && !mig.empty())
      throw InputError(fmt::format("hello: 'mig' is for policy mig, not {}", to_string(o.share.policy)));
    // Its process: a client of the session on GPU g (the placement is pinned).
    ClientHandle process = session->attach({c.name, g, 1, priority, mig});
    std::lock_guard lock(mu);
    c.process = std::move(process);
    c.device = &c.process.device();
    c.job = c.process.id();
    c.streams = {&c.device->default_stream()};
    c.gpu = g;
    c.priority = priority;
    c.mig = mig;
    return {{"ok", true},
            {"client", c.id},
            {"protocol", kServeProtocol},
            {"gpu",
             {{"index", g},
              {"id", o.gpu->id},
              {"name", o.gpu->name},
              {"policy", to_string(o.share.policy)},
              {"memory_bytes", c.device->allocator().capacity()}}}};
  }
  if (op == "smi") {
    nlohmann::json r = smi();
    r["ok"] = true;
    return r;
  }
  if (op == "bye") {
    release(c);  // before the reply: what it held is back when its bye returns
    return {{"ok", true}};
  }
  if (op == "job_steps") return job_steps(c, m);
  if (c.ran_job)
    return fail("protocol", fmt::format("'{}' after a job: this connection's process was the job, which "
                                        "has ended; it takes job_steps, smi and bye",
                                        op.substr(0, 40)));
  if (!c.device) return fail("protocol", fmt::format("'{}' before hello: say hello first", op));
  if (op == "job") return run_job(c, m);
  if (op != "memory") c.worked = true;
  Device& dev = *c.device;
  CachingAllocator& alloc = dev.allocator();
  // The stream a request names ("stream", default 0: the default stream).
  const auto stream_of = [&]() -> Stream& {
    const auto id = request_int(m, "stream", 0, static_cast<std::int64_t>(kMaxStreams), 0);
    if (static_cast<std::size_t>(id) >= c.streams.size())
      throw InputError(fmt::format("stream {}: this client has streams 0 to {}", id, c.streams.size() - 1));
    return *c.streams[static_cast<std::size_t>(id)];
  };
  // Waits on the clock in slices, so that stopping the server, or the
  // client hanging up, never waits for a long kernel of a client's.
  const auto wait_for = [&](const Completion& done) {
    return timeline().wait(done, [&](Time t) { sleep_until(c, t); });
  };
  const auto wait_stream = [&](Stream& s) {
    c.queued = 0;
    return wait_for(s.tail());
  };
  const auto event_of = [&](bool create) -> Client::Recorded& {
    const std::int64_t id = request_int(m, "event", 1, kMaxEventId, 0, true);
    auto it = c.events.find(id);
    if (it == c.events.end()) {
      if (!create) throw InputError(fmt::format("event {}: not an event this client recorded", id));
      if (c.events.size() >= kMaxEvents)
        throw InputError(fmt::format("event {}: this client holds {} events already (free some)", id, kMaxEvents));
      it = c.events.emplace(id, Client::Recorded{}).first;
    }
    return it->second;
  };
  const auto issue_kernel = [&](Stream& s) {
    const Duration ns = request_int(m, "ns", 0, kMaxKernelNs, 0, true);
    const KernelDemand demand{request_demand(m, "sm"), request_demand(m, "bw")};
    // A kernel goes on the shared GPU's timeline when the stream's work
    // before it is about to end, not when it is asked: what a client asked
    // and the GPU has not reached stays here (in its socket), so that a
    // client that dies or is dropped leaves at most one kernel behind it
    // for the others to wait for, as a dead process's context takes its
    // queued work with it (N3).
    sleep_until(c, timeline().end_time(s.tail()) - kIssueAhead);
    SharedGpu& shared = gpu(c.gpu);
    // Under fifo each request is one exclusive turn.
    const bool fifo = shared.exclusive_steps();
    if (fifo) {
      const Completion dep[] = {shared.begin_turn()};
      OpSpec w;
      w.trace = false;
      w.tag.name = "wait for the shared GPU";
      s.enqueue(w, std::nullopt, dep);
    }
    const Completion k = s.launch_kernel(ns, c.name, demand);
    if (fifo) shared.end_turn(k);
    record_kernel(c.gpu, k, ns, c.id);
    // CUDA's launch queue is bounded: a launch into a full one blocks
    // until the stream drains (and the timeline's pending work stays bounded).
    if (++c.queued >= kLaunchQueue) wait_stream(s);
  };
  if (op == "malloc") {
    const auto bytes =
        static_cast<std::uint64_t>(request_int(m, "bytes", 0, static_cast<std::int64_t>(kMaxByteSize), 0, true));
    const CachingAllocator::Ptr p = alloc.allocate(bytes, stream_of().id());
    if (p) c.live.insert(p);
    return {{"ok", true}, {"ptr", p}, {"size", p ? alloc.block_size(p) : 0}};
  }
  if (op == "free") {
    const auto p = static_cast<CachingAllocator::Ptr>(request_int(m, "ptr", 0, INT64_MAX, 0, true));
    if (p == 0) return {{"ok", true}};
    if (!c.live.erase(p)) return fail("input", fmt::format("free: {} is not a live allocation of this client", p));
    alloc.free(p);
    return {{"ok", true}};
  }
  if (op == "kernel") {
    issue_kernel(stream_of());
    return {{"ok", true}};
  }
  if (op == "copy") {
    Stream& s = stream_of();
    const std::string dir = request_string(m, "dir", "h2d");
    if (dir != "h2d" && dir != "d2h") throw InputError(fmt::format("copy: 'dir' is '{}': give h2d or d2h", dir));
    const auto bytes = static_cast<std::uint64_t>(request_int(m, "bytes", 0, std::int64_t{1} << 36, 0, true));
    const auto pinned = m.find("pinned");
    if (pinned != m.end() && !pinned->is_boolean()) throw InputError("copy: 'pinned' must be true or false");
    const HostMemoryKind kind =
        pinned == m.end() || pinned->get<bool>() ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
    // A pageable copy returns when done (the host copies through a staging
    // buffer); the Device blocks on the timeline for it, which cannot be
    // stopped: copies are bounded (64 GiB over the link) so it ends.
    if (dir == "h2d")
      s.copy_h2d(bytes, kind);
    else
      s.copy_d2h(bytes, kind);
    return {{"ok", true}};
  }
  if (op == "sync" || op == "batch") {
    Stream& s = stream_of();
    if (op == "batch") issue_kernel(s);
    if (const auto all = m.find("device"); all != m.end()) {
      if (!all->is_boolean()) throw InputError("sync: 'device' must be true or false");
      if (all->get<bool>()) {
        Time end = 0;
        for (Stream* t : c.streams) end = std::max(end, wait_stream(*t));
        return {{"ok", true}, {"end_ns", end}};
      }
    }
    return {{"ok", true}, {"end_ns", wait_stream(s)}};
  }
  if (op == "stream") {
    if (c.streams.size() >= kMaxStreams)
      throw InputError(fmt::format("stream: this client has {} streams, the most a client may have", kMaxStreams));
    // PyTorch's streams are non-blocking: no implicit order with the default stream.
    c.streams.push_back(&dev.create_stream(/*non_blocking=*/true));
    return {{"ok", true}, {"stream", c.streams.size() - 1}};
  }
  if (op == "record") {
    Stream& s = stream_of();
    Client::Recorded& e = event_of(/*create=*/true);
    s.record(*e.event);
    e.captured = s.tail();
    return {{"ok", true}};
  }
  if (op == "wait") {
    Stream& s = stream_of();
    s.wait(*event_of(/*create=*/false).event);
    return {{"ok", true}};
  }
  if (op == "query") {
    if (m.contains("event")) return {{"ok", true}, {"done", event_of(/*create=*/false).event->query()}};
    return {{"ok", true}, {"done", stream_of().query()}};
  }
  if (op == "event_sync") {
    Client::Recorded& e = event_of(/*create=*/false);
    return {{"ok", true}, {"end_ns", wait_for(e.captured)}};
  }
  if (op == "elapsed") {
    const std::int64_t a = request_int(m, "start", 1, kMaxEventId, 0, true);
    const std::int64_t b = request_int(m, "end", 1, kMaxEventId, 0, true);
    const auto ia = c.events.find(a), ib = c.events.find(b);
    if (ia == c.events.end() || ib == c.events.end())
      throw InputError(fmt::format("elapsed: event {} was not recorded by this client", ia == c.events.end() ? a : b));
    wait_for(ia->second.captured);
    wait_for(ib->second.captured);
    return {{"ok", true}, {"ms", to_ms(Event::elapsed(*ia->second.event, *ib->second.event))}};
  }
  if (op == "event_free") {
    c.events.erase(request_int(m, "event", 1, kMaxEventId, 0, true));
    return {{"ok", true}};
  }
  if (op == "empty_cache") {
    alloc.empty_cache();
    return {{"ok", true}};
  }
  if (op == "reset_peak") {
    alloc.reset_peak_stats();
    return {{"ok", true}};
  }
  if (op == "memory") {
    nlohmann::json r = allocator_stats_json(alloc.stats());
    r["ok"] = true;
    r["capacity_bytes"] = alloc.capacity();
    return r;
  }
  return fail("input", fmt::format("unknown op '{}'; ops: hello, malloc, free, kernel, copy, sync, batch, stream, "
                                   "record, wait, query, event_sync, elapsed, event_free, empty_cache, reset_peak, "
                                   "memory, job, job_steps, smi, bye",
                                   op.substr(0, 40)));
}

}  // namespace gpemu
