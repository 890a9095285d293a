// A sharing policy: how processes (jobs) placed on one GPU share it.
//
// One small interface, asked by the GPU (SharedGpu, device.h) and the jobs on
// it, in two parts:
//   - what may run next on the device: whether a process's step has the GPU
//     alone (its kernels from the first to the last, steps in the order they
//     ask), and how kernels in flight divide the compute engine (a timeline
//     link whose bytes are nanoseconds of kernel time, divided by one of the
//     timeline's rules: ShareRule);
//   - what a job's kernels cost next to others': on a slice of its own (MIG),
//     a kernel's time from its demand (KernelDemand) and the slice's share.
// The built-in policies are one file each in src/device/policies/ (fifo,
// timeslice, priority, mps, mig); a new one is a file there and a line in its
// registry, or, from a program, register_sharing_policy. docs/sharing.md has
// the policies' bases; docs/architecture.md where they sit.
//
// Thread safety: policies are immutable; the registry may be used from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

class SharingPolicy {
 public:
  virtual ~SharingPolicy() = default;
  // Its name in jobs files and flags (--policy); unique among the registered.
  virtual std::string_view name() const = 0;
  // InputError naming what the card or the options lack (MIG on a card without it).
  virtual void check(const GpuSpec& /*gpu*/, const ShareOptions& /*options*/) const {}

  // ---- what may run next on the device
  // A process's step holds the GPU from its first kernel to its last, steps
  // in the order their first kernels were issued (SharedGpu::begin_turn).
  virtual bool exclusive_steps() const { return false; }
  // How the kernels in flight divide the compute engine; nullopt: each kernel
  // keeps its own cost and runs as issued (behind exclusive steps, or on its slice).
  virtual std::optional<LinkShare> compute_share(const ShareOptions& /*options*/) const { return std::nullopt; }

  // ---- what a job's kernels cost next to others'
  // Each process runs on a MIG slice of its own (its memory the slice's).
  virtual bool slices() const { return false; }
  // A kernel's time on `slice`, from its time on the whole GPU alone.
  virtual Duration kernel_on_slice(Duration alone, KernelDemand /*demand*/, const MigProfile& /*slice*/) const {
    return alone;
  }
};

// The policy a handle names; InputError naming the registered ones when none has that name.
const SharingPolicy& sharing_policy(SharePolicy policy);
// Adds a policy (from then on parse_share_policy and SharedGpu know it);
// InputError when its name is taken or empty.
void register_sharing_policy(std::shared_ptr<const SharingPolicy> policy);
// The registered policies' names, built-in ones first.
std::vector<std::string> sharing_policy_names();

}  // namespace gpemu
