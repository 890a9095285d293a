// The c10/ATen half of the torch backend (docs/torch.md): fills the slots a
// CPU-only torch build leaves empty for CUDA (../shared/design/TORCH.md):
//  - the device guard for DeviceType::CUDA: device count, per-thread current
//    device and stream, events (gpemu events on gpemu streams);
//  - the CUDA allocator: tensors' bytes come from the emulated device's
//    caching allocator (their data pointers are device addresses that nothing
//    on the host reads);
//  - kernels for DispatchKey::CUDA: factories, views, resize_, copy_ (host
//    to device, device to host, device to device), item(), pinning, and one
//    boxed kernel for every other op: it runs the op on shape-only (meta)
//    copies of its arguments (or by a shape rule of its own where torch
//    1.13 has no meta kernel, or where a composite would pick a CUDA library
//    path), makes CUDA outputs of the shapes that come back, and charges the
//    op's time on the current stream through the runtime (runtime.h).
// Values: tensors on an emulated GPU hold no data, except small ones the host
// filled: a storage of at most kValueBytes written by a host-to-device copy
// (or a device copy of such a one, or the process group's exchange) keeps
// those values until an op writes to it, so copying it back, item() and
// DDP's parameter check read them. Everything else copied back to the host
// reads zero (docs/torch.md says what that changes).
// The torch.ops.gpemu calls of gpemu_torch's Python side are gpemu_ops.cpp;
// what they share with these slots (the thread's device, stream and phase,
// the allocator's deferred frees, the host's values) is backend_state.h.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <torch/library.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "gpemu/error.h"
#include "torch/backend_state.h"
#include "torch/op_rules.h"
#include "torch/runtime.h"
#include "torch/shape_rules.h"

namespace gpemu::torch_backend {
namespace {

Runtime& rt() { return Runtime::instance(); }

// ---- current device and stream (per thread, as CUDA's) ---------------------

thread_local int t_device = 0;
thread_local std::array<std::int64_t, kMaxTorchGpus> t_stream{};

int device_of(c10::Device d) { return d.has_index() ? d.index() : t_device; }
// c10's event handles (void*) carry the runtime's event ids.
std::int64_t event_id(void* event) { return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(event)); }

}  // namespace

void check_device(int index) {
  const int n = rt().device_count();
  TORCH_CHECK(index >= 0 && index < n, "CUDA device ", index, " does not exist: gpemu torch emulates ", n, " GPU",
              n == 1 ? "" : "s", " (--gpus)");
}

namespace {

// Sets the thread's current device for a scope (the allocator reads it).
struct DeviceScope {
  explicit DeviceScope(int d) : saved(t_device) { t_device = d; }
  ~DeviceScope() { t_device = saved; }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  int saved;
};

// ---- phase: forward, autograd backward, optimizer ---------------------------
// Per thread, from RecordFunction scopes: the autograd engine runs every
// backward node inside a BACKWARD_FUNCTION scope, and torch.optim runs step()
// and zero_grad() inside record_function("Optimizer.step#...") /
// ("Optimizer.zero_grad#..."), a USER_SCOPE. Other threads that issue
// forward work (DataParallel's parallel_apply) stay forward.

thread_local int t_backward_depth = 0;
// Inside a call that issues many ops from C++ (gpemu_torch marks DDP's and
// DataParallel's: Runtime::issue's cpp_loop).
thread_local int t_cpp_loop_depth = 0;
thread_local int t_optimizer_depth = 0;
// An autograd device thread: it runs backward work only, also between nodes
// (the engine's gradient accumulation adds), which the zoo's traces count as
// backward too. Never the thread that loaded the backend (the script's main
// thread runs the engine's CPU nodes itself, and forward work after them).
thread_local bool t_engine_thread = false;
std::thread::id g_loading_thread;

struct PhaseContext final : at::ObserverContext {
  int* depth = nullptr;
};

std::unique_ptr<at::ObserverContext> phase_enter(const at::RecordFunction& fn) {
  int* depth = nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    depth = &t_backward_depth;
    if (!t_engine_thread && std::this_thread::get_id() != g_loading_thread) t_engine_thread = true;
  } else if (fn.scope() == at::RecordScope::USER_SCOPE) {
    const char* name = fn.name();
    if (name != nullptr && std::string_view(name).starts_with("Optimizer.")) {
      depth = &t_optimizer_depth;
      if (std::string_view(name).starts_with("Optimizer.step"))
        rt().note_optimizer_step(t_device, t_stream[static_cast<std::size_t>(t_device)]);
    } else if (name != nullptr && !rt().settings().step_marker.empty() && rt().settings().step_marker == name) {
      rt().note_step(StepSource::Marker, t_device, t_stream[static_cast<std::size_t>(t_device)]);
    }
  }
  if (depth == nullptr) return nullptr;
  ++*depth;
  auto ctx = std::make_unique<PhaseContext>();
  ctx->depth = depth;
  return ctx;
}

void phase_exit(const at::RecordFunction& /*fn*/, at::ObserverContext* ctx) {
  if (ctx != nullptr) --*static_cast<PhaseContext*>(ctx)->depth;
}

}  // namespace

OpProgram::Section current_section() {
  if (t_optimizer_depth > 0) return OpProgram::Section::Optimizer;
  if (t_backward_depth > 0 || t_engine_thread) return OpProgram::Section::Backward;
  return OpProgram::Section::Forward;
}

namespace {

// When the op being emulated reached the backend (the clock's time; -1: not
// in one), and whether the next op inside a cpp_call (gpemu_torch's wrapper
// of a Python function that issues many ops from C++) is its first: that
// one pays the Python rate (the call's own Python), the rest the C++ rate.
thread_local Time t_op_started = -1;
thread_local bool t_cpp_call_first = false;

// "[64,650] [650,2600] -> [64,2600]": the shapes of an op's tensor
// arguments and of its outputs, for the trace. An out= argument (keyword-only
// and written: `schema`'s) is an output only; an in-place op's self is both.
std::string shapes_text(c10::ArrayRef<c10::IValue> args, c10::ArrayRef<c10::IValue> outs,
                        const c10::FunctionSchema* schema) {
  std::string out;
  auto add = [&out](const at::Tensor& t) {
    if (!t.defined()) return;
    if (!out.empty() && out.back() != ' ') out += ' ';
    out += '[';
    for (std::size_t i = 0; i < t.sizes().size(); ++i) out += fmt::format("{}{}", i ? "," : "", t.sizes()[i]);
    out += ']';
  };
  auto is_out = [&](std::size_t i) {
    if (schema == nullptr || i >= schema->arguments().size()) return false;
    const c10::Argument& a = schema->arguments()[i];
    return a.kwarg_only() && a.alias_info() != nullptr && a.alias_info()->isWrite();
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor() && !is_out(i)) add(v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector()) add(t);
  }
  bool any = false;
  for (const c10::IValue& v : outs) {
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    if (!any) out += out.empty() ? "-> " : " -> ";
    any = true;
    add(v.toTensor());
  }
  return out;
}

// A half-precision convolution on NCHW activations: cuDNN's tensor-core
// kernels take NHWC, so it transposes the operands in and the result out
// (nchwToNhwc / nhwcToNchw), reading and writing them once more each; as
// `gpemu predict` adds them for --memory-format nchw (op_program.cpp).
bool transposes_nchw(std::string_view name, const OpProgram::Op& op, c10::ArrayRef<c10::IValue> args) {
  if (op.kind != OpProgram::Kind::Conv || op.math == OpProgram::Math::F32) return false;
  const std::size_t activation = name == "convolution_backward" ? 1 : 0;
  if (activation >= args.size() || !args[activation].isTensor()) return false;
  const at::Tensor& x = args[activation].toTensor();
  return x.dim() >= 4 && x.suggest_memory_format() == at::MemoryFormat::Contiguous;
}

void blas_workspace(int device, std::int64_t stream, bool lt);  // below the device allocator

void charge(int device, std::string_view name, c10::ArrayRef<c10::IValue> args, c10::ArrayRef<c10::IValue> outs,
            const c10::FunctionSchema* schema = nullptr) {
  const OpProgram::Op op = live_op(name, current_section(), args, outs, schema);
  if (op.kind == OpProgram::Kind::Matmul && name.substr(0, 10) != "scaled_dot")
    blas_workspace(device, t_stream[static_cast<std::size_t>(device)], name == "addmm" || name == "_addmm_activation");
  const at::Context& ctx = at::globalContext();
  bool cpp_loop = t_cpp_loop_depth > 0;
  if (cpp_loop && t_cpp_call_first) {
    cpp_loop = false;
    t_cpp_call_first = false;
  }
  std::optional<OpDetail> detail;
  if (rt().tracing()) detail = OpDetail{shapes_text(args, outs, schema)};
  const std::int64_t stream = t_stream[static_cast<std::size_t>(device)];
  rt().issue(device, stream, op, name, ctx.allowTF32CuDNN(), ctx.allowTF32CuBLAS(), cpp_loop, t_op_started,
             detail ? &*detail : nullptr);
  if (transposes_nchw(name, op, args)) {
    OpProgram::Op transpose;
    transpose.kind = OpProgram::Kind::Memory;
    transpose.section = op.section;
    transpose.bytes0 = 2 * op.bytes0;
    rt().issue(device, stream, transpose, "nchwToNhwc", false, false, cpp_loop);
  }
}

void charge_view(int device, std::string_view name) {
  OpProgram::Op op;
  op.kind = OpProgram::Kind::View;
  op.section = current_section();
  rt().issue(device, t_stream[static_cast<std::size_t>(device)], op, name, false, false);
}

// ---- the device guard ---------------------------------------------------------

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(t_device)}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_cuda(), "expected a CUDA device, got ", d);
    const int i = device_of(d);
    check_device(i);
    t_device = i;
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index()) t_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    const int i = device_of(d);
    return c10::Stream(c10::Stream::UNSAFE, cuda_device(i), t_stream[static_cast<std::size_t>(i)]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, cuda_device(device_of(d)), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    // As CUDA's pool: a fixed set of streams per device, handed out in turn
    // (futures' callbacks take one each time they run).
    constexpr std::size_t kPoolSize = 32;
    const int i = device_of(d);
    static std::mutex mutex;
    static std::array<std::vector<std::int64_t>, kMaxTorchGpus> pools;
    static std::array<std::size_t, kMaxTorchGpus> next{};
    std::lock_guard lock(mutex);
    auto& pool = pools[static_cast<std::size_t>(i)];
    auto& n = next[static_cast<std::size_t>(i)];
    if (pool.size() < kPoolSize) pool.push_back(rt().create_stream(i));
    const std::int64_t id = pool[n++ % pool.size()];
    return c10::Stream(c10::Stream::UNSAFE, cuda_device(i), id);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream old = getStream(s.device());
    t_stream[static_cast<std::size_t>(s.device_index())] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(rt().device_count());
    } catch (...) {
      return 0;
    }
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex /*device*/,
              const c10::EventFlag /*flag*/) const override {
    // c10's event handle holds the runtime's event id.
    if (*event == nullptr) *event = reinterpret_cast<void*>(static_cast<std::intptr_t>(rt().event_create()));
    rt().event_record(event_id(*event), stream.device_index(), stream.id());
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    rt().event_wait(event_id(event), stream.device_index(), stream.id());
  }
  bool queryEvent(void* event) const override { return event == nullptr || rt().event_query(event_id(event)); }
  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    if (event == nullptr) return;
    try {
      rt().event_destroy(event_id(event));
    } catch (...) {  // NOLINT(bugprone-empty-catch): noexcept; the server is gone, and the event with it
    }
  }
  bool queryStream(const c10::Stream& s) const override { return rt().stream_query(s.device_index(), s.id()); }
  void synchronizeStream(const c10::Stream& s) const override { rt().synchronize(s.device_index(), s.id()); }
};

C10_REGISTER_GUARD_IMPL(CUDA, GuardImpl);

// ---- values of small tensors the host filled ------------------------------------

constexpr std::size_t kValueBytes = 64 << 10;

std::mutex g_values_mutex;
// (device, storage data address) -> the storage's bytes, on the host. Every
// emulated device's allocator hands out the same addresses.
using ValueKey = std::pair<int, const void*>;
std::map<ValueKey, at::Tensor> g_values;
std::atomic<std::size_t> g_value_count{0};

ValueKey value_key(const at::Tensor& t) { return {t.get_device(), t.storage().data()}; }

// t's elements inside a storage's bytes.
at::Tensor typed_view(const at::Tensor& bytes, const at::Tensor& t) {
  return bytes.view(t.scalar_type()).as_strided(t.sizes(), t.strides(), t.storage_offset());
}

bool value_fits(const at::Tensor& t) {
  const std::size_t n = t.storage().nbytes();
  return n > 0 && n <= kValueBytes && n % t.itemsize() == 0 && t.storage().data() != nullptr;
}

void forget_values(const ValueKey& key) {
  if (g_value_count.load(std::memory_order_relaxed) == 0 || key.second == nullptr) return;
  std::lock_guard lock(g_values_mutex);
  if (g_values.erase(key) != 0) g_value_count.fetch_sub(1, std::memory_order_relaxed);
}
void forget_values(const at::Tensor& t) { forget_values(value_key(t)); }

}  // namespace

// A host copy of t's values; an undefined tensor when they are not known.
at::Tensor read_values(const at::Tensor& t) {
  if (g_value_count.load(std::memory_order_relaxed) == 0 || !t.is_cuda()) return {};
  std::lock_guard lock(g_values_mutex);
  const auto it = g_values.find(value_key(t));
  if (it == g_values.end()) return {};
  return typed_view(it->second, t).clone();
}

// t (a CUDA tensor) now holds `values` (a host tensor t's size, or one
// broadcastable to it); the rest of its storage keeps what it held (zero
// where unknown). A storage too large to keep forgets its values.
void write_values(const at::Tensor& t, const at::Tensor& values) {
  if (!value_fits(t)) {
    forget_values(t);
    return;
  }
  std::lock_guard lock(g_values_mutex);
  auto [it, added] = g_values.try_emplace(value_key(t));
  if (added) {
    it->second = at::zeros({static_cast<int64_t>(t.storage().nbytes())}, at::TensorOptions().dtype(at::kByte));
    g_value_count.fetch_add(1, std::memory_order_relaxed);
  }
  typed_view(it->second, t).copy_(values);
}

namespace {

// ---- device memory ------------------------------------------------------------

struct DeviceBlock {
  int device;
  CachingAllocator::Ptr ptr;
  std::int64_t stream;                    // the stream it was allocated on
  std::vector<std::int64_t> stream_uses;  // other streams record_stream named
};

// Blocks freed while other streams (record_stream) may still use them: as
// PyTorch's caching allocator, each waits for an event on each of those
// streams before it can be reused; the allocated-bytes figure drops at once.
struct DeferredFree {
  int device;
  CachingAllocator::Ptr ptr;
  std::uint64_t bytes;
  std::vector<std::int64_t> events;  // the runtime's event ids
};
std::mutex g_deferred_mutex;
std::vector<DeferredFree> g_deferred;
std::array<std::uint64_t, kMaxTorchGpus> g_deferred_bytes{};
std::atomic<std::size_t> g_deferred_count{0};  // lets allocations skip the lock when nothing waits

}  // namespace

// Returns the deferred blocks of `device` whose streams are done to the
// allocator (every one of them, waiting for their streams, when `wait`).
void process_deferred_frees(int device, bool wait) {
  if (g_deferred_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<DeferredFree> done;
  {
    std::lock_guard lock(g_deferred_mutex);
    for (auto it = g_deferred.begin(); it != g_deferred.end();) {
      bool ready = it->device == device;
      if (ready && !wait)
        for (const std::int64_t e : it->events) ready = ready && rt().event_query(e);
      if (ready) {
        g_deferred_bytes[static_cast<std::size_t>(device)] -= it->bytes;
        g_deferred_count.fetch_sub(1, std::memory_order_relaxed);
        done.push_back(std::move(*it));
        it = g_deferred.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (DeferredFree& f : done) {
    for (const std::int64_t e : f.events) {
      if (wait) rt().event_synchronize(e);
      rt().event_destroy(e);
    }
    rt().free(f.device, f.ptr);
  }
}

namespace {

void free_device_block(void* ctx) {
  auto* b = static_cast<DeviceBlock*>(ctx);
  forget_values(ValueKey{b->device, reinterpret_cast<const void*>(b->ptr)});
  try {
    if (b->stream_uses.empty()) {
      rt().free(b->device, b->ptr);
    } else {
      DeferredFree f{b->device, b->ptr, rt().block_size(b->device, b->ptr), {}};
      for (const std::int64_t s : b->stream_uses) {
        f.events.push_back(rt().event_create());
        rt().event_record(f.events.back(), b->device, s);
      }
      std::lock_guard lock(g_deferred_mutex);
      g_deferred_bytes[static_cast<std::size_t>(b->device)] += f.bytes;
      g_deferred.push_back(std::move(f));
      g_deferred_count.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): a deleter must not throw
  }
  delete b;
}

struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) const override {
    const int d = t_device;
    const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(d));
    if (n == 0) return {nullptr, device};
    const std::int64_t stream = t_stream[static_cast<std::size_t>(d)];
    process_deferred_frees(d, /*wait=*/false);
    CachingAllocator::Ptr p = 0;
    try {
      try {
        p = rt().allocate(d, n, stream);
      } catch (const OutOfMemoryError&) {
        // As PyTorch before it gives up: wait for the blocks other streams
        // still use, free them, and try again.
        if (deferred_bytes(d) == 0) throw;
        process_deferred_frees(d, /*wait=*/true);
        p = rt().allocate(d, n, stream);
      }
    } catch (const OutOfMemoryError& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    }
    return {reinterpret_cast<void*>(p), new DeviceBlock{d, p, stream, {}}, &free_device_block, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

DeviceAllocator g_device_allocator;

// cuBLAS's workspaces under PyTorch 2 (its CublasHandlePool.cpp): a thread's
// first cuBLAS call on a device takes a handle from the pool (one per thread
// while the thread lives), and the first call on a (handle, stream) takes a
// workspace from the caching allocator that stays allocated for the
// process's life (empty_cache keeps it): 32 MiB on sm 9.0, else 2 x 4096 KiB +
// 8 x 16 KiB; a cuBLASLt call (addmm with its bias, Linear's forward) takes
// another 1 MiB. Forward (the script's thread) and backward (autograd's
// device thread) thus hold one each. torch 1.13's cuBLAS allocated its own.
void blas_workspace(int device, std::int64_t stream, bool lt) {
  static const bool torch2 =
      std::getenv("GPEMU_TORCH_API") == nullptr || std::string(std::getenv("GPEMU_TORCH_API")) == "2";
  if (!torch2) return;
  static auto& mutex = *new std::mutex;  // thread exits may outlive static destruction
  static auto& taken = *new std::array<std::vector<bool>, kMaxTorchGpus>;  // handle -> leased
  static auto& held = *new std::set<std::tuple<int, std::size_t, std::int64_t, bool>>;
  struct Lease {  // this thread's handle per device, back to the pool when the thread ends
    std::array<int, kMaxTorchGpus> handle;
    Lease() { handle.fill(-1); }
    ~Lease() {
      std::lock_guard lock(mutex);
      for (std::size_t d = 0; d < handle.size(); ++d)
        if (handle[d] >= 0) taken[d][static_cast<std::size_t>(handle[d])] = false;
    }
  };
  thread_local Lease lease;
  const auto d = static_cast<std::size_t>(device);
  std::vector<std::uint64_t> sizes;
  {
    std::lock_guard lock(mutex);
    if (lease.handle[d] < 0) {
      auto free = std::find(taken[d].begin(), taken[d].end(), false);
      if (free == taken[d].end()) free = taken[d].insert(free, false);
      *free = true;
      lease.handle[d] = static_cast<int>(free - taken[d].begin());
    }
    for (const bool which : {false, true})
      if ((lt || !which) && held.emplace(device, static_cast<std::size_t>(lease.handle[d]), stream, which).second)
        sizes.push_back(which                                 ? (1u << 20)
                        : rt().gpu().architecture == "Hopper" ? (32u << 20)
                                                              : 2 * (4096u << 10) + 8 * (16u << 10));
  }
  DeviceScope scope(device);
  static auto& blocks = *new std::vector<c10::DataPtr>;  // never freed, as PyTorch's
  for (const std::uint64_t bytes : sizes) {
    c10::DataPtr block = g_device_allocator.allocate(bytes);
    std::lock_guard lock(mutex);
    blocks.push_back(std::move(block));
  }
}

at::Tensor new_device_tensor(int device, c10::IntArrayRef sizes, c10::IntArrayRef strides, at::ScalarType dtype) {
  DeviceScope scope(device);
  return at::Tensor(at::detail::empty_strided_generic(sizes, strides, &g_device_allocator,
                                                      c10::DispatchKeySet(c10::DispatchKey::CUDA), dtype));
}

// ---- pinned host memory -----------------------------------------------------------

std::mutex g_pinned_mutex;
std::map<std::uintptr_t, std::size_t> g_pinned;  // start -> size
std::atomic<bool> g_pin_warned{false};

void free_pinned(void* ctx) {
  auto* buffer = static_cast<HostBuffer*>(ctx);
  {
    std::lock_guard lock(g_pinned_mutex);
    g_pinned.erase(reinterpret_cast<std::uintptr_t>(buffer->data()));
  }
  delete buffer;
}

bool is_pinned_address(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(g_pinned_mutex);
  auto it = g_pinned.upper_bound(a);
  if (it == g_pinned.begin()) return false;
  --it;
  return a < it->first + std::max<std::size_t>(it->second, 1);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) const override {
    HostBuffer* buffer = nullptr;
    try {
      buffer = new HostBuffer(std::max<size_t>(n, 1), HostMemoryKind::Pinned, PinMode::Lock);
    } catch (const ResourceError& e) {
      // Locking more than RLIMIT_MEMLOCK allows: counted as pinned, not locked.
      if (!g_pin_warned.exchange(true))
        std::fprintf(stderr, "gpemu torch: pinned memory is counted but not locked from now on: %s\n", e.what());
      buffer = new HostBuffer(std::max<size_t>(n, 1), HostMemoryKind::Pinned, PinMode::AccountOnly);
    }
    {
      std::lock_guard lock(g_pinned_mutex);
      g_pinned[reinterpret_cast<std::uintptr_t>(buffer->data())] = n;
    }
    return {buffer->data(), buffer, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

PinnedAllocator g_pinned_allocator;

// ---- CUDA hooks: what ATen asks of "the CUDA library" ------------------------------
// hasCUDA() and hasPrimaryContext() let the autograd engine stash and sync
// the callers' streams; cuDNN stays absent so composites choose the native
// kernels this backend has shape rules for.

struct Hooks final : at::CUDAHooksInterface {
  explicit Hooks(at::CUDAHooksArgs /*args*/) {}
  void initCUDA() const override {}
  bool hasCUDA() const override { return true; }
  bool hasCUDART() const override { return true; }
  bool hasPrimaryContext(int64_t device) const override { return device >= 0 && device < rt().device_count(); }
  int64_t current_device() const override { return t_device; }
  int getNumGPUs() const override { return rt().device_count(); }
  bool isPinnedPtr(void* p) const override { return is_pinned_address(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  at::Allocator* getCUDADeviceAllocator() const override { return &g_device_allocator; }
  at::Device getDeviceFromPtr(void* /*data*/) const override { return cuda_device(t_device); }
  void deviceSynchronize(int64_t device) const override { rt().synchronize_device(static_cast<int>(device)); }
  std::string showConfig() const override { return "gpemu emulated CUDA (docs/torch.md)\n"; }
};

// ---- explicit kernels ------------------------------------------------------------

at::ScalarType scalar_type_or_default(c10::optional<at::ScalarType> dtype) {
  return dtype.value_or(c10::typeMetaToScalarType(at::get_default_dtype()));
}

int device_arg(c10::optional<at::Device> device) {
  const int d = device ? device_of(*device) : t_device;
  check_device(d);
  return d;
}

at::Tensor empty_kernel(c10::SymIntArrayRef size, c10::optional<at::ScalarType> dtype,
                        c10::optional<at::Layout> /*layout*/, c10::optional<at::Device> device,
                        c10::optional<bool> /*pin_memory*/, c10::optional<at::MemoryFormat> memory_format) {
  const int d = device_arg(device);
  DeviceScope scope(d);
  return at::Tensor(at::detail::empty_generic(c10::asIntArrayRefSlow(size), &g_device_allocator,
                                              c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                              scalar_type_or_default(dtype), memory_format));
}

at::Tensor empty_strided_kernel(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                                c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> /*layout*/,
                                c10::optional<at::Device> device, c10::optional<bool> /*pin_memory*/) {
  return new_device_tensor(device_arg(device), c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                           scalar_type_or_default(dtype));
}

at::Tensor as_strided_kernel(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                             c10::optional<c10::SymInt> offset) {
  charge_view(self.get_device(), "as_strided");
  return at::native::as_strided_tensorimpl(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride),
                                           offset ? c10::optional<int64_t>(offset->expect_int()) : c10::nullopt);
}

at::Tensor view_kernel(const at::Tensor& self, c10::SymIntArrayRef size) {
  charge_view(self.get_device(), "view");
  return at::native::view(self, c10::asIntArrayRefSlow(size));
}

at::Tensor reshape_alias_kernel(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  charge_view(self.get_device(), "_reshape_alias");
  return at::native::_reshape_alias(self, c10::asIntArrayRefSlow(size), c10::asIntArrayRefSlow(stride));
}

at::Tensor unfold_kernel(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  charge_view(self.get_device(), "unfold");
  return at::native::unfold(self, dim, size, step);
}

// resize_: new sizes, contiguous strides; a larger storage from the device's
// allocator when the old one is too small (its contents are not data).
const at::Tensor& resize_kernel(const at::Tensor& self, c10::SymIntArrayRef size,
                                c10::optional<at::MemoryFormat> memory_format) {
  const c10::IntArrayRef sizes = c10::asIntArrayRefSlow(size);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(sizes);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve) impl->empty_tensor_restride(*memory_format);
  const auto needed = static_cast<std::size_t>(self.storage_offset() + self.numel()) * self.itemsize();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) {
    DeviceScope scope(self.get_device());
    storage->set_data_ptr_noswap(g_device_allocator.allocate(needed));
    storage->set_nbytes(needed);
  }
  return self;
}

// set_: the tensor takes another storage (torch.save's storage copies,
// storage views). Only the tensor's metadata changes.
at::Tensor& set_storage_offset_kernel(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset.expect_int());
  const c10::IntArrayRef sizes = c10::asIntArrayRefSlow(size);
  if (stride.empty())
    impl->set_sizes_contiguous(sizes);
  else
    impl->set_sizes_and_strides(sizes, c10::asIntArrayRefSlow(stride));
  return self;
}

at::Tensor& set_storage_kernel(at::Tensor& self, c10::Storage source) {
  const auto n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  const std::array<c10::SymInt, 1> size = {c10::SymInt(n)};
  return set_storage_offset_kernel(self, std::move(source), c10::SymInt(0), size, {});
}

at::Tensor& set_empty_kernel(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_device_allocator, /*resizable=*/true);
  const std::array<c10::SymInt, 1> size = {c10::SymInt(0)};
  return set_storage_offset_kernel(self, std::move(storage), c10::SymInt(0), size, {});
}

double unique_bytes_of(const at::Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(t.itemsize());
}

at::Tensor& copy_kernel(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return self;
  const auto bytes = static_cast<std::uint64_t>(unique_bytes_of(self));
  if (self.is_cuda() && src.is_cuda()) {
    const int d = self.get_device();
    std::array<c10::IValue, 2> args = {self, src};
    charge(d, "copy_", c10::ArrayRef<c10::IValue>(args.data(), args.size()), {});
    if (const at::Tensor v = read_values(src); v.defined())
      write_values(self, v);
    else
      forget_values(self);
    return self;
  }
  if (self.is_cuda()) {
    const int d = self.get_device();
    const std::int64_t s = t_stream[static_cast<std::size_t>(d)];
    const bool pinned = src.is_cpu() && is_pinned_address(src.data_ptr());
    rt().copy(d, s, /*to_device=*/true, bytes, pinned);
    if (pinned && !non_blocking) rt().synchronize(d, s);
    if (src.is_cpu())
      write_values(self, src);
    else
      forget_values(self);
    return self;
  }
  TORCH_CHECK(src.is_cuda(), "gpemu torch: copy_ from ", src.device(), " to ", self.device(), " is not a CUDA copy");
  const int d = src.get_device();
  const std::int64_t s = t_stream[static_cast<std::size_t>(d)];
  const bool pinned = self.is_cpu() && is_pinned_address(self.data_ptr());
  rt().copy(d, s, /*to_device=*/false, bytes, pinned);
  if (pinned && !non_blocking) rt().synchronize(d, s);
  // The values the host gave a small tensor, else zeros.
  if (self.is_cpu()) {
    if (const at::Tensor v = read_values(src); v.defined())
      self.copy_(v);
    else
      self.zero_();
  }
  return self;
}

at::Scalar local_scalar_kernel(const at::Tensor& self) {
  const int d = self.get_device();
  rt().synchronize(d, t_stream[static_cast<std::size_t>(d)]);
  if (const at::Tensor v = read_values(self); v.defined()) return v.item();
  switch (self.scalar_type()) {
    case at::kBool: return at::Scalar(false);
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16: return at::Scalar(0.0);
    default: return at::Scalar(static_cast<int64_t>(0));
  }
}

at::Tensor pin_memory_kernel(const at::Tensor& self, c10::optional<at::Device> /*device*/) {
  at::Tensor pinned =
      at::Tensor(at::detail::empty_strided_generic(self.sizes(), self.strides(), &g_pinned_allocator,
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU), self.scalar_type()));
  pinned.copy_(self);
  return pinned;
}

bool is_pinned_kernel(const at::Tensor& self, c10::optional<at::Device> /*device*/) {
  return self.is_cpu() && self.storage().data() != nullptr && is_pinned_address(self.storage().data());
}

void record_stream_kernel(at::Tensor& self, c10::Stream stream) {
  // As PyTorch's: the block the tensor's storage lives in is not reused,
  // once freed, until the work issued on `stream` by then has run.
  const c10::DataPtr& data = self.storage().data_ptr();
  if (data.get_deleter() != &free_device_block) return;
  auto* b = static_cast<DeviceBlock*>(data.get_context());
  if (stream.id() == b->stream) return;
  std::lock_guard lock(g_deferred_mutex);
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream.id()) == b->stream_uses.end())
    b->stream_uses.push_back(stream.id());
}

// ---- the boxed kernel for every other op ---------------------------------------------

struct MetaArgs {
  std::vector<std::pair<at::Tensor, at::Tensor>> originals;  // (meta copy, CUDA tensor)
  int device = -1;
  // Indexing ops take index tensors on the host and move them, as PyTorch's
  // CUDA kernels do; any other op given a host tensor (other than a 0-dim
  // one) with CUDA tensors is refused with PyTorch's message.
  bool host_tensors_allowed = false;
  std::optional<c10::Device> other_device;  // a tensor on a device the op cannot mix in
};

at::Tensor meta_copy(const at::Tensor& t);

at::Tensor to_meta(const at::Tensor& t, MetaArgs& m) {
  if (!t.defined()) return t;
  if (!t.is_cuda()) {
    if (t.dim() == 0) return t;  // a host scalar joins CUDA tensors in any op
    if (m.host_tensors_allowed && t.is_cpu()) return meta_copy(t);
    if (!m.other_device) m.other_device = t.device();
    return t;
  }
  if (m.device < 0)
    m.device = t.get_device();
  else if (t.get_device() != m.device && t.dim() > 0 && !m.other_device)
    m.other_device = t.device();
  for (const auto& [meta, orig] : m.originals)
    if (orig.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return meta;
  at::Tensor meta = meta_copy(t);
  m.originals.emplace_back(meta, t);
  return meta;
}

// A shape-only copy of t: made directly, not through the dispatcher (this
// runs for every argument of every op).
at::Tensor meta_copy(const at::Tensor& t) {
  if (t.storage_offset() == 0)
    return at::Tensor(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type()));
  // A view into a larger storage (a flattened buffer's piece): a meta
  // storage as large as the view's extent, then the same view of it.
  int64_t extent = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  const std::array<int64_t, 1> whole = {extent}, unit = {1};
  return at::native::as_strided_tensorimpl(at::Tensor(at::detail::empty_strided_meta(whole, unit, t.scalar_type())),
                                           t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(const c10::IValue& v, MetaArgs& m) {
  if (v.isTensor()) return to_meta(v.toTensor(), m);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(to_meta(t, m));
    return out;
  }
  if (v.isList()) {
    const auto list = v.toList();
    bool any_tensor = false;
    for (const c10::IValue& e : list)
      if (e.isTensor()) any_tensor = true;
    if (!any_tensor) return v;
    c10::impl::GenericList out(list.elementType());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(to_meta(e.toTensor(), m)) : e);
    return out;
  }
  if (v.isDevice() && v.toDevice().is_cuda()) {
    if (m.device < 0) m.device = device_of(v.toDevice());
    return c10::Device(c10::DeviceType::Meta);
  }
  return v;
}

at::Tensor from_meta(const at::Tensor& t, const MetaArgs& m) {
  if (!t.defined() || !t.is_meta()) return t;
  for (const auto& [meta, orig] : m.originals) {
    if (meta.unsafeGetTensorImpl() != t.unsafeGetTensorImpl()) continue;
    if (orig.sizes() != t.sizes()) {
      at::Tensor o = orig;
      o.resize_(t.sizes());  // an out= argument the op resized
    }
    return orig;
  }
  for (const auto& [meta, orig] : m.originals) {
    if (!meta.storage().is_alias_of(t.storage())) continue;
    charge_view(m.device, "view");
    return at::native::as_strided_tensorimpl(orig, t.sizes(), t.strides(), t.storage_offset());
  }
  return new_device_tensor(m.device, t.sizes(), t.strides(), t.scalar_type());
}

c10::IValue from_meta(const c10::IValue& v, const MetaArgs& m) {
  if (v.isTensor()) return from_meta(v.toTensor(), m);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(from_meta(t, m));
    return out;
  }
  return v;
}

std::mutex g_failed_mutex;
std::map<std::string, std::string, std::less<>> g_failed;

// Sets t_op_started for the op being emulated (the outermost one).
struct OpStart {
  OpStart() : outer(t_op_started < 0) {
    if (outer) t_op_started = rt().clock().now();
  }
  ~OpStart() {
    if (outer) t_op_started = -1;
  }
  OpStart(const OpStart&) = delete;
  OpStart& operator=(const OpStart&) = delete;
  bool outer;
};

void emulate_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpStart started;
  const c10::FunctionSchema& schema = op.schema();
  std::string_view name = schema.name();
  if (name.starts_with("aten::")) name.remove_prefix(6);
  if (name.starts_with("gpemu::")) name.remove_prefix(7);  // PyTorch 2's kernels (gpemu_torch/_torch2.py)
  const std::size_t n_args = schema.arguments().size();
  const std::size_t n_rets = schema.returns().size();
  MetaArgs m;
  m.host_tensors_allowed = name == "index" || name == "index_put" || name == "index_put_" || name == "_index_put_impl_";
  std::vector<c10::IValue> meta_args;
  meta_args.reserve(n_args);
  for (const c10::IValue& v : torch::jit::last(*stack, n_args)) meta_args.push_back(to_meta(v, m));
  if (m.device < 0) m.device = t_device;
  check_device(m.device);
  TORCH_CHECK(!m.other_device, "Expected all tensors to be on the same device, but found at least two devices, ",
              cuda_device(m.device), " and ", *m.other_device, "! (aten::", name, ")");
  torch::jit::drop(*stack, n_args);

  Outs meta_outs;
  const auto& rules = shape_rules();
  const auto rule = rules.find(rule_name(name, n_rets));
  try {
    if (rule != rules.end()) {
      meta_outs = rule->second(meta_args);
    } else {
      torch::jit::Stack call(meta_args.begin(), meta_args.end());
      op.callBoxed(&call);
      meta_outs.assign(call.begin(), call.end());
      rt().note_generic(name);
    }
  } catch (const c10::Error& e) {
    std::lock_guard lock(g_failed_mutex);
    g_failed.emplace(std::string(name), e.what_without_backtrace());
    std::string why = e.what_without_backtrace();
    if (const auto dot = why.find(". "); dot != std::string::npos) why.resize(dot);
    TORCH_CHECK(false, "gpemu torch: aten::", name, " has no shape rule on an emulated GPU (", why,
                "). Please report it with the model that used it; docs/torch.md lists what is covered.");
  }
  TORCH_INTERNAL_ASSERT(meta_outs.size() == n_rets, "gpemu torch: aten::", name, " returned ", meta_outs.size(),
                        " values, its schema ", n_rets);
  if (rule != rules.end()) {
    // A shape rule gives an op's functional outputs; an out= overload
    // (torch's structured ops reach it from their functional form, with the
    // output already made) returns the arguments it writes instead.
    const auto& params = schema.arguments();
    for (std::size_t r = 0; r < n_rets; ++r) {
      const c10::AliasInfo* ret = schema.returns()[r].alias_info();
      if (ret == nullptr || !ret->isWrite()) continue;
      for (std::size_t i = 0; i < params.size(); ++i) {
        const c10::AliasInfo* arg = params[i].alias_info();
        if (arg != nullptr && arg->isWrite() && arg->beforeSets() == ret->beforeSets() && meta_args[i].isTensor()) {
          at::Tensor out = meta_args[i].toTensor();
          const at::Tensor& shaped = meta_outs[r].toTensor();
          if (out.sizes() != shaped.sizes()) out.resize_(shaped.sizes());
          meta_outs[r] = out;
          break;
        }
      }
    }
  }
  charge(m.device, name, meta_args, meta_outs, &schema);
  if (g_value_count.load(std::memory_order_relaxed) != 0) {
    // What the op wrote no longer holds the host's values.
    const auto& params = schema.arguments();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const c10::AliasInfo* alias = params[i].alias_info();
      if (alias == nullptr || !alias->isWrite()) continue;
      auto forget = [&](const at::Tensor& written) {
        for (const auto& [meta, orig] : m.originals)
          if (meta.unsafeGetTensorImpl() == written.unsafeGetTensorImpl()) forget_values(orig);
      };
      if (meta_args[i].isTensor()) forget(meta_args[i].toTensor());
      if (meta_args[i].isTensorList())
        for (const at::Tensor& t : meta_args[i].toTensorVector()) forget(t);
    }
  }
  for (const c10::IValue& v : meta_outs) stack->push_back(from_meta(v, m));
}

// DDP's reducer times forward, backward and its communication with a Timer
// of the parameters' device type (its runtime statistics and logs): on an
// emulated GPU, as CUDA's, with events on the current stream, so what it
// measures is emulated GPU time.
class EmulatedTimer final : public c10d::Timer {
 public:
  explicit EmulatedTimer(c10::Device device) : device_(device_of(device)) {}
  ~EmulatedTimer() override {
    for (const std::int64_t e : events_)
      if (e != 0) try {
          rt().event_destroy(e);
        } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor; the server is gone, and the event with it
        }
  }
  EmulatedTimer(const EmulatedTimer&) = delete;
  EmulatedTimer& operator=(const EmulatedTimer&) = delete;

  void record(c10d::Timer::Event what) override {
    getTimeRef(what) = c10d::current_time_in_nanos();  // the host's time too, as CUDA's timer keeps it
    std::int64_t& e = events_[static_cast<std::size_t>(what)];
    if (e == 0) e = rt().event_create();
    rt().event_record(e, device_, t_stream[static_cast<std::size_t>(device_)]);
  }

  c10::optional<int64_t> measureDifference(c10d::Timer::Event start, c10d::Timer::Event end) override {
    const std::int64_t a = events_[static_cast<std::size_t>(start)];
    const std::int64_t b = events_[static_cast<std::size_t>(end)];
    if (a == 0 || b == 0) return c10::nullopt;
    const double ms = rt().event_elapsed_ms(a, b);
    if (ms < 0) return c10::nullopt;
    return static_cast<int64_t>(std::llround(ms * 1e6));
  }

 private:
  int device_;
  std::array<std::int64_t, 5> events_{};  // by c10d::Timer::Event: the runtime's ids, 0 until recorded
};

}  // namespace

// ---- backend_state.h: what the torch.ops.gpemu calls share (gpemu_ops.cpp) ----

int current_device() { return t_device; }
void set_current_device(int device) { t_device = device; }
std::int64_t current_stream(int device) { return t_stream[static_cast<std::size_t>(device)]; }
void set_current_stream(int device, std::int64_t stream) { t_stream[static_cast<std::size_t>(device)] = stream; }
void note_cpp_loop(bool enter) { t_cpp_loop_depth = std::max(0, t_cpp_loop_depth + (enter ? 1 : -1)); }
void note_cpp_call(bool enter) {
  if (enter && t_cpp_loop_depth == 0) t_cpp_call_first = true;
  if (!enter && t_cpp_loop_depth <= 1) t_cpp_call_first = false;
  note_cpp_loop(enter);
}

std::uint64_t deferred_bytes(int device) {
  std::lock_guard lock(g_deferred_mutex);
  return g_deferred_bytes[static_cast<std::size_t>(device)];
}

void install_cuda_slots() {
  g_loading_thread = std::this_thread::get_id();
  at::addGlobalCallback(at::RecordFunctionCallback(&phase_enter, &phase_exit)
                            .scopes({at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE}));
  c10::SetAllocator(c10::DeviceType::CUDA, &g_device_allocator);
}

}  // namespace gpemu::torch_backend

namespace gb = gpemu::torch_backend;

namespace at {
// The registry's entry ATen looks up on its first call to getCUDAHooks().
C10_REGISTER_TYPED_CLASS(CUDAHooksRegistry, "CUDAHooks", gb::Hooks)
}  // namespace at

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kCUDA, gb::EmulatedTimer);
}  // namespace c10d

TORCH_LIBRARY_IMPL(aten, CUDA, m) {
  m.impl("empty.memory_format", TORCH_FN(gb::empty_kernel));
  m.impl("empty_strided", TORCH_FN(gb::empty_strided_kernel));
  m.impl("as_strided", TORCH_FN(gb::as_strided_kernel));
  m.impl("view", TORCH_FN(gb::view_kernel));
  m.impl("_reshape_alias", TORCH_FN(gb::reshape_alias_kernel));
  m.impl("unfold", TORCH_FN(gb::unfold_kernel));
  m.impl("resize_", TORCH_FN(gb::resize_kernel));
  m.impl("copy_", TORCH_FN(gb::copy_kernel));
  m.impl("_local_scalar_dense", TORCH_FN(gb::local_scalar_kernel));
  m.impl("_pin_memory", TORCH_FN(gb::pin_memory_kernel));
  m.impl("is_pinned", TORCH_FN(gb::is_pinned_kernel));
  m.impl("record_stream", TORCH_FN(gb::record_stream_kernel));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(gb::set_storage_offset_kernel));
  m.impl("set_.source_Storage", TORCH_FN(gb::set_storage_kernel));
  m.impl("set_", TORCH_FN(gb::set_empty_kernel));
  // Composites that would pick cuDNN or a slow CUDA path: shape rules instead.
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&gb::emulate_op>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&gb::emulate_op>());
  // Composites that would decompose a normalisation into other kernels (shape_rules.cpp).
  m.impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&gb::emulate_op>());
  m.impl("native_group_norm", torch::CppFunction::makeFromBoxedFunction<&gb::emulate_op>());
}

TORCH_LIBRARY_IMPL(_, CUDA, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&gb::emulate_op>()); }
