// The torch.ops.gpemu calls (docs/torch.md): what gpemu_torch's Python side
// asks of the backend beside torch's own CUDA calls (memory statistics,
// devices and streams, events, the emulated process group's values and
// collectives, the script's clocks and steps, the run's summary), the
// schemas of the PyTorch 2 kernels that backend.cpp's boxed kernel runs, and
// the emulated clock's C entry points for the script's C code (clock_shim.cpp).
// What they share with torch's CUDA slots is backend_state.h.
#include <ATen/ATen.h>
#include <c10/core/Stream.h>
#include <fmt/format.h>
#include <torch/library.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpemu/error.h"
#include "torch/backend_state.h"
#include "torch/op_rules.h"
#include "torch/runtime.h"

namespace gpemu::torch_backend {
namespace {

Runtime& rt() { return Runtime::instance(); }

// ---- control ops for the Python side (torch.ops.gpemu.*) -----------------------

int64_t op_device_count() { return rt().device_count(); }
std::string op_gpu_info() {
  const GpuSpec& g = rt().gpu();
  return fmt::format("{}|{}|{}|{}|{}", g.name, g.id, g.architecture, g.reported_memory(), g.sm_count);
}
std::vector<int64_t> op_memory_stats(int64_t device) {
  const AllocatorStats s = rt().memory_stats(static_cast<int>(device));
  // Freed by the script, held for other streams: not allocated (as PyTorch counts).
  const std::uint64_t deferred = deferred_bytes(static_cast<int>(device));
  return {static_cast<int64_t>(s.allocated_bytes - deferred),
          static_cast<int64_t>(s.peak_allocated_bytes),
          static_cast<int64_t>(s.reserved_bytes),
          static_cast<int64_t>(s.peak_reserved_bytes),
          static_cast<int64_t>(s.requested_bytes),
          static_cast<int64_t>(s.peak_requested_bytes),
          static_cast<int64_t>(s.active_blocks),
          static_cast<int64_t>(s.segments),
          static_cast<int64_t>(s.num_alloc_retries),
          static_cast<int64_t>(s.num_ooms),
          static_cast<int64_t>(s.num_device_alloc),
          static_cast<int64_t>(s.num_device_free)};
}
void op_empty_cache() {
  for (int i = 0; i < rt().device_count(); ++i) {
    process_deferred_frees(i, /*wait=*/true);
    rt().empty_cache(i);
  }
}
void op_reset_peak(int64_t device) { rt().reset_peak_stats(static_cast<int>(device)); }
void op_set_memory_fraction(double fraction, int64_t device) {
  rt().set_memory_fraction(static_cast<int>(device), fraction);
}
void op_synchronize(int64_t device) { rt().synchronize_device(static_cast<int>(device)); }
int64_t op_current_device() { return current_device(); }
void op_set_device(int64_t device) {
  check_device(static_cast<int>(device));
  set_current_device(static_cast<int>(device));
}
int64_t op_current_stream(int64_t device) { return current_stream(static_cast<int>(device)); }
void op_set_stream(int64_t device, int64_t stream) {
  rt().check_stream(static_cast<int>(device), stream);
  set_current_stream(static_cast<int>(device), stream);
}
int64_t op_create_stream(int64_t device) { return rt().create_stream(static_cast<int>(device)); }
void op_stream_synchronize(int64_t device, int64_t stream) { rt().synchronize(static_cast<int>(device), stream); }
bool op_stream_query(int64_t device, int64_t stream) { return rt().stream_query(static_cast<int>(device), stream); }
// The packed form torch._C.Stream(_cdata) takes (c10::Stream::pack).
int64_t op_stream_pack(int64_t device, int64_t stream) {
  return static_cast<int64_t>(c10::Stream(c10::Stream::UNSAFE, cuda_device(static_cast<int>(device)), stream).pack());
}
double op_now() { return to_seconds(rt().clock().now()); }
std::string op_section() {
  switch (current_section()) {
    case OpProgram::Section::Backward: return "backward";
    case OpProgram::Section::Optimizer: return "optimizer";
    default: return "forward";
  }
}
// Events made from Python (torch.cuda.Event): the runtime's ids.
int64_t op_event_create() { return rt().event_create(); }
void op_event_destroy(int64_t id) { rt().event_destroy(id); }
void op_event_record(int64_t id, int64_t device, int64_t stream) {
  rt().event_record(id, static_cast<int>(device), stream);
}
void op_event_wait(int64_t id, int64_t device, int64_t stream) {
  rt().event_wait(id, static_cast<int>(device), stream);
}
bool op_event_query(int64_t id) { return rt().event_query(id); }
void op_event_synchronize(int64_t id) { rt().event_synchronize(id); }
double op_event_elapsed_ms(int64_t start, int64_t end) {
  try {
    return rt().event_elapsed_ms(start, end);
  } catch (const InputError& e) {
    TORCH_CHECK(false, e.what());
  }
}

// The emulated NCCL process group's hooks (gpemu_torch/_dist.py).
c10::optional<at::Tensor> op_values_get(const at::Tensor& t) {
  at::Tensor v = read_values(t);
  if (!v.defined()) return c10::nullopt;
  return v;
}
void op_values_set(const at::Tensor& t, const at::Tensor& values) {
  TORCH_CHECK(t.is_cuda() && values.is_cpu(), "gpemu torch: values_set takes a CUDA tensor and host values");
  write_values(t, values);
}
int64_t op_stream_ready_ns(int64_t device, int64_t stream) {
  return rt().stream_ready_shared_ns(static_cast<int>(device), stream);
}
void op_collective(int64_t device, int64_t stream, std::string kind, int64_t bytes, int64_t world, int64_t start_ns) {
  TORCH_CHECK(bytes >= 0 && world >= 1, "gpemu torch: collective ", kind, " of ", bytes, " bytes among ", world,
              " ranks");
  try {
    rt().collective(static_cast<int>(device), stream, kind, static_cast<std::uint64_t>(bytes), static_cast<int>(world),
                    start_ns);
  } catch (const InputError& e) {
    TORCH_CHECK(false, "gpemu torch: ", e.what());
  }
}

double op_collective_seconds(std::string kind, int64_t bytes, int64_t world) {
  TORCH_CHECK(bytes >= 0 && world >= 1, "gpemu torch: collective ", kind, " of ", bytes, " bytes among ", world,
              " ranks");
  try {
    return to_seconds(rt().collective_duration(kind, static_cast<std::uint64_t>(bytes), static_cast<int>(world)));
  } catch (const InputError& e) {
    TORCH_CHECK(false, "gpemu torch: ", e.what());
  }
}

void op_host_span(std::string name, double start, double end) { rt().host_span(std::move(name), start, end); }
// The script's own clocks under the virtual clock (gpemu_torch/_clock.py).
int64_t op_now_ns() { return rt().clock().now(); }
void op_advance(double seconds) {
  try {
    rt().advance_host(seconds);
  } catch (const InputError& e) {
    TORCH_CHECK(false, "gpemu torch: ", e.what());
  }
}
// A step of the script began: "backward" or "marker" (gpemu_torch/_clock.py).
void op_step(std::string source) {
  TORCH_CHECK(source == "backward" || source == "marker", "gpemu torch: step source '", source,
              "': expected 'backward' or 'marker'");
  rt().note_step(source == "marker" ? StepSource::Marker : StepSource::Backward, current_device(),
                 current_stream(current_device()));
}
std::string op_step_marker() { return rt().settings().step_marker; }
bool op_virtual_clock() { return rt().clock().is_virtual(); }

bool op_set_model(std::string model) { return rt().set_model(model); }
std::string op_summary() { return rt().summary_json(); }
void op_finish() { rt().finish(); }
std::string op_op_class(std::string op, bool optimizer) { return std::string(zoo::to_string(classify(op, optimizer))); }

}  // namespace
}  // namespace gpemu::torch_backend

namespace gb = gpemu::torch_backend;

// The emulated clock for the script's C code (clock_shim.cpp attaches to these).
extern "C" __attribute__((visibility("default"))) long long gpemu_torch_now_ns() { return gb::op_now_ns(); }
extern "C" __attribute__((visibility("default"))) void gpemu_torch_advance_ns(long long ns) {
  try {
    gb::rt().advance_host(static_cast<double>(ns) / 1e9);
  } catch (const std::exception&) {  // NOLINT: a sleep the clock refuses is a sleep of nothing
  }
}

TORCH_LIBRARY(gpemu, m) {
  gb::install_cuda_slots();
  m.def("device_count() -> int", &gb::op_device_count);
  m.def("gpu_info() -> str", &gb::op_gpu_info);
  m.def("memory_stats(int device) -> int[]", &gb::op_memory_stats);
  m.def("empty_cache() -> ()", &gb::op_empty_cache);
  m.def("reset_peak_memory_stats(int device) -> ()", &gb::op_reset_peak);
  m.def("set_memory_fraction(float fraction, int device) -> ()", &gb::op_set_memory_fraction);
  m.def("synchronize(int device) -> ()", &gb::op_synchronize);
  m.def("current_device() -> int", &gb::op_current_device);
  m.def("set_device(int device) -> ()", &gb::op_set_device);
  m.def("current_stream(int device) -> int", &gb::op_current_stream);
  m.def("set_stream(int device, int stream) -> ()", &gb::op_set_stream);
  m.def("create_stream(int device) -> int", &gb::op_create_stream);
  m.def("stream_synchronize(int device, int stream) -> ()", &gb::op_stream_synchronize);
  m.def("stream_query(int device, int stream) -> bool", &gb::op_stream_query);
  m.def("now() -> float", &gb::op_now);
  m.def("stream_pack(int device, int stream) -> int", &gb::op_stream_pack);
  m.def("section() -> str", &gb::op_section);
  m.def("event_create() -> int", &gb::op_event_create);
  m.def("event_destroy(int id) -> ()", &gb::op_event_destroy);
  m.def("event_record(int id, int device, int stream) -> ()", &gb::op_event_record);
  m.def("event_wait(int id, int device, int stream) -> ()", &gb::op_event_wait);
  m.def("event_query(int id) -> bool", &gb::op_event_query);
  m.def("event_synchronize(int id) -> ()", &gb::op_event_synchronize);
  m.def("event_elapsed_ms(int start, int end) -> float", &gb::op_event_elapsed_ms);
  m.def("values_get(Tensor t) -> Tensor?", &gb::op_values_get);
  m.def("values_set(Tensor t, Tensor values) -> ()", &gb::op_values_set);
  m.def("stream_ready_ns(int device, int stream) -> int", &gb::op_stream_ready_ns);
  m.def("collective(int device, int stream, str kind, int bytes, int world, int start_ns) -> ()", &gb::op_collective);
  m.def("collective_seconds(str kind, int bytes, int world) -> float", &gb::op_collective_seconds);
  m.def("cpp_loop(bool enter) -> ()", &gb::note_cpp_loop);
  m.def("cpp_call(bool enter) -> ()", &gb::note_cpp_call);
  m.def("now_ns() -> int", &gb::op_now_ns);
  m.def("advance(float seconds) -> ()", &gb::op_advance);
  m.def("step(str source) -> ()", &gb::op_step);
  m.def("step_marker() -> str", &gb::op_step_marker);
  m.def("virtual_clock() -> bool", &gb::op_virtual_clock);
  m.def("host_span(str name, float start, float end) -> ()", &gb::op_host_span);
  m.def("set_model(str model) -> bool", &gb::op_set_model);
  m.def("summary() -> str", &gb::op_summary);
  m.def("finish() -> ()", &gb::op_finish);
  m.def("op_class(str op, bool optimizer) -> str", &gb::op_op_class);
  // PyTorch 2's kernels (shape_rules.cpp's add_torch2_rules): the boxed CUDA kernel runs them.
  m.def(
      "scaled_dot_product_attention(Tensor q, Tensor k, Tensor v, float p, bool causal, float scale, "
      "Tensor? attn_mask=None) -> (Tensor, Tensor)");
  m.def(
      "scaled_dot_product_attention_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "float p, bool causal, float scale, Tensor? attn_mask=None) -> (Tensor, Tensor, Tensor)");
  m.def(
      "_fused_adamw_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
      "Tensor(d!)[] max_exp_avg_sqs, Tensor[] state_steps, *, float lr, float beta1, float beta2, "
      "float weight_decay, float eps, bool amsgrad, bool maximize, Tensor? grad_scale=None, "
      "Tensor? found_inf=None) -> ()");
  m.def(
      "_fused_adam_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
      "Tensor(d!)[] max_exp_avg_sqs, Tensor[] state_steps, *, float lr, float beta1, float beta2, "
      "float weight_decay, float eps, bool amsgrad, bool maximize, Tensor? grad_scale=None, "
      "Tensor? found_inf=None) -> ()");
  m.def(
      "_fused_sgd_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] momentum_buffers, *, float weight_decay, "
      "float momentum, float lr, float dampening, bool nesterov, bool maximize, bool is_first_step, "
      "Tensor? grad_scale=None, Tensor? found_inf=None) -> ()");
}
