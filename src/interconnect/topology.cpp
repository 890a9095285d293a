#include "gpemu/interconnect.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

std::string_view to_string(Fabric f) {
  switch (f) {
    case Fabric::Auto: return "auto";
    case Fabric::NVSwitch: return "NVSwitch";
    case Fabric::HybridCubeMesh: return "hybrid cube-mesh";
    case Fabric::NVLinkBridge: return "NVLink bridge";
    case Fabric::FullMesh: return "full mesh";
    case Fabric::Pcie: return "PCIe";
  }
  return "?";
}

std::string_view to_string(PathKind k) {
  switch (k) {
    case PathKind::Self: return "self";
    case PathKind::NVLink: return "NVLink";
    case PathKind::PcieSwitch: return "PCIe switch";
    case PathKind::PcieHost: return "PCIe host";
  }
  return "?";
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::SwitchUplinkH2D: return "switch uplink H2D";
    case LinkKind::SwitchUplinkD2H: return "switch uplink D2H";
    case LinkKind::PcieP2P: return "PCIe P2P";
    case LinkKind::NVLink: return "NVLink";
  }
  return "?";
}

Fabric default_fabric(const GpuSpec& spec) {
  if (spec.nvlink_gbs <= 0) return Fabric::Pcie;
  if (spec.vendor == "AMD") return Fabric::FullMesh;
  std::string id = spec.id;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::toupper(c); });
  // The catalog gives PCIe cards sold with an NVLink bridge the bridge's
  // figure (docs/catalog.md); RTX 6000 is a PCIe card without "PCIE" in its id.
  const bool sxm = id.find("PCIE") == std::string::npos && spec.vendor == "NVIDIA" &&
                   (id.find("SXM") != std::string::npos || spec.architecture == "Blackwell");
  if (!sxm) return Fabric::NVLinkBridge;
  if (spec.architecture == "Volta" || spec.architecture == "Pascal") return Fabric::HybridCubeMesh;
  return Fabric::NVSwitch;
}

namespace {

// NVLink connections between the GPUs of a DGX-1 with V100 (6 per GPU), as
// `nvidia-smi topo -m` reports them (NV1/NV2); docs/interconnect.md.
constexpr int kDgx1Bricks[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1}, {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};
constexpr int kDgx1BricksPerGpu = 6;
constexpr int kFullMeshPeers = 7;  // MI300X: 7 Infinity Fabric links per GPU, one to each peer of an 8-GPU node

}  // namespace

Node::Node(Timeline& timeline, const GpuSpec& spec, NodeOptions options)
    : timeline_(&timeline), spec_(&spec), options_(std::move(options)) {
  const int n = options_.gpus;
  if (n < 1) throw InputError(fmt::format("node of {} GPUs: need at least 1", n));
  if (options_.gpus_per_switch < 1)
    throw InputError(fmt::format("gpus_per_switch {}: need at least 1", options_.gpus_per_switch));
  if (!(options_.nvlink_efficiency > 0 && options_.nvlink_efficiency <= 1))
    throw InputError(fmt::format("nvlink_efficiency {}: accepted (0, 1]", options_.nvlink_efficiency));
  fabric_ = options_.fabric == Fabric::Auto ? default_fabric(spec) : options_.fabric;
  const double nvlink_total_gbs = options_.nvlink_gbs.value_or(spec.nvlink_gbs);
  if (fabric_ != Fabric::Pcie && !(nvlink_total_gbs > 0))
    throw InputError(
        fmt::format("{} fabric for {}: the GPU has no NVLink bandwidth (nvlink_gbs {}); use the PCIe fabric "
                    "or give NodeOptions::nvlink_gbs",
                    to_string(fabric_), spec.id, nvlink_total_gbs));
  if ((fabric_ == Fabric::HybridCubeMesh || fabric_ == Fabric::FullMesh) && n > 8)
    throw InputError(fmt::format("{} fabric of {} GPUs: it connects at most 8", to_string(fabric_), n));

  pcie_ = options_.device.pcie.value_or(PcieModel::for_link(spec.pcie_gen, spec.pcie_lanes));
  const PcieModel& pcie = pcie_;
  const double uplink_bps =
      options_.switch_uplink_gbs.value_or(PcieModel::for_link(pcie.generation, 16).pinned_gbs) * 1e9;
  const double own_pcie_bps = pcie.pinned_gbs * 1e9;

  // NVLink: bandwidth per direction, and how it splits into connections.
  bricks_.assign(n, std::vector<int>(n, 0));
  if (fabric_ != Fabric::Pcie) {
    nvlink_bps_ = nvlink_total_gbs / 2 * options_.nvlink_efficiency * 1e9;
    brick_bps_ = nvlink_bps_;
    if (fabric_ == Fabric::HybridCubeMesh) {
      brick_bps_ = nvlink_bps_ / kDgx1BricksPerGpu;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) bricks_[a][b] = kDgx1Bricks[a][b];
    } else if (fabric_ == Fabric::FullMesh) {
      brick_bps_ = nvlink_bps_ / kFullMeshPeers;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) bricks_[a][b] = a != b ? 1 : 0;
    } else if (fabric_ == Fabric::NVLinkBridge) {
      for (int a = 0; a + 1 < n; a += 2) bricks_[a][a + 1] = bricks_[a + 1][a] = 1;
    }
  }
  auto nvlinked = [&](int a, int b) { return fabric_ == Fabric::NVSwitch || bricks_[a][b] > 0; };
  auto sw = [&](int gpu) { return gpu / options_.gpus_per_switch; };
  for (int g = 0; g < n; ++g) switch_.push_back(sw(g));

  // An uplink is simulated as shared when several GPUs sit under its switch
  // or peer traffic leaving the switch crosses it; otherwise it carries one
  // GPU's copies, which that GPU's copy engines serialise.
  bool uplink_carries_peers = false;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b && sw(a) != sw(b) && !nvlinked(a, b)) uplink_carries_peers = true;
  const int switches = (n + options_.gpus_per_switch - 1) / options_.gpus_per_switch;
  for (int s = 0; s < switches; ++s) {
    const int under = std::min(options_.gpus_per_switch, n - s * options_.gpus_per_switch);
    const bool uplink_shared = under > 1 || uplink_carries_peers;
    uplink_h2d_.push_back(&timeline.add_link(fmt::format("switch{} uplink H2D", s), uplink_bps, uplink_shared));
    uplink_d2h_.push_back(&timeline.add_link(fmt::format("switch{} uplink D2H", s), uplink_bps, uplink_shared));
    links_.push_back({LinkKind::SwitchUplinkH2D, s, uplink_h2d_.back()});
    links_.push_back({LinkKind::SwitchUplinkD2H, s, uplink_d2h_.back()});
  }

  egress_.assign(n, nullptr);
  p2p_tx_.assign(n, nullptr);
  for (int g = 0; g < n; ++g) {
    const int index = options_.first_device_index + g;
    if (fabric_ != Fabric::Pcie) {
      egress_[g] = &timeline.add_link(fmt::format("GPU{} NVLink", index), nvlink_bps_);
      links_.push_back({LinkKind::NVLink, g, egress_[g]});
    }
    bool needs_p2p = false;
    for (int o = 0; o < n; ++o)
      if (o != g && sw(o) == sw(g) && !nvlinked(g, o)) needs_p2p = true;
    if (needs_p2p) {
      p2p_tx_[g] = &timeline.add_link(fmt::format("GPU{} PCIe P2P", index), own_pcie_bps);
      links_.push_back({LinkKind::PcieP2P, g, p2p_tx_[g]});
    }
  }

  if (!options_.devices) return;
  for (int g = 0; g < n; ++g) {
    DeviceOptions d = options_.device;
    d.index = options_.first_device_index + g;
    d.pcie = pcie;
    d.host_link_h2d = uplink_h2d_[sw(g)];
    d.host_link_d2h = uplink_d2h_[sw(g)];
    devices_.push_back(std::make_unique<Device>(timeline, spec, d));
  }
}

Node::Node(const NodeGpus& on, DeviceOptions device, int first_device_index) {
  if (!on.node) throw std::logic_error("Node: a view of no node");
  const Node& hw = *on.node;
  const int n = static_cast<int>(on.gpus.size());
  if (n < 1) throw InputError("node view of no GPUs: give at least 1");
  if (!on.shares.empty() && static_cast<int>(on.shares.size()) != n)
    throw std::logic_error(fmt::format("Node: {} shared GPUs for {} GPUs", on.shares.size(), n));
  for (int i = 0; i < n; ++i) {
    hw.check_gpu(on.gpus[i]);
    for (int j = 0; j < i; ++j)
      if (on.gpus[j] == on.gpus[i])
        throw InputError(fmt::format("node view: GPU {} is given twice; give each GPU once", on.gpus[i]));
  }
  timeline_ = hw.timeline_;
  spec_ = hw.spec_;
  options_ = hw.options_;
  options_.gpus = n;
  options_.device = device;
  options_.first_device_index = first_device_index;
  options_.devices = true;
  fabric_ = hw.fabric_;
  pcie_ = hw.pcie_;
  uplink_h2d_ = hw.uplink_h2d_;
  uplink_d2h_ = hw.uplink_d2h_;
  nvlink_bps_ = hw.nvlink_bps_;
  brick_bps_ = hw.brick_bps_;
  links_ = hw.links_;
  bricks_.assign(n, std::vector<int>(n, 0));
  for (int i = 0; i < n; ++i) {
    const int g = on.gpus[i];
    switch_.push_back(hw.switch_[g]);
    egress_.push_back(hw.egress_[g]);
    p2p_tx_.push_back(hw.p2p_tx_[g]);
    for (int j = 0; j < n; ++j) bricks_[i][j] = hw.bricks_[g][on.gpus[j]];
  }
  for (int i = 0; i < n; ++i) {
    DeviceOptions d = device;
    d.index = first_device_index + i;
    d.pcie = pcie_;
    d.host_link_h2d = uplink_h2d_[switch_[i]];
    d.host_link_d2h = uplink_d2h_[switch_[i]];
    if (!on.shares.empty()) d.share = on.shares[i];
    devices_.push_back(std::make_unique<Device>(*timeline_, *spec_, d));
  }
}

void Node::check_gpu(int gpu) const {
  if (gpu < 0 || gpu >= size()) throw InputError(fmt::format("GPU {}: the node has GPUs 0 to {}", gpu, size() - 1));
}

Device& Node::device(int gpu) const {
  check_gpu(gpu);
  if (devices_.empty()) throw std::logic_error("Node::device: a node of links only has no devices (NodeGpus)");
  return *devices_[gpu];
}

int Node::position_of(const Device& device) const {
  for (int g = 0; g < static_cast<int>(devices_.size()); ++g)
    if (devices_[g].get() == &device) return g;
  throw InputError(fmt::format("GPU {} ({}) is not a device of this node", device.index(), device.spec().id));
}

int Node::switch_of(int gpu) const {
  check_gpu(gpu);
  return switch_[gpu];
}

const Link& Node::switch_uplink_h2d(int sw) const { return *uplink_h2d_.at(sw); }
const Link& Node::switch_uplink_d2h(int sw) const { return *uplink_d2h_.at(sw); }
const Link* Node::nvlink_egress(int gpu) const {
  check_gpu(gpu);
  return egress_[gpu];
}

int Node::nvlinks_between(int a, int b) const {
  check_gpu(a);
  check_gpu(b);
  return bricks_[a][b];
}

int Node::link_count(LinkKind kind) const {
  return static_cast<int>(
      std::count_if(links_.begin(), links_.end(), [&](const NodeLink& l) { return l.kind == kind; }));
}

Path Node::path(int from, int to) const {
  check_gpu(from);
  check_gpu(to);
  Path p;
  if (from == to) return p;
  if (fabric_ == Fabric::NVSwitch || bricks_[from][to] > 0) {
    p.kind = PathKind::NVLink;
    p.link = egress_[from];
    p.nvlinks = bricks_[from][to];
    p.rate_cap = fabric_ == Fabric::NVSwitch ? 0 : p.nvlinks * brick_bps_;
    p.latency = options_.nvlink_latency;
    return p;
  }
  p.latency = options_.pcie_p2p_latency;
  p.rate_cap = pcie_.pinned_gbs * 1e9;
  if (switch_of(from) == switch_of(to)) {
    p.kind = PathKind::PcieSwitch;
    p.link = p2p_tx_[from];
  } else {
    p.kind = PathKind::PcieHost;
    p.link = uplink_d2h_[switch_of(from)];
  }
  return p;
}

Completion Node::copy_peer(Stream& stream, int to, std::uint64_t bytes, std::string_view name) {
  const int from = position_of(stream.device());
  check_gpu(to);
  if (from == to) throw InputError(fmt::format("peer copy from GPU {} to itself: give another GPU of the node", from));
  const Path p = path(from, to);
  OpSpec spec;
  spec.duration = p.latency;
  spec.link = p.link;
  spec.bytes = static_cast<double>(bytes);
  spec.rate_cap = p.rate_cap;
  spec.tag.name = name;
  spec.tag.category = "p2p";
  return stream.enqueue(spec, Engine::CopyD2H);
}

}  // namespace gpemu
