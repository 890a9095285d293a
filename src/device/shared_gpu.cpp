#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/sharing_policy.h"

namespace gpemu {

std::vector<MigProfile> mig_profiles(const GpuSpec& gpu) {
  // The GPU-instance profiles of NVIDIA's MIG user guide ("Supported MIG
  // Profiles"): the same shapes on every 7-slice card, named by its memory.
  // Media-extension (+me) variants are left out: they differ in decoders only.
  struct Names {
    const char* id;
    int gb1, gb2, gb4, gb8;  // the "gb" of 1/8, 2/8, 4/8 and all of the memory
  };
  static const Names names[] = {
      {"A100-SXM4-40GB", 5, 10, 20, 40},  {"A100-PCIE-40GB", 5, 10, 20, 40},   {"A100-SXM4-80GB", 10, 20, 40, 80},
      {"A100-PCIE-80GB", 10, 20, 40, 80}, {"H100-SXM5-80GB", 10, 20, 40, 80},  {"H100-PCIE-80GB", 10, 20, 40, 80},
      {"GH200-96GB", 12, 24, 48, 96},     {"H200-SXM-141GB", 18, 35, 71, 141}, {"B200", 23, 45, 90, 180},
  };
  for (const Names& n : names) {
    if (gpu.id != n.id) continue;
    return {
        {fmt::format("1g.{}gb", n.gb1), 1, 1, 7}, {fmt::format("1g.{}gb", n.gb2), 1, 2, 4},
        {fmt::format("2g.{}gb", n.gb2), 2, 2, 3}, {fmt::format("3g.{}gb", n.gb4), 3, 4, 2},
        {fmt::format("4g.{}gb", n.gb4), 4, 4, 1}, {fmt::format("7g.{}gb", n.gb8), 7, 8, 1},
    };
  }
  return {};
}

const MigProfile& find_mig_profile(const GpuSpec& gpu, std::string_view name) {
  // One table per card, made once (the catalog is fixed).
  static std::mutex mu;
  static std::vector<std::pair<const GpuSpec*, std::vector<MigProfile>>> tables;
  std::lock_guard lock(mu);
  auto it = std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return t.first == &gpu; });
  if (it == tables.end()) {
    tables.emplace_back(&gpu, mig_profiles(gpu));
    it = std::prev(tables.end());
  }
  const std::vector<MigProfile>& profiles = it->second;
  if (profiles.empty())
    throw InputError(
        fmt::format("MIG profile '{}': {} has no MIG; cards with MIG: A100, H100, GH200, H200, B200", name, gpu.id));
  for (const MigProfile& p : profiles)
    if (p.name == name) return p;
  std::string known;
  for (const MigProfile& p : profiles) known += (known.empty() ? "" : ", ") + p.name;
  throw InputError(fmt::format("MIG profile '{}' is not one of {}'s: {}", name, gpu.id, known));
}

SharedGpu::SharedGpu(Timeline& timeline, const GpuSpec& spec, ShareOptions options)
    : timeline_(&timeline),
      spec_(&spec),
      options_(options),
      sharing_(&sharing_policy(options.policy)),
      memory_(Device::tensor_capacity(spec, 0, options.workspace_margin)) {
  sharing_->check(spec, options_);
  if (options_.timeslice <= 0 || options_.switch_cost < 0)
    throw InputError(fmt::format("time-slicing: the quantum ({} ns) must be > 0 and the switch cost ({} ns) >= 0",
                                 options_.timeslice, options_.switch_cost));
  instances_.assign(mig_profiles(spec).size(), 0);
  const PcieModel pcie = PcieModel::for_link(spec.pcie_gen, spec.pcie_lanes);
  h2d_ = &timeline.add_link(fmt::format("{} PCIe H2D (shared)", spec.id), pcie.pinned_gbs * 1e9);
  d2h_ = &timeline.add_link(fmt::format("{} PCIe D2H (shared)", spec.id), pcie.pinned_gbs * 1e9);
  // One byte is one nanosecond of kernel time on the GPU alone.
  if (const std::optional<LinkShare> share = sharing_->compute_share(options_))
    compute_ =
        &timeline.add_link(fmt::format("{} compute ({})", spec.id, to_string(options_.policy)), 1e9, true, *share);
}

bool SharedGpu::exclusive_steps() const { return sharing_->exclusive_steps(); }
bool SharedGpu::slices() const { return sharing_->slices(); }

namespace {
// Where `p` stands in the card's profiles (instances are counted per profile).
std::size_t profile_index(const GpuSpec& gpu, const MigProfile& p) {
  const std::vector<MigProfile> all = mig_profiles(gpu);
  return static_cast<std::size_t>(
      std::find_if(all.begin(), all.end(), [&](const MigProfile& q) { return q.name == p.name; }) - all.begin());
}
}  // namespace

const MigProfile& SharedGpu::take_slice(std::string_view name) {
  const MigProfile& p = find_mig_profile(*spec_, name);
  const std::size_t i = profile_index(*spec_, p);
  std::lock_guard lock(slices_mu_);
  if (sevenths_ + p.compute_sevenths > 7 || eighths_ + p.memory_eighths > 8 || instances_[i] >= p.max_instances)
    throw InputError(
        fmt::format("MIG slice {} does not fit on the {}: {}/7 of its SMs and {}/8 of its memory are "
                    "taken already, and {} of at most {} {} slices",
                    p.name, spec_->id, sevenths_, eighths_, instances_[i], p.max_instances, p.name));
  sevenths_ += p.compute_sevenths;
  eighths_ += p.memory_eighths;
  ++instances_[i];
  return p;
}

void SharedGpu::give_slice(const MigProfile& p) {
  const std::size_t i = profile_index(*spec_, p);
  std::lock_guard lock(slices_mu_);
  sevenths_ -= p.compute_sevenths;
  eighths_ -= p.memory_eighths;
  if (i < instances_.size()) --instances_[i];
}

Completion SharedGpu::begin_turn() {
  turn_mu_.lock();
  return last_turn_;
}

void SharedGpu::end_turn(const Completion& last) {
  last_turn_ = last;
  turn_mu_.unlock();
}

}  // namespace gpemu
