// One emulated GPU that several processes (training jobs) share, each with
// its own Device (streams, caching allocator, CUDA context) on one timeline.
// What they share and how (docs/sharing.md has the policies' bases):
//   - memory: one card; every process's context and segments come out of
//     it, so one job's growth makes another run out where it would on the
//     card (Mig: each slice its own memory);
//   - the host links: one PCIe link each way;
//   - the compute engine, under a policy:
//       Fifo       a process's iteration has the GPU to itself; iterations
//                  in the order their first kernels were issued (GPEmu's
//                  manager), via begin_turn/end_turn;
//       TimeSlice  round-robin quanta: the active processes share the GPU
//                  equally, losing quantum / (quantum + switch) of it while
//                  two or more are active;
//       Priority   kernel by kernel, highest priority first; a running
//                  kernel is not preempted;
//       Mps        kernels run concurrently, each slowed by the busiest of
//                  the SMs and memory bandwidth (KernelDemand sums);
//       Mig        fixed slices of the card's MIG profiles, each with its
//                  share of SMs, memory and bandwidth; no interference.
//
// Thread safety: all members may be called from the processes' host threads.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device/caching_allocator.h"
#include "gpemu/device/device.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

// A sharing policy, by name: the five built-in ones as constants, any
// registered one from parse_share_policy. The policy itself, what it does, is
// an object behind one interface (sharing_policy.h), one file each.
class SharePolicy {
 public:
  static const SharePolicy Fifo, TimeSlice, Priority, Mps, Mig;
  // `name` must outlive every use (a literal, or a registered policy's name).
  constexpr explicit SharePolicy(std::string_view name) : name_(name) {}
  constexpr std::string_view name() const { return name_; }
  friend bool operator==(const SharePolicy& a, const SharePolicy& b) { return a.name_ == b.name_; }

 private:
  std::string_view name_;
};
inline constexpr SharePolicy SharePolicy::Fifo{"fifo"};
inline constexpr SharePolicy SharePolicy::TimeSlice{"timeslice"};
inline constexpr SharePolicy SharePolicy::Priority{"priority"};
inline constexpr SharePolicy SharePolicy::Mps{"mps"};
inline constexpr SharePolicy SharePolicy::Mig{"mig"};
std::string_view to_string(SharePolicy p);
// A registered policy's name ("fifo", "timeslice", "priority", "mps", "mig",
// and any registered since); InputError naming them otherwise.
SharePolicy parse_share_policy(std::string_view text);
class SharingPolicy;

// A MIG GPU-instance profile: its sevenths of the SMs and eighths of the
// memory (and memory bandwidth), from NVIDIA's MIG user guide ("Supported
// MIG Profiles"; docs/sharing.md).
struct MigProfile {
  std::string name;  // e.g. "3g.20gb"
  int compute_sevenths = 0;
  int memory_eighths = 0;
  int max_instances = 0;  // of this profile on one card
};
// The card's profiles; empty for a card without MIG.
std::vector<MigProfile> mig_profiles(const GpuSpec& gpu);
// InputError naming the card and its profiles when it has no such profile.
const MigProfile& find_mig_profile(const GpuSpec& gpu, std::string_view name);

struct ShareOptions {
  SharePolicy policy = SharePolicy::Fifo;
  Duration timeslice = 2 * kMillisecond;     // TimeSlice: the quantum
  Duration switch_cost = 25 * kMicrosecond;  // TimeSlice: a context switch
  // As DeviceOptions (the card's memory left to tensors).
  double workspace_margin = kDefaultWorkspaceMargin;
};

class SharedGpu {
 public:
  // InputError for a policy the card cannot run (Mig on a card without MIG)
  // or an impossible option.
  SharedGpu(Timeline& timeline, const GpuSpec& spec, ShareOptions options = {});
  SharedGpu(const SharedGpu&) = delete;
  SharedGpu& operator=(const SharedGpu&) = delete;

  Timeline& timeline() const { return *timeline_; }
  const GpuSpec& spec() const { return *spec_; }
  const ShareOptions& options() const { return options_; }
  SharePolicy policy() const { return options_.policy; }
  // What the policy does (sharing_policy.h).
  const SharingPolicy& sharing() const { return *sharing_; }
  // The policy gives a process's step the GPU alone (begin_turn/end_turn).
  bool exclusive_steps() const;
  // The policy gives each process a MIG slice of its own (take_slice).
  bool slices() const;
  DeviceMemory& memory() { return memory_; }
  const Link& host_link_h2d() const { return *h2d_; }
  const Link& host_link_d2h() const { return *d2h_; }
  // The compute engine as a link whose bytes are nanoseconds of kernel time
  // (the policy's compute_share: TimeSlice, Priority, Mps); null for Fifo and Mig.
  const Link* compute_link() const { return compute_; }

  // slices (mig): takes a slice of `profile` (the placement rule kept: at most 7
  // sevenths, 8 eighths and the profile's instances); InputError when it
  // does not fit beside the slices taken. give_slice returns it.
  const MigProfile& take_slice(std::string_view profile);
  void give_slice(const MigProfile& profile);

  // exclusive_steps (fifo): the issuing host holds the GPU from begin_turn to end_turn (it
  // must not sleep in between: the turn is a mutex); its kernels go after
  // the returned completion, the end of the previous turn's last kernel.
  Completion begin_turn();
  void end_turn(const Completion& last);

 private:
  Timeline* timeline_;
  const GpuSpec* spec_;
  ShareOptions options_;
  const SharingPolicy* sharing_;
  DeviceMemory memory_;
  const Link* h2d_ = nullptr;
  const Link* d2h_ = nullptr;
  const Link* compute_ = nullptr;
  std::mutex slices_mu_;
  int sevenths_ = 0, eighths_ = 0;
  std::vector<int> instances_;  // per profile
  std::mutex turn_mu_;
  Completion last_turn_;
};

}  // namespace gpemu
