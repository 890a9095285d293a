// The torch runtime's CUDA events: here, the devices' Events; attached to
// gpemu serve, the server's, on the GPU each was last recorded on.
#include "torch/runtime.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::torch_backend {

Event& Runtime::local_event(std::int64_t id) {
  std::lock_guard lock(events_mutex_);
  const auto it = local_events_.find(id);
  if (it == local_events_.end()) throw InputError(fmt::format("CUDA event {}: no such event", id));
  return *it->second;
}

std::int64_t Runtime::event_create() {
  std::lock_guard lock(events_mutex_);
  const std::int64_t id = next_event_++;
  if (remote())
    remote_events_.emplace(id, -1);
  else
    local_events_.emplace(id, std::make_unique<Event>());
  return id;
}

void Runtime::event_destroy(std::int64_t id) {
  int recorded_on = -1;
  {
    std::lock_guard lock(events_mutex_);
    if (!remote()) {
      local_events_.erase(id);
      return;
    }
    const auto it = remote_events_.find(id);
    if (it == remote_events_.end()) return;
    recorded_on = it->second;
    remote_events_.erase(it);
  }
  if (recorded_on >= 0) post(recorded_on, {{"op", "event_free"}, {"event", id}});
}

int Runtime::remote_event_device(std::int64_t id, std::optional<int> record_on) {
  std::lock_guard lock(events_mutex_);
  const auto it = remote_events_.find(id);
  if (it == remote_events_.end()) throw InputError(fmt::format("CUDA event {}: no such event", id));
  const int before = it->second;
  if (record_on) it->second = *record_on;
  return before;
}

void Runtime::event_record(std::int64_t id, int device_index, std::int64_t stream_id) {
  if (!remote()) {
    stream(device_index, stream_id).record(local_event(id));
    return;
  }
  check_stream(device_index, stream_id);
  const int before = remote_event_device(id, device_index);
  if (before >= 0 && before != device_index) post(before, {{"op", "event_free"}, {"event", id}});
  post(device_index, {{"op", "record"}, {"event", id}, {"stream", stream_id}});
}

void Runtime::event_wait(std::int64_t id, int device_index, std::int64_t stream_id) {
  if (!remote()) {
    Event& e = local_event(id);
    if (e.recorded()) stream(device_index, stream_id).wait(e);
    return;
  }
  check_stream(device_index, stream_id);
  const int on = remote_event_device(id);
  if (on < 0) return;
  if (on == device_index) {
    post(device_index, {{"op", "wait"}, {"event", id}, {"stream", stream_id}});
  } else {
    // Another GPU's event: each GPU is its own client of the server, so the
    // host waits for it (later work on the stream is then ordered after it).
    call(on, {{"op", "event_sync"}, {"event", id}});
  }
}

bool Runtime::event_query(std::int64_t id) {
  if (!remote()) {
    Event& e = local_event(id);
    return !e.recorded() || e.query();
  }
  const int on = remote_event_device(id);
  return on < 0 || call(on, {{"op", "query"}, {"event", id}})["done"].get<bool>();
}

void Runtime::event_synchronize(std::int64_t id) {
  if (!remote()) {
    Event& e = local_event(id);
    if (e.recorded()) e.synchronize();
    return;
  }
  const int on = remote_event_device(id);
  if (on >= 0) call(on, {{"op", "event_sync"}, {"event", id}});
}

double Runtime::event_elapsed_ms(std::int64_t start, std::int64_t end) {
  const char* const not_recorded =
      "elapsed_time: both events must have been recorded (and created with enable_timing=True)";
  if (!remote()) {
    Event& a = local_event(start);
    Event& b = local_event(end);
    if (!a.recorded() || !b.recorded()) throw InputError(not_recorded);
    return to_ms(Event::elapsed(a, b));
  }
  const int on_a = remote_event_device(start), on_b = remote_event_device(end);
  if (on_a < 0 || on_b < 0) throw InputError(not_recorded);
  if (on_a != on_b) throw InputError("elapsed_time: the events were recorded on different GPUs");
  return call(on_a, {{"op", "elapsed"}, {"start", start}, {"end", end}})["ms"].get<double>();
}

}  // namespace gpemu::torch_backend
