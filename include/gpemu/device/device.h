// An emulated GPU: a compute engine and separate host-to-device and
// device-to-host copy engines, streams, events and a caching allocator, all
// on a Timeline. Work is issued asynchronously, as with CUDA: issuing returns
// at once with the operation's place on the emulated timeline already fixed
// (or, for transfers over a shared link, to be fixed by the flow simulation);
// only synchronize/wait calls block the host, until an absolute deadline.
//
// CUDA semantics reproduced:
//  - A stream is FIFO: an operation starts after the previous one on its stream.
//  - Each engine runs one operation at a time (kernels on the compute engine
//    are serialised, which is what kernels that fill the GPU do; copies in one
//    direction share that direction's copy engine), so copies on one stream
//    overlap kernels on another.
//  - The default stream is CUDA's legacy default stream: work on it waits for
//    all earlier work on the device's blocking streams, and work on a
//    blocking stream waits for earlier default-stream work. Streams created
//    non-blocking are exempt, as with cudaStreamNonBlocking.
//  - Events record the point a stream has reached; they can be waited on by
//    other streams, queried, synchronized, and give elapsed time.
//  - Copies from pageable host memory return to the host only when done
//    (the driver stages them synchronously); copies from pinned memory are
//    asynchronous.
//
// Thread safety: a Device may be used from several host threads; streams and
// events are used by one host thread at a time, like CUDA's.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gpemu/catalog.h"
#include "gpemu/device/caching_allocator.h"
#include "gpemu/device/host_memory.h"
#include "gpemu/device/pcie.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

enum class Engine : int { Compute = 0, CopyH2D = 1, CopyD2H = 2 };
inline constexpr int kEngineCount = 3;
std::string_view to_string(Engine e);

class Device;
class Event;
class SharedGpu;
struct MigProfile;

// What a kernel keeps busy when it runs alone: its share of the SMs and of
// the memory bandwidth (the bottleneck at 1). Only a shared GPU reads it
// (SharePolicy::Mps and Mig, docs/sharing.md); 1, 1 when not known.
struct KernelDemand {
  float sm = 1, bw = 1;
};

// A process's place on a GPU several processes share (SharedGpu).
struct ShareContext {
  SharedGpu* gpu = nullptr;  // null: the device is the process's alone
  int priority = 0;          // SharePolicy::Priority: larger goes first
  std::string mig;           // SharePolicy::Mig: its slice's profile, e.g. "3g.20gb"
};

// Share of the memory left after the context that cuDNN workspaces and the
// fragmentation they cause take in a real run (the traced tensors do not
// have them): fitted on the OOM points of GPEmu's four measured cards,
// stable to 0.2 points when one card is left out (docs/zoo-memory.md).
inline constexpr double kDefaultWorkspaceMargin = 0.04;

struct DeviceOptions {
  int index = 0;  // device ordinal: trace row, "GPU n" in messages
  // Memory the CUDA context and cuDNN/cuBLAS handles hold, not available to
  // tensors. Default by architecture (docs/device.md).
  std::optional<std::uint64_t> context_reserve_bytes;
  // Tensors get (reported memory - context) / (1 + workspace_margin).
  double workspace_margin = kDefaultWorkspaceMargin;
  // Host link; default from the GPU's PCIe generation and lanes.
  std::optional<PcieModel> pcie;
  // Shared host links (e.g. several GPUs behind one PCIe switch or root
  // port). Null: the device gets dedicated links.
  const Link* host_link_h2d = nullptr;
  const Link* host_link_d2h = nullptr;
  // Passed to the caching allocator.
  std::uint64_t max_split_size_bytes = UINT64_MAX;
  // A GPU shared with other processes: its host links, memory and compute
  // engine are the shared GPU's (host_link_* and the memory options above
  // are then taken from it).
  ShareContext share;
};

class Stream {
 public:
  Device& device() const { return *device_; }
  int id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  bool non_blocking() const { return non_blocking_; }

  // A kernel of the given duration (on the GPU alone) on the compute engine.
  Completion launch_kernel(Duration duration, std::string_view name = "kernel", KernelDemand demand = {});
  // Copies over the device's host link; pageable copies block the host until done.
  Completion copy_h2d(std::uint64_t bytes, HostMemoryKind from, std::string_view name = "H2D");
  Completion copy_d2h(std::uint64_t bytes, HostMemoryKind to, std::string_view name = "D2H");
  // General form for the layers above (collectives): the operation is ordered
  // after this stream's tail, the engine's tail when engine is given, and extra.
  Completion enqueue(const OpSpec& spec, std::optional<Engine> engine, std::span<const Completion> extra = {});

  void record(Event& event);
  // Later work on this stream waits for event (cudaStreamWaitEvent).
  void wait(const Event& event);
  // Blocks the host until all work issued to this stream has completed.
  void synchronize();
  // True when all work issued to this stream has completed.
  bool query();
  const Completion& tail() const { return tail_; }

 private:
  friend class Device;
  Stream(Device* device, int id, bool non_blocking) : device_(device), id_(id), non_blocking_(non_blocking) {}
  Device* device_;
  int id_;
  bool non_blocking_;
  Completion tail_;
};

class Event {
 public:
  bool recorded() const { return recorded_; }
  // True when the work captured by the last record() has completed
  // (cudaEventQuery); true for an event never recorded, as in CUDA.
  bool query();
  // Blocks the host until the captured work has completed.
  void synchronize();
  // When the stream reached this event; blocks until it has.
  Time time();
  // end.time() - start.time() (cudaEventElapsedTime, exact here). Throws
  // std::logic_error if either event was never recorded.
  static Duration elapsed(Event& start, Event& end);

 private:
  friend class Stream;
  Timeline* timeline_ = nullptr;
  Completion completion_;
  bool recorded_ = false;
};

struct DeviceStats {
  Duration busy[kEngineCount] = {0, 0, 0};  // summed durations of fixed-cost work per engine
  std::uint64_t kernels = 0;
  std::uint64_t h2d_bytes = 0;
  std::uint64_t d2h_bytes = 0;
};

class Device {
 public:
  // On a shared GPU (options.share.gpu) the process's CUDA context is taken
  // from the GPU's memory: OutOfMemoryError when it does not fit; a MIG slice
  // is taken from the GPU: InputError when none of its profile is left.
  Device(Timeline& timeline, const GpuSpec& spec, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const GpuSpec& spec() const { return *spec_; }
  int index() const { return index_; }
  Timeline& timeline() const { return *timeline_; }
  const PcieModel& pcie() const { return pcie_; }
  CachingAllocator& allocator() { return allocator_; }
  const CachingAllocator& allocator() const { return allocator_; }
  std::uint64_t context_reserve_bytes() const { return context_reserve_; }
  // The shared GPU this device is a process's view of, or null.
  SharedGpu* shared() const { return share_.gpu; }

  Stream& default_stream() { return streams_.front(); }
  // Streams live as long as the device; references stay valid.
  Stream& create_stream(bool non_blocking = false);

  // Blocks the host until all work on the device has completed (cudaDeviceSynchronize).
  void synchronize();
  const DeviceStats& stats() const { return stats_; }

  // Default CUDA-context reserve for a GPU (docs/device.md).
  static std::uint64_t default_context_reserve(const GpuSpec& spec);
  // The memory tensors can use: the card's reported memory
  // (GpuSpec::reported_memory) less the context, divided by 1 + margin.
  // Throws InputError for a negative or non-finite margin.
  static std::uint64_t tensor_capacity(const GpuSpec& spec, std::uint64_t context_reserve,
                                       double workspace_margin = kDefaultWorkspaceMargin);

 private:
  friend class Stream;
  Completion enqueue(Stream& s, const OpSpec& spec, std::optional<Engine> engine, std::span<const Completion> extra);
  Completion copy(Stream& s, Engine engine, std::uint64_t bytes, HostMemoryKind host, std::string_view name);

  Timeline* timeline_;
  const GpuSpec* spec_;
  int index_;
  std::uint64_t context_reserve_;
  PcieModel pcie_;
  const Link* link_h2d_;
  const Link* link_d2h_;
  ShareContext share_;
  const MigProfile* mig_ = nullptr;  // the MIG slice the device is, or null
  CachingAllocator allocator_;
  std::deque<Stream> streams_;
  std::array<Completion, kEngineCount> engine_tail_;
  DeviceStats stats_;
};

}  // namespace gpemu
